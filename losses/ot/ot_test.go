package ot

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/eval/assign"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cases := []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Variant = "sliced" }, `variant: "sliced"`},
		{func(c *Config) { c.Eps = 0 }, "eps: 0, want a value in [0.0001, 10000]"},
		{func(c *Config) { c.Eps = math.NaN() }, "eps: NaN"},
		{func(c *Config) { c.Iters = 0 }, "iters: 0, want an integer in [1, 10000]"},
		{func(c *Config) { c.Rho = -1 }, "rho: -1"},
		{func(c *Config) { c.DustbinInit = math.Inf(1) }, "dustbin_init: +Inf"},
		{func(c *Config) { c.WCyc = -0.5 }, "w_cyc: -0.5, want a value in [0, 1000000]"},
		{func(c *Config) { c.LambdaA = math.Inf(1) }, "lambda_a: +Inf"},
		{func(c *Config) { c.WCyc, c.WOT, c.LambdaA, c.WNorm = 0, 0, 0, 0 }, "all 0"},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}

func TestSinkhornHostKnownAnswers(t *testing.T) {
	// A constant cost makes the plan the independent coupling a b^T, whatever eps.
	a, b := []float64{0.5, 0.3, 0.2}, []float64{0.25, 0.75}
	plan, err := SinkhornHost([]float64{2, 2, 2, 2, 2, 2}, 3, 2, a, b, 0.01, 3)
	if err != nil {
		t.Fatal(err)
	}
	for j := range 3 {
		for k := range 2 {
			if d := math.Abs(plan[j*2+k] - a[j]*b[k]); d > 1e-12 {
				t.Errorf("plan[%d][%d] = %v, want %v", j, k, plan[j*2+k], a[j]*b[k])
			}
		}
	}
	// A zero marginal entry is a padded row: no mass, the rest unaffected.
	plan2, err := SinkhornHost([]float64{0, 1, 5, 5, 1, 0}, 3, 2, []float64{0.5, 0, 0.5}, []float64{0.5, 0.5}, 0.05, 200)
	if err != nil {
		t.Fatal(err)
	}
	if plan2[2] != 0 || plan2[3] != 0 {
		t.Errorf("padded row got mass %v", plan2[2:4])
	}
	if plan2[0] < 0.49 || plan2[5] < 0.49 {
		t.Errorf("plan %v does not follow the cheap diagonal", plan2)
	}
	for _, bad := range []func() error{
		func() error {
			_, err := SinkhornHost([]float64{1}, 1, 1, []float64{1}, []float64{2}, 0.1, 1)
			return err
		},
		func() error {
			_, err := SinkhornHost([]float64{math.NaN()}, 1, 1, []float64{1}, []float64{1}, 0.1, 1)
			return err
		},
		func() error {
			_, err := SinkhornHost([]float64{1, 2}, 1, 1, []float64{1}, []float64{1}, 0.1, 1)
			return err
		},
		func() error {
			_, err := SinkhornHost([]float64{1}, 1, 1, []float64{0}, []float64{0}, 0.1, 1)
			return err
		},
		func() error { _, err := SinkhornHost([]float64{1}, 1, 1, []float64{1}, []float64{1}, 0, 1); return err },
		func() error {
			_, err := UnbalancedSinkhornHost([]float64{1}, 1, 1, []float64{1}, []float64{2}, 0.1, 0, 1)
			return err
		},
	} {
		if bad() == nil {
			t.Error("invalid input accepted")
		}
	}
}

// TestSinkhornHostHungarian: as eps -> 0 the entropic plan's cost <P, C> falls to the exact
// assignment cost / n, within eps log n (the entropy bound).
func TestSinkhornHostHungarian(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 5 {
		n := 4 + trial
		c := make([]float64, n*n)
		for i := range c {
			c[i] = rng.Float64() * 4
		}
		res, err := assign.Minimize(mat.NewDense(n, n, c))
		if err != nil {
			t.Fatal(err)
		}
		opt := res.Total / float64(n)
		prev := math.Inf(1)
		for _, eps := range []float64{0.3, 0.1, 0.03, 0.01, 0.003, 0.001} {
			plan, err := SinkhornHost(c, n, n, uniform(n), uniform(n), eps, int(40/eps))
			if err != nil {
				t.Fatal(err)
			}
			// A plan off its row marginals by viol (L1) can undercut any feasible plan by at
			// most viol * max cost; the columns are exact after the last update.
			var cost, viol float64
			for j := range n {
				var row float64
				for k := range n {
					cost += plan[j*n+k] * c[j*n+k]
					row += plan[j*n+k]
				}
				viol += math.Abs(row - 1/float64(n))
			}
			slack := 4*viol + 1e-12
			gap := cost - opt
			if gap < -slack || gap > eps*math.Log(float64(n))+slack {
				t.Errorf("n %d eps %v: <P,C> %v, assignment %v: gap %v outside [0, eps log n] (slack %.1e)", n, eps, cost, opt, gap, slack)
			}
			if gap > prev+slack {
				t.Errorf("n %d eps %v: gap %v grew from %v", n, eps, gap, prev)
			}
			prev = gap
		}
		if prev > 1e-4 {
			t.Errorf("n %d: gap %v at eps 1e-3", n, prev)
		}
	}
}

var variants = []Variant{Balanced, Dustbin, Unbalanced}

// otLoss is an eval closure for the OT loss that returns its plan as the extra tensor.
func otLoss(p *problem, cfg Config) func(tp *engine.Tape, v vars) (*engine.Tensor, *engine.Tensor, error) {
	return func(tp *engine.Tape, v vars) (*engine.Tensor, *engine.Tensor, error) {
		r, err := OT(tp, cfg, p.sets(tp, v), v.z)
		return r.Loss, r.Plan, err
	}
}

// TestOTMatchesHost: the tape's loss and plan equal the float64 mirror (which sees only the
// real rows), and padded plan entries are exactly 0.
func TestOTMatchesHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	p := newProblem(rng, 3, 6, 5, 4, 4, []int{6, 4, 5}, []int{5, 3, 2}, []int{4, 4, 4})
	tp := newTape(t)
	for _, v := range variants {
		for _, eps := range []float64{0.5, 0.05} {
			cfg := DefaultConfig()
			cfg.Variant, cfg.Eps, cfg.Iters = v, eps, 40
			loss, plan, _ := p.eval(t, tp, p.hhat, p.a, p.z, false, otLoss(p, cfg))
			want, plans := p.hostOT(cfg, to64(p.hhat), float64(p.z))
			S, N := p.S, p.N
			if v == Dustbin {
				S, N = S+1, N+1
			}
			// host is the host index of engine row or column i of a set with n real ones and
			// its dustbin at index bin; -1 when i is padding.
			host := func(i, n, bin int) int {
				switch {
				case i < n:
					return i
				case v == Dustbin && i == bin:
					return n
				}
				return -1
			}
			var maxDiff, maxP float64
			for b := range p.B {
				Sb, nb := p.pred[b], p.clean[b]
				cols := nb
				if v == Dustbin {
					cols++
				}
				for j := range S {
					for k := range N {
						got := float64(plan[(b*S+j)*N+k])
						hj, hk := host(j, Sb, p.S), host(k, nb, p.N)
						if hj < 0 || hk < 0 {
							if got != 0 {
								t.Errorf("%s: padded plan entry [%d][%d][%d] = %v", v, b, j, k, got)
							}
							continue
						}
						w := plans[b][hj*cols+hk]
						maxDiff = math.Max(maxDiff, math.Abs(got-w))
						maxP = math.Max(maxP, w)
					}
				}
			}
			rel := math.Abs(loss-want) / math.Abs(want)
			t.Logf("%s eps %v: loss %.6f host %.6f (rel %.1e), plan max |diff| %.1e (max entry %.2f)", v, eps, loss, want, rel, maxDiff, maxP)
			if rel > 2e-5 || maxDiff > 2e-5*maxP {
				t.Errorf("%s eps %v: engine differs from host: loss rel %.1e, plan %.1e", v, eps, rel, maxDiff)
			}
		}
	}
}

// TestOTGradients: dL_OT/dH_hat (and d/dscore for the dustbin) from the unrolled tape match
// central differences of the float64 mirror, and central differences of the float32 tape
// itself within float32 noise.
func TestOTGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	p := newProblem(rng, 2, 5, 4, 3, 3, []int{5, 3}, []int{4, 2}, []int{3, 3})
	tp := newTape(t)
	for _, v := range variants {
		for _, eps := range []float64{0.5, 0.1} {
			cfg := DefaultConfig()
			cfg.Variant, cfg.Eps, cfg.Iters, cfg.Rho = v, eps, 30, 0.7
			f := otLoss(p, cfg)
			_, _, g := p.eval(t, tp, p.hhat, p.a, p.z, true, f)
			x := to64(p.hhat)
			rel := fdCheck(t, string(v), g.hhat, x, 1e-5, func(x []float64) float64 {
				l, _ := p.hostOT(cfg, x, float64(p.z))
				return l
			})
			t.Logf("%s eps %v: dL/dH_hat vs float64 FD: max rel err %.1e", v, eps, rel)
			if rel > 2e-4 {
				t.Errorf("%s eps %v: dL/dH_hat max rel err %.1e", v, eps, rel)
			}
			// The float32 tape differentiated numerically, on a few coordinates.
			const h = 1e-2
			var maxErr, maxG float64
			for _, i := range []int{0, 4, 7, 11, 16, 22} {
				xp := append([]float32(nil), p.hhat...)
				xp[i] += h
				lp, _, _ := p.eval(t, tp, xp, p.a, p.z, false, f)
				xp[i] -= 2 * h
				lm, _, _ := p.eval(t, tp, xp, p.a, p.z, false, f)
				fd := (lp - lm) / (2 * h)
				maxErr = math.Max(maxErr, math.Abs(fd-float64(g.hhat[i])))
				maxG = math.Max(maxG, math.Abs(fd))
			}
			t.Logf("%s eps %v: dL/dH_hat vs float32 FD (h %g): max abs err %.1e, max |g| %.2f", v, eps, h, maxErr, maxG)
			if maxErr > 2e-3*math.Max(maxG, 1) {
				t.Errorf("%s eps %v: float32 FD error %.1e", v, eps, maxErr)
			}
			if v != Dustbin {
				if g.z != 0 {
					t.Errorf("%s: the dustbin score got gradient %v", v, g.z)
				}
				continue
			}
			zs := []float64{float64(p.z)}
			relZ := fdCheck(t, "dustbin score", []float32{g.z}, zs, 1e-5, func(z []float64) float64 {
				l, _ := p.hostOT(cfg, x, z[0])
				return l
			})
			t.Logf("dustbin eps %v: dL/dscore %.5f vs float64 FD: rel err %.1e", eps, g.z, relZ)
			if relZ > 2e-4 {
				t.Errorf("dustbin eps %v: dL/dscore rel err %.1e", eps, relZ)
			}
		}
	}
}

// TestOTBalancedMarginals: after enough iterations the tape's plan meets both marginals.
func TestOTBalancedMarginals(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	p := newProblem(rng, 2, 7, 6, 2, 5, []int{7, 4}, []int{3, 6}, []int{2, 2})
	cfg := DefaultConfig()
	cfg.Eps, cfg.Iters = 0.1, 300
	_, plan, _ := p.eval(t, newTape(t), p.hhat, p.a, p.z, false, otLoss(p, cfg))
	var worst float64
	for b := range p.B {
		for j := range p.S {
			var s float64
			for k := range p.N {
				s += float64(plan[(b*p.S+j)*p.N+k])
			}
			want := 0.0
			if j < p.pred[b] {
				want = 1 / float64(p.pred[b])
			}
			worst = math.Max(worst, math.Abs(s-want))
		}
		for k := range p.N {
			var s float64
			for j := range p.S {
				s += float64(plan[(b*p.S+j)*p.N+k])
			}
			want := 0.0
			if k < p.clean[b] {
				want = 1 / float64(p.clean[b])
			}
			worst = math.Max(worst, math.Abs(s-want))
		}
	}
	t.Logf("balanced eps 0.1, 300 iterations: worst marginal error %.1e", worst)
	if worst > 1e-4 {
		t.Errorf("worst marginal error %.1e > 1e-4", worst)
	}
}

// TestOTHungarian: on the tape too, <P, C> approaches the exact assignment cost as eps falls.
func TestOTHungarian(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 5
	p := newProblem(rng, 1, n, n, 1, 3, []int{n}, []int{n}, []int{1})
	tp := newTape(t)
	var opt float64
	prev := math.Inf(1)
	for i, eps := range []float64{0.3, 0.1, 0.03, 0.01} {
		cfg := DefaultConfig()
		cfg.Eps, cfg.Iters = eps, int(20/eps)
		loss, cost, _ := p.eval(t, tp, p.hhat, p.a, p.z, false, func(tp *engine.Tape, v vars) (*engine.Tensor, *engine.Tensor, error) {
			r, err := OT(tp, cfg, p.sets(tp, v), nil)
			return r.Loss, r.Cost, err
		})
		if i == 0 {
			res, err := assign.Minimize(mat.NewDense(n, n, to64(cost)))
			if err != nil {
				t.Fatal(err)
			}
			opt = res.Total / n
		}
		gap := loss - opt
		t.Logf("eps %v: <P,C> %.5f, assignment cost/n %.5f, gap %.1e (bound eps log n %.1e)", eps, loss, opt, gap, eps*math.Log(n))
		if gap < -1e-4 || gap > eps*math.Log(n)+1e-4 || gap > prev+1e-5 {
			t.Errorf("eps %v: gap %v (previous %v)", eps, gap, prev)
		}
		prev = gap
	}
	if prev > 0.02 {
		t.Errorf("gap %v at eps 0.01", prev)
	}
}

// TestOTDustbinSurplus: with S > n the S - n predictions that resemble no clean row end in the
// dustbin column and the others stay matched; the dustbin score sets the threshold.
func TestOTDustbinSurplus(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const S, n, d = 6, 3, 4
	p := newProblem(rng, 1, S, n, 1, d, []int{S}, []int{n}, []int{1})
	// Rows 0..2 copy H rows 2, 0, 1 up to small noise; rows 3..5 are unrelated and long (norm
	// about 4m), so their costs to clean rows are >= 1 and no entropic blur sends them there.
	partner := []int{2, 0, 1}
	for j, k := range partner {
		for i := range d {
			p.hhat[j*d+i] = p.h[k*d+i] + float32(0.01*rng.NormFloat64())
		}
	}
	for i := n * d; i < S*d; i++ {
		p.hhat[i] *= 4
	}
	cfg := DefaultConfig()
	cfg.Variant, cfg.Eps, cfg.Iters = Dustbin, 0.1, 1000
	tp := newTape(t)
	unit := 1.0 / n
	var realMass []float64
	for _, z := range []float32{-1, 0.5, 1, 2} {
		_, plan, _ := p.eval(t, tp, p.hhat, p.a, z, false, otLoss(p, cfg))
		N1 := n + 1
		at := func(j, k int) float64 { return float64(plan[j*N1+k]) }
		var bin, real float64
		for j := range S {
			bin += at(j, n)
			for k := range n {
				real += at(j, k)
			}
		}
		realMass = append(realMass, real)
		var viol float64 // L1 error of the row marginals (the columns are exact)
		for j := range S + 1 {
			var row float64
			for k := range N1 {
				row += at(j, k)
			}
			want := unit
			if j == S {
				want = 1
			}
			viol += math.Abs(row - want)
		}
		t.Logf("score %v: mass of real rows in the dustbin column %.4f (surplus %.4f), matched mass %.4f, row marginal error %.1e", z, bin, float64(S-n)*unit, real, viol)
		// Sinkhorn converges sublinearly here (the dustbin row's mass must leave every real
		// column); 1000 iterations bring the rows within 1e-3.
		if viol > 2e-3 {
			t.Errorf("score %v: row marginals off by %v", z, viol)
		}
		if bin < float64(S-n)*unit-viol-1e-5 {
			t.Errorf("score %v: dustbin column holds %v < surplus %v", z, bin, float64(S-n)*unit)
		}
		if z < 1 {
			continue // a cheap dustbin also takes some matched mass, by design
		}
		for j := n; j < S; j++ {
			if got := at(j, n) / unit; got < 0.99 {
				t.Errorf("score %v: surplus row %d sends %.3f of its mass to the dustbin", z, j, got)
			}
		}
		// Entropic leakage: P(i,bin) P(bin,k) / (P(i,k) P(bin,bin)) = exp(-score/eps), so a
		// partner sends about sqrt(exp(-score/eps) / 3) to the dustbin, 1.2% of its 1/3 at
		// score 1.
		for j, k := range partner {
			if got := at(j, k) / unit; got < 0.98 {
				t.Errorf("score %v: row %d sends %.3f of its mass to its partner %d", z, j, got, k)
			}
		}
	}
	if realMass[0] > 0.01 {
		t.Errorf("score -1 (cheaper than any match) still matches mass %v", realMass[0])
	}
	for i := 1; i < len(realMass); i++ {
		if realMass[i] < realMass[i-1]-1e-6 {
			t.Errorf("matched mass %v fell as the score rose", realMass)
		}
	}
}

// TestOTUnbalancedRho: the plan's marginals approach the targets as rho grows and leave them
// as it shrinks; at large rho the plan is the balanced one.
func TestOTUnbalancedRho(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	p := newProblem(rng, 2, 5, 4, 1, 3, []int{5, 3}, []int{4, 4}, []int{1, 1})
	tp := newTape(t)
	marginalErr := func(plan []float32) float64 {
		var e float64
		for b := range p.B {
			for j := range p.pred[b] {
				var s float64
				for k := range p.N {
					s += float64(plan[(b*p.S+j)*p.N+k])
				}
				e += math.Abs(s - 1/float64(p.pred[b]))
			}
			for k := range p.clean[b] {
				var s float64
				for j := range p.S {
					s += float64(plan[(b*p.S+j)*p.N+k])
				}
				e += math.Abs(s - 1/float64(p.clean[b]))
			}
		}
		return e
	}
	cfg := DefaultConfig()
	cfg.Eps, cfg.Iters = 0.1, 300
	_, balanced, _ := p.eval(t, tp, p.hhat, p.a, p.z, false, otLoss(p, cfg))
	cfg.Variant = Unbalanced
	prev := math.Inf(1)
	var last []float32
	for _, rho := range []float64{0.01, 0.1, 1, 10, 1000} {
		cfg.Rho = rho
		_, plan, _ := p.eval(t, tp, p.hhat, p.a, p.z, false, otLoss(p, cfg))
		e := marginalErr(plan)
		t.Logf("rho %v: L1 marginal error %.4f", rho, e)
		if e >= prev {
			t.Errorf("rho %v: marginal error %v did not fall below %v", rho, e, prev)
		}
		prev, last = e, plan
	}
	var maxDiff float64
	for i := range last {
		maxDiff = math.Max(maxDiff, math.Abs(float64(last[i]-balanced[i])))
	}
	t.Logf("rho 1000 vs balanced: max plan difference %.1e", maxDiff)
	if maxDiff > 2e-3 {
		t.Errorf("rho 1000 plan differs from the balanced one by %v", maxDiff)
	}
}

// TestPaddingInvariance: a padded batch gives the mean of its examples' unpadded losses, the
// same gradients (scaled by 1/B) and exactly zero gradient at padded rows and columns.
func TestPaddingInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	p := newProblem(rng, 2, 5, 4, 4, 3, []int{5, 3}, []int{2, 4}, []int{4, 2})
	tp := newTape(t)
	for _, v := range variants {
		cfg := DefaultConfig()
		cfg.Variant, cfg.Eps, cfg.Iters = v, 0.2, 25
		unmix := func(q *problem) func(tp *engine.Tape, v vars) (*engine.Tensor, *engine.Tensor, error) {
			return func(tp *engine.Tape, v vars) (*engine.Tensor, *engine.Tensor, error) {
				parts, err := unmixOnce(tp, cfg, Batch{Sets: q.sets(tp, v), Mixing: q.mixing(tp, v), Dustbin: v.z})
				return parts.Total, nil, err
			}
		}
		loss, _, g := p.eval(t, tp, p.hhat, p.a, p.z, true, unmix(p))
		var sum float64
		var gz float64
		for b := range p.B {
			q := p.single(b)
			l, _, gq := q.eval(t, tp, q.hhat, q.a, q.z, true, unmix(q))
			sum += l
			gz += float64(gq.z)
			var maxErr, maxG float64
			for j := range p.S {
				for i := range p.d {
					got := float64(g.hhat[(b*p.S+j)*p.d+i])
					if j >= p.pred[b] {
						if got != 0 {
							t.Errorf("%s: padded predicted row %d of example %d has gradient %v", v, j, b, got)
						}
						continue
					}
					want := float64(gq.hhat[j*p.d+i]) / float64(p.B)
					maxErr, maxG = math.Max(maxErr, math.Abs(got-want)), math.Max(maxG, math.Abs(want))
				}
			}
			for i := range p.O {
				for j := range p.S {
					got := float64(g.a[(b*p.O+i)*p.S+j])
					if i >= p.obs[b] || j >= p.pred[b] {
						if got != 0 {
							t.Errorf("%s: padded A_hat entry [%d][%d][%d] has gradient %v", v, b, i, j, got)
						}
						continue
					}
					want := float64(gq.a[i*q.S+j]) / float64(p.B)
					maxErr, maxG = math.Max(maxErr, math.Abs(got-want)), math.Max(maxG, math.Abs(want))
				}
			}
			if maxErr > 1e-5*maxG {
				t.Errorf("%s: example %d: gradients differ from the unpadded example by %.1e (max %.2f)", v, b, maxErr, maxG)
			}
		}
		if rel := math.Abs(loss-sum/float64(p.B)) / math.Abs(loss); rel > 1e-6 {
			t.Errorf("%s: padded loss %v, mean of unpadded %v", v, loss, sum/float64(p.B))
		}
		if v == Dustbin {
			if rel := math.Abs(float64(g.z)-gz/float64(p.B)) / math.Abs(float64(g.z)); rel > 1e-5 {
				t.Errorf("dustbin score gradient %v, unpadded mean %v", g.z, gz/float64(p.B))
			}
		}
	}
}

// single is example b of p alone, without padding.
func (p *problem) single(b int) *problem {
	Sb, nb, ob, d := p.pred[b], p.clean[b], p.obs[b], p.d
	q := &problem{B: 1, S: Sb, N: nb, O: ob, d: d, pred: []int{Sb}, clean: []int{nb}, obs: []int{ob}, m: []float32{p.m[b]}, z: p.z}
	q.hhat = append([]float32(nil), p.hhat[b*p.S*d:(b*p.S+Sb)*d]...)
	q.h = append([]float32(nil), p.h[b*p.N*d:(b*p.N+nb)*d]...)
	q.u = append([]float32(nil), p.u[b*p.O*d:(b*p.O+ob)*d]...)
	for i := range ob {
		q.a = append(q.a, p.a[(b*p.O+i)*p.S:(b*p.O+i)*p.S+Sb]...)
	}
	return q
}

func TestCycleAndPenaltiesKnownAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	p := newProblem(rng, 2, 4, 4, 3, 5, []int{4, 2}, []int{4, 3}, []int{3, 2})
	// U = A_hat H_hat on real rows: L_cyc = 0.
	for b := range p.B {
		for i := range p.obs[b] {
			for c := range p.d {
				var s float64
				for j := range p.pred[b] {
					s += float64(p.a[(b*p.O+i)*p.S+j]) * float64(p.hhat[(b*p.S+j)*p.d+c])
				}
				p.u[(b*p.O+i)*p.d+c] = float32(s)
			}
		}
	}
	tp := newTape(t)
	cyc := func(tp *engine.Tape, v vars) (*engine.Tensor, *engine.Tensor, error) {
		l, err := Cycle(tp, v.hhat, p.pred, p.mixing(tp, v))
		return l, nil, err
	}
	if l, _, _ := p.eval(t, tp, p.hhat, p.a, 0, false, cyc); l > 1e-6 {
		t.Errorf("exact mixture: L_cyc = %v, want 0", l)
	}
	// A_hat = 0: L_cyc = 1.
	if l, _, _ := p.eval(t, tp, p.hhat, make([]float32, len(p.a)), 0, false, cyc); math.Abs(l-1) > 1e-6 {
		t.Errorf("zero A_hat: L_cyc = %v, want 1", l)
	}
	// A_hat all ones on real entries: the penalty is 1.
	ones := make([]float32, len(p.a))
	for i := range ones {
		ones[i] = 1
	}
	mix := func(tp *engine.Tape, v vars) (*engine.Tensor, *engine.Tensor, error) {
		l, err := MixPenalty(tp, v.a, p.obs, p.pred)
		return l, nil, err
	}
	if l, _, _ := p.eval(t, tp, p.hhat, ones, 0, false, mix); math.Abs(l-1) > 1e-6 {
		t.Errorf("ones: MixPenalty = %v, want 1", l)
	}
	// Predictions at twice the clean rows' norm: (2m - m)^2 / m^2 = 1.
	q := newProblem(rng, 2, 4, 4, 1, 5, []int{4, 3}, []int{4, 3}, []int{1, 1})
	twice := append([]float32(nil), q.hhat...)
	for i := range twice {
		twice[i] = 2 * q.h[i]
	}
	rn := func(tp *engine.Tape, v vars) (*engine.Tensor, *engine.Tensor, error) {
		l, err := RowNormPenalty(tp, q.sets(tp, v))
		return l, nil, err
	}
	if l, _, _ := q.eval(t, tp, twice, q.a, 0, false, rn); math.Abs(l-1) > 1e-5 {
		t.Errorf("doubled rows: RowNormPenalty = %v, want 1", l)
	}
}

// TestUnmixGradients: the combined loss equals its weighted parts and its gradients with
// respect to H_hat, A_hat and the dustbin score match central differences of the mirror.
func TestUnmixGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	p := newProblem(rng, 2, 4, 3, 3, 3, []int{4, 3}, []int{3, 2}, []int{3, 2})
	tp := newTape(t)
	for _, v := range variants {
		cfg := DefaultConfig()
		cfg.Variant, cfg.Eps, cfg.Iters, cfg.LambdaA, cfg.WNorm, cfg.WCyc = v, 0.3, 20, 0.5, 0.7, 1.3
		var vals map[string]float64
		f := func(tp *engine.Tape, vv vars) (*engine.Tensor, *engine.Tensor, error) {
			parts, err := unmixOnce(tp, cfg, Batch{Sets: p.sets(tp, vv), Mixing: p.mixing(tp, vv), Dustbin: vv.z})
			if err == nil {
				vals = parts.Values()
			}
			return parts.Total, nil, err
		}
		loss, _, g := p.eval(t, tp, p.hhat, p.a, p.z, true, f)
		sum := cfg.WCyc*vals["unmix_cyc"] + cfg.WOT*vals["unmix_ot"] + cfg.LambdaA*vals["unmix_a_reg"] + cfg.WNorm*vals["unmix_norm"]
		if len(vals) != 5 || math.Abs(sum-loss) > 1e-5*math.Abs(loss) || vals["unmix"] != loss {
			t.Errorf("%s: parts %v do not add up to %v", v, vals, loss)
		}
		hh, aa, z := to64(p.hhat), to64(p.a), float64(p.z)
		if want := p.hostUnmix(cfg, hh, aa, z); math.Abs(want-loss) > 1e-5*math.Abs(want) {
			t.Errorf("%s: loss %v, host %v", v, loss, want)
		}
		relH := fdCheck(t, "H_hat", g.hhat, hh, 1e-5, func(x []float64) float64 { return p.hostUnmix(cfg, x, aa, z) })
		relA := fdCheck(t, "A_hat", g.a, aa, 1e-5, func(x []float64) float64 { return p.hostUnmix(cfg, hh, x, z) })
		t.Logf("%s: Unmix gradient vs float64 FD: H_hat %.1e, A_hat %.1e", v, relH, relA)
		if relH > 2e-4 || relA > 2e-4 {
			t.Errorf("%s: gradient errors H_hat %.1e A_hat %.1e", v, relH, relA)
		}
		if v == Dustbin {
			relZ := fdCheck(t, "score", []float32{g.z}, []float64{z}, 1e-5, func(x []float64) float64 { return p.hostUnmix(cfg, hh, aa, x[0]) })
			t.Logf("dustbin: Unmix d/dscore vs float64 FD: %.1e", relZ)
			if relZ > 2e-4 {
				t.Errorf("dustbin: d/dscore error %.1e", relZ)
			}
		}
	}
}

func TestUnmixSkipsZeroWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	p := newProblem(rng, 1, 3, 3, 2, 2, []int{3}, []int{3}, []int{2})
	tp := newTape(t)
	cfg := DefaultConfig()
	cfg.WCyc, cfg.LambdaA, cfg.WNorm = 0, 0, 0
	tp.Reset()
	v := vars{hhat: tp.Variable(p.hhat, 1, 3, 2)}
	parts, err := unmixOnce(tp, cfg, Batch{Sets: p.sets(tp, v)}) // no A_hat, no U: not needed
	if err != nil {
		t.Fatal(err)
	}
	if parts.Cycle != nil || parts.MixReg != nil || parts.NormReg != nil || parts.OT == nil || parts.Plan == nil {
		t.Errorf("parts %+v: want only OT", parts)
	}
	if vals := parts.Values(); len(vals) != 2 || vals["unmix"] != vals["unmix_ot"] {
		t.Errorf("values %v", vals)
	}
}

// TestBadInputs: malformed batches and configs are errors, never panics.
func TestBadInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	p := newProblem(rng, 2, 3, 3, 2, 2, []int{3, 2}, []int{3, 1}, []int{2, 1})
	tp := newTape(t)
	cfg := DefaultConfig()
	cases := map[string]func(tp *engine.Tape, v vars) error{
		"nil rows": func(tp *engine.Tape, v vars) error {
			_, err := OT(tp, cfg, Sets{MeanNorm: p.m}, nil)
			return err
		},
		"width mismatch": func(tp *engine.Tape, v vars) error {
			s := p.sets(tp, v)
			s.H = tp.Input(make([]float32, 2*3*5), 2, 3, 5)
			_, err := OT(tp, cfg, s, nil)
			return err
		},
		"count out of range": func(tp *engine.Tape, v vars) error {
			s := p.sets(tp, v)
			s.CleanRows = []int{4, 1}
			_, err := OT(tp, cfg, s, nil)
			return err
		},
		"empty example": func(tp *engine.Tape, v vars) error {
			s := p.sets(tp, v)
			s.PredRows = []int{0, 2}
			_, err := OT(tp, cfg, s, nil)
			return err
		},
		"zero mean norm": func(tp *engine.Tape, v vars) error {
			s := p.sets(tp, v)
			s.MeanNorm = []float32{1, 0}
			_, err := OT(tp, cfg, s, nil)
			return err
		},
		"NaN mean norm": func(tp *engine.Tape, v vars) error {
			s := p.sets(tp, v)
			s.MeanNorm = []float32{1, float32(math.NaN())}
			_, err := OT(tp, cfg, s, nil)
			return err
		},
		"dustbin without score": func(tp *engine.Tape, v vars) error {
			c := cfg
			c.Variant = Dustbin
			_, err := OT(tp, c, p.sets(tp, v), nil)
			return err
		},
		"bad config": func(tp *engine.Tape, v vars) error {
			c := cfg
			c.Eps = -1
			_, err := OT(tp, c, p.sets(tp, v), nil)
			return err
		},
		"cycle without A_hat": func(tp *engine.Tape, v vars) error {
			_, err := Cycle(tp, v.hhat, p.pred, Mixing{UObs: tp.Input(p.u, 2, 2, 2)})
			return err
		},
		"cycle U shape": func(tp *engine.Tape, v vars) error {
			_, err := Cycle(tp, v.hhat, p.pred, Mixing{AHat: v.a, UObs: tp.Input(p.u[:4], 2, 2, 1)})
			return err
		},
		"unmix without A_hat": func(tp *engine.Tape, v vars) error {
			_, err := unmixOnce(tp, cfg, Batch{Sets: p.sets(tp, v)})
			return err
		},
		"penalty counts": func(tp *engine.Tape, v vars) error {
			_, err := MixPenalty(tp, v.a, []int{2}, nil)
			return err
		},
	}
	for name, f := range cases {
		tp.Reset()
		v := vars{hhat: tp.Variable(p.hhat, p.B, p.S, p.d), a: tp.Variable(p.a, p.B, p.O, p.S)}
		if err := f(tp, v); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDustbinParam(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ps := engine.NewParams()
	z := AddDustbinParam(ps)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Variant, cfg.DustbinInit = Dustbin, 0.7
	if err := InitDustbinParam(z, cfg); err != nil {
		t.Fatal(err)
	}
	if got := z.ToHost()[0]; got != 0.7 {
		t.Fatalf("score %v, want 0.7", got)
	}
	if got, ok := ps.Lookup(DustbinParamName); !ok || got != z {
		t.Fatalf("%s not registered", DustbinParamName)
	}
	rng := rand.New(rand.NewPCG(27, 28))
	p := newProblem(rng, 2, 4, 3, 1, 3, []int{4, 2}, []int{3, 3}, []int{1, 1})
	tp := engine.NewTape(be)
	r, err := OT(tp, cfg, Sets{HHat: tp.Input(p.hhat, 2, 4, 3), H: tp.Input(p.h, 2, 3, 3), PredRows: p.pred, CleanRows: p.clean, MeanNorm: p.m}, z)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Backward(r.Loss); err != nil {
		t.Fatal(err)
	}
	want := fdCheck(t, "score", z.Grad().ToHost(), []float64{0.7}, 1e-5, func(x []float64) float64 {
		l, _ := p.hostOT(cfg, to64(p.hhat), x[0])
		return l
	})
	if want > 2e-4 {
		t.Errorf("parameter gradient rel err %.1e", want)
	}
	if err := InitDustbinParam(nil, cfg); err == nil {
		t.Error("nil score accepted")
	}
}

// BenchmarkOT times forward and backward of the default-config OT loss at a training size.
func BenchmarkOT(b *testing.B) {
	for _, v := range variants {
		b.Run(string(v), func(b *testing.B) {
			const B, S, N, d = 16, 64, 48, 384
			rng := rand.New(rand.NewPCG(1, 1))
			p := newProblem(rng, B, S, N, 1, d, filledInts(B, S), filledInts(B, N), filledInts(B, 1))
			cfg := DefaultConfig()
			cfg.Variant = v
			tp := newTape(b)
			for b.Loop() {
				p.eval(b, tp, p.hhat, p.a, p.z, true, otLoss(p, cfg))
			}
			_, peak := tp.ArenaBytes()
			b.ReportMetric(float64(peak)/(1<<20), "arenaMiB")
		})
	}
}

func filledInts(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// unmixOnce checks cfg and records the unmix loss under it, as a model does over two calls.
func unmixOnce(tp *engine.Tape, cfg Config, in Batch) (Parts, error) {
	l, err := NewLoss(cfg)
	if err != nil {
		return Parts{}, err
	}
	return l.Record(tp, in)
}
