package ot

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// newTape returns a tape on a one-worker CPU backend (the test machine is shared).
func newTape(t testing.TB) *engine.Tape {
	t.Helper()
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return engine.NewTape(be)
}

// problem is a padded batch with host copies of every input. Padded entries hold random
// values, not zeros, so that a test notices when they leak into a result.
type problem struct {
	B, S, N, O, d    int
	pred, clean, obs []int
	hhat, h, a, u    []float32 // (B, S, d), (B, N, d), (B, O, S), (B, O, d)
	m                []float32 // (B)
	z                float32
}

// newProblem draws clean rows, predictions near a permutation of them (plus unrelated
// surplus predictions) and a mixture U = A_true [H; noise] observed on O rows.
func newProblem(rng *rand.Rand, B, S, N, O, d int, pred, clean, obs []int) *problem {
	p := &problem{B: B, S: S, N: N, O: O, d: d, pred: pred, clean: clean, obs: obs, z: 0.8}
	normal := func(n int, sc float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(sc * rng.NormFloat64())
		}
		return x
	}
	p.h = normal(B*N*d, 1)
	p.hhat = normal(B*S*d, 1)
	p.a = normal(B*O*S, 0.5)
	p.u = normal(B*O*d, 1)
	p.m = make([]float32, B)
	for b := range B {
		var s float64
		for k := range clean[b] {
			s += norm(p.h[(b*N+k)*d : (b*N+k+1)*d])
		}
		p.m[b] = float32(s / float64(clean[b]))
		perm := rng.Perm(clean[b])
		for j := range min(pred[b], clean[b]) {
			src, dst := p.h[(b*N+perm[j])*d:], p.hhat[(b*S+j)*d:]
			for i := range d {
				dst[i] = src[i] + float32(0.3*rng.NormFloat64())
			}
		}
	}
	return p
}

func norm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// vars are the tensors a test differentiates with respect to.
type vars struct{ hhat, a, z *engine.Tensor }

// sets is the problem's Sets with predictions v.hhat.
func (p *problem) sets(tp *engine.Tape, v vars) Sets {
	return Sets{HHat: v.hhat, H: tp.Input(p.h, p.B, p.N, p.d), PredRows: p.pred, CleanRows: p.clean, MeanNorm: p.m}
}

// mixing is the problem's Mixing with mixing matrices v.a.
func (p *problem) mixing(tp *engine.Tape, v vars) Mixing {
	return Mixing{AHat: v.a, UObs: tp.Input(p.u, p.B, p.O, p.d), ObsRows: p.obs}
}

// grads are the engine's gradients of a loss (zeros for an input it does not read).
type grads struct {
	hhat, a []float32
	z       float32
}

// eval records f on a fresh tape step with the given inputs as Variables and returns the
// loss, the tensor f returns as extra (nil allowed; read before the next Reset) and, when
// grad is set, the gradients.
func (p *problem) eval(t testing.TB, tp *engine.Tape, hhat, a []float32, z float32, grad bool,
	f func(tp *engine.Tape, v vars) (loss, extra *engine.Tensor, err error)) (float64, []float32, grads) {
	t.Helper()
	tp.Reset()
	v := vars{hhat: tp.Variable(hhat, p.B, p.S, p.d), a: tp.Variable(a, p.B, p.O, p.S), z: tp.Variable([]float32{z}, 1)}
	loss, extra, err := f(tp, v)
	if err != nil {
		t.Fatal(err)
	}
	var ex []float32
	if extra != nil {
		ex = extra.ToHost()
	}
	g := grads{hhat: make([]float32, len(hhat)), a: make([]float32, len(a))}
	if grad {
		if err := tp.Backward(loss); err != nil {
			t.Fatal(err)
		}
		if gt := v.hhat.Grad(); gt != nil {
			g.hhat = gt.ToHost()
		}
		if gt := v.a.Grad(); gt != nil {
			g.a = gt.ToHost()
		}
		if gt := v.z.Grad(); gt != nil {
			g.z = gt.ToHost()[0]
		}
	}
	return float64(loss.Item()), ex, g
}

// hostCost is example b's real cost block ||hhat_j - h_k||^2 / m^2, (S_b x n_b).
func (p *problem) hostCost(hhat []float64, b int) []float64 {
	Sb, nb, d := p.pred[b], p.clean[b], p.d
	m := float64(p.m[b])
	c := make([]float64, Sb*nb)
	for j := range Sb {
		for k := range nb {
			var s float64
			for i := range d {
				diff := hhat[(b*p.S+j)*d+i] - float64(p.h[(b*p.N+k)*d+i])
				s += diff * diff
			}
			c[j*nb+k] = s / (m * m)
		}
	}
	return c
}

// hostOT is the float64 mirror of OT: the batch-mean loss and every example's plan over its
// real rows (and dustbins: row S_b, column n_b).
func (p *problem) hostOT(cfg Config, hhat []float64, z float64) (float64, [][]float64) {
	var loss float64
	plans := make([][]float64, p.B)
	for b := range p.B {
		Sb, nb := p.pred[b], p.clean[b]
		c := p.hostCost(hhat, b)
		switch cfg.Variant {
		case Dustbin:
			S1, N1 := Sb+1, nb+1
			cb := make([]float64, S1*N1)
			for j := range S1 {
				for k := range N1 {
					if j < Sb && k < nb {
						cb[j*N1+k] = c[j*nb+k]
					} else {
						cb[j*N1+k] = z
					}
				}
			}
			a, bm := make([]float64, S1), make([]float64, N1)
			for j := range Sb {
				a[j] = 1 / float64(nb)
			}
			a[Sb] = 1
			for k := range nb {
				bm[k] = 1 / float64(nb)
			}
			bm[nb] = float64(Sb) / float64(nb)
			plan := hostSinkhorn(cb, S1, N1, a, bm, cfg.Eps, cfg.Iters, 1)
			for j := range Sb {
				for k := range nb {
					loss += plan[j*N1+k] * c[j*nb+k]
				}
			}
			plans[b] = plan
		default:
			a, bm := uniform(Sb), uniform(nb)
			tau := 1.0
			if cfg.Variant == Unbalanced {
				tau = cfg.Rho / (cfg.Rho + cfg.Eps)
			}
			plan := hostSinkhorn(c, Sb, nb, a, bm, cfg.Eps, cfg.Iters, tau)
			for i := range plan {
				loss += plan[i] * c[i]
			}
			plans[b] = plan
		}
	}
	return loss / float64(p.B), plans
}

// hostCycle mirrors Cycle.
func (p *problem) hostCycle(hhat, a []float64) float64 {
	var loss float64
	for b := range p.B {
		var num, den float64
		for i := range p.obs[b] {
			for c := range p.d {
				var s float64
				for j := range p.pred[b] {
					s += a[(b*p.O+i)*p.S+j] * hhat[(b*p.S+j)*p.d+c]
				}
				u := float64(p.u[(b*p.O+i)*p.d+c])
				num += (s - u) * (s - u)
				den += u * u
			}
		}
		loss += num / den
	}
	return loss / float64(p.B)
}

// hostMix mirrors MixPenalty.
func (p *problem) hostMix(a []float64) float64 {
	var loss float64
	for b := range p.B {
		var s float64
		for i := range p.obs[b] {
			for j := range p.pred[b] {
				v := a[(b*p.O+i)*p.S+j]
				s += v * v
			}
		}
		loss += s / float64(p.obs[b]*p.pred[b])
	}
	return loss / float64(p.B)
}

// hostNorm mirrors RowNormPenalty.
func (p *problem) hostNorm(hhat []float64) float64 {
	var loss float64
	for b := range p.B {
		var mh, m float64
		for j := range p.pred[b] {
			var s float64
			for _, v := range hhat[(b*p.S+j)*p.d : (b*p.S+j+1)*p.d] {
				s += v * v
			}
			mh += math.Sqrt(s)
		}
		for k := range p.clean[b] {
			m += norm(p.h[(b*p.N+k)*p.d : (b*p.N+k+1)*p.d])
		}
		diff := mh/float64(p.pred[b]) - m/float64(p.clean[b])
		loss += diff * diff / (float64(p.m[b]) * float64(p.m[b]))
	}
	return loss / float64(p.B)
}

// hostUnmix mirrors Unmix's total.
func (p *problem) hostUnmix(cfg Config, hhat, a []float64, z float64) float64 {
	l, _ := p.hostOT(cfg, hhat, z)
	return cfg.WCyc*p.hostCycle(hhat, a) + cfg.WOT*l + cfg.LambdaA*p.hostMix(a) + cfg.WNorm*p.hostNorm(hhat)
}

func uniform(n int) []float64 {
	u := make([]float64, n)
	for i := range u {
		u[i] = 1 / float64(n)
	}
	return u
}

// fdCheck compares the engine gradient got with central differences of the float64 function
// f at x (step h) and returns the largest error relative to the largest |gradient|.
func fdCheck(t *testing.T, name string, got []float32, x []float64, h float64, f func([]float64) float64) float64 {
	t.Helper()
	var maxErr, maxG float64
	for i := range x {
		orig := x[i]
		x[i] = orig + h
		lp := f(x)
		x[i] = orig - h
		lm := f(x)
		x[i] = orig
		fd := (lp - lm) / (2 * h)
		maxErr = math.Max(maxErr, math.Abs(fd-float64(got[i])))
		maxG = math.Max(maxG, math.Abs(fd))
	}
	if maxG == 0 {
		t.Fatalf("%s: every finite difference is 0: the check cannot fail", name)
	}
	return maxErr / maxG
}
