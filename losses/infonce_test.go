package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// hostLoss is the float64 composition cos(q, cand) / tau followed by InfoNCEHost.
func hostLoss(q, cand []float64, B, C, e int, tau float64, pos [][]int) float64 {
	s := make([]float64, B*C)
	for b := 0; b < B; b++ {
		for c := 0; c < C; c++ {
			var dot, nq, nc float64
			for j := 0; j < e; j++ {
				dot += q[b*e+j] * cand[c*e+j]
				nq += q[b*e+j] * q[b*e+j]
				nc += cand[c*e+j] * cand[c*e+j]
			}
			s[b*C+c] = dot / math.Sqrt(nq*nc) / tau
		}
	}
	l, _, err := InfoNCEHost(s, C, pos)
	if err != nil {
		panic(err)
	}
	return l
}

// TestInfoNCEOnEngine: the engine loss equals the float64 host loss, and its gradients with respect
// to the queries and to a learned log-temperature equal central differences of the host loss.
func TestInfoNCEOnEngine(t *testing.T) {
	const B, C, e = 3, 7, 5
	pos := [][]int{{0, 3}, {1}, {2, 5, 6}}
	rng := rand.New(rand.NewPCG(3, 4))
	q64, c64 := make([]float64, B*e), make([]float64, C*e)
	for i := range q64 {
		q64[i] = float64(float32(rng.NormFloat64()))
	}
	for i := range c64 {
		c64[i] = float64(float32(rng.NormFloat64()))
	}
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const tau = 0.1
	ps := engine.NewParams()
	logTau := ps.Add("log_tau", []int{1}, false)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	if err := logTau.CopyFrom([]float32{float32(math.Log(tau))}); err != nil {
		t.Fatal(err)
	}
	for _, learned := range []bool{false, true} {
		tp := engine.NewTape(be)
		q := tp.Variable(f32(q64), B, e)
		cand := tp.Input(f32(c64), C, e)
		temp := Temperature{Tau: tau}
		if learned {
			temp = Temperature{Log: logTau}
		}
		loss, err := InfoNCE(tp, q, cand, pos, temp)
		if err != nil {
			t.Fatal(err)
		}
		want := hostLoss(q64, c64, B, C, e, tau, pos)
		if got := float64(loss.Item()); math.Abs(got-want) > 1e-5*math.Abs(want) {
			t.Errorf("learned=%v: loss %v, host %v", learned, got, want)
		}
		ps.ZeroGrad()
		if err := tp.Backward(loss); err != nil {
			t.Fatal(err)
		}
		dq := q.Grad().ToHost()
		const h = 1e-6
		for i := range q64 {
			orig := q64[i]
			q64[i] = orig + h
			lp := hostLoss(q64, c64, B, C, e, tau, pos)
			q64[i] = orig - h
			lm := hostLoss(q64, c64, B, C, e, tau, pos)
			q64[i] = orig
			if fd := (lp - lm) / (2 * h); math.Abs(float64(dq[i])-fd) > 1e-4*math.Max(1, math.Abs(fd)) {
				t.Errorf("learned=%v: dL/dq[%d] = %v, finite difference %v", learned, i, dq[i], fd)
			}
		}
		if learned {
			// d/dlog(tau) through tau = exp(log tau).
			lp := hostLoss(q64, c64, B, C, e, math.Exp(math.Log(tau)+h), pos)
			lm := hostLoss(q64, c64, B, C, e, math.Exp(math.Log(tau)-h), pos)
			fd := (lp - lm) / (2 * h)
			if got := float64(logTau.Grad().Item()); math.Abs(got-fd) > 1e-4*math.Max(1, math.Abs(fd)) {
				t.Errorf("dL/dlog_tau = %v, finite difference %v", got, fd)
			}
		}
	}
}

func TestInfoNCERejectsBadInput(t *testing.T) {
	be, err := cpu.New(cpu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tp := engine.NewTape(be)
	q := tp.Input(make([]float32, 2*4), 2, 4)
	cand := tp.Input(make([]float32, 3*4), 3, 4)
	cases := map[string]struct {
		pos [][]int
		tau Temperature
	}{
		"one positive list for two queries": {[][]int{{0}}, Temperature{Tau: 0.05}},
		"positive out of range":             {[][]int{{0}, {3}}, Temperature{Tau: 0.05}},
		"no positives":                      {[][]int{{0}, {}}, Temperature{Tau: 0.05}},
		"zero temperature":                  {[][]int{{0}, {1}}, Temperature{}},
	}
	for name, c := range cases {
		if _, err := InfoNCE(tp, q, cand, c.pos, c.tau); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := InfoNCE(tp, q, tp.Input(make([]float32, 3*5), 3, 5), [][]int{{0}, {1}}, Temperature{Tau: 0.05}); err == nil {
		t.Error("queries and candidates of different widths accepted")
	}
}
