package baselines

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/eval"
	"gonum.org/v1/gonum/mat"
)

// laplaceSources returns n independent rows of T Laplace samples (excess kurtosis 3).
func laplaceSources(rng *rand.Rand, n, t int) *mat.Dense {
	s := mat.NewDense(n, t, nil)
	for i := 0; i < n; i++ {
		row := s.RawRowView(i)
		for j := range row {
			row[j] = rng.ExpFloat64()
			if rng.IntN(2) == 0 {
				row[j] = -row[j]
			}
		}
	}
	return s
}

// kurtosisSources returns n independent rows with pairwise distinct excess kurtoses, as FOBI
// needs: four sub-Gaussian rows sqrt(1-r) g + sqrt(r) b (g Gaussian, b = ±1; kurtosis -2 r^2 for
// r = 1, 0.8, 0.6, 0.4) and n - 4 Bernoulli-Gaussian rows g B / sqrt(q), P(B = 1) = q, with q
// log-spaced from 1 down to 0.1 (kurtosis 3/q - 3, from 0 to 27).
func kurtosisSources(rng *rand.Rand, n, t int) *mat.Dense {
	s := mat.NewDense(n, t, nil)
	for i := 0; i < n; i++ {
		row := s.RawRowView(i)
		if i < 4 {
			r := []float64{1, 0.8, 0.6, 0.4}[i]
			for j := range row {
				b := float64(1 - 2*rng.IntN(2))
				row[j] = math.Sqrt(1-r)*rng.NormFloat64() + math.Sqrt(r)*b
			}
			continue
		}
		q := math.Pow(0.1, float64(i-4)/float64(max(1, n-5)))
		for j := range row {
			if rng.Float64() < q {
				row[j] = rng.NormFloat64() / math.Sqrt(q)
			}
		}
	}
	return s
}

// arSources returns n independent Gaussian AR(2) rows x_t = 2r cos(w_i) x_{t-1} - r^2 x_{t-2} + e_t,
// r = 0.9, with spectral peaks w_i spread over (0, pi): no higher-order structure, only distinct
// autocorrelations, which is what SOBI needs and what ICA cannot use.
func arSources(rng *rand.Rand, n, t int) *mat.Dense {
	const r = 0.9
	s := mat.NewDense(n, t, nil)
	for i := 0; i < n; i++ {
		w := math.Pi * (float64(i) + 0.5) / float64(n)
		a1, a2 := 2*r*math.Cos(w), -r*r
		row := s.RawRowView(i)
		x1, x2 := 0.0, 0.0
		for j := range row {
			x := a1*x1 + a2*x2 + rng.NormFloat64()
			x2, x1 = x1, x
			row[j] = x
		}
	}
	return s
}

// gaussianSources returns n independent Gaussian rows: not identifiable by any of the methods.
func gaussianSources(rng *rand.Rand, n, t int) *mat.Dense {
	s := mat.NewDense(n, t, nil)
	for i := 0; i < n; i++ {
		for j := range s.RawRowView(i) {
			s.Set(i, j, rng.NormFloat64())
		}
	}
	return s
}

func mix(rng *rand.Rand, s *mat.Dense) *mat.Dense {
	n, _ := s.Dims()
	a := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			a.Set(i, j, rng.NormFloat64())
		}
	}
	var u mat.Dense
	u.Mul(a, s)
	return &u
}

type bssMethod struct {
	name string
	run  func(context.Context, *mat.Dense) (Separation, error)
}

var bssMethods = []bssMethod{
	{"FastICA", func(ctx context.Context, u *mat.Dense) (Separation, error) {
		return FastICA(ctx, u, FastICAOptions{Seed: 1})
	}},
	{"JADE", func(ctx context.Context, u *mat.Dense) (Separation, error) { return JADE(ctx, u, JADEOptions{}) }},
	{"JADE-slices", func(ctx context.Context, u *mat.Dense) (Separation, error) {
		return JADE(ctx, u, JADEOptions{FullMax: -1})
	}},
	{"FOBI", func(ctx context.Context, u *mat.Dense) (Separation, error) { return FOBI(ctx, u, FOBIOptions{}) }},
	{"SOBI", func(ctx context.Context, u *mat.Dense) (Separation, error) { return SOBI(ctx, u, SOBIOptions{}) }},
}

func TestBSSRecoversSources(t *testing.T) {
	gens := map[string]func(*rand.Rand, int, int) *mat.Dense{
		"laplace": laplaceSources, "kurtosis": kurtosisSources, "ar": arSources,
	}
	type tc struct {
		method, gen string
		n, t        int
		minMean     float64 // besides p95 >= 0.95
	}
	var cases []tc
	for _, n := range []int{8, 16, 32} {
		cases = append(cases,
			tc{"FastICA", "laplace", n, 4096, 0.95}, tc{"FastICA", "kurtosis", n, 4096, 0.95},
			tc{"JADE", "laplace", n, 4096, 0.95}, tc{"JADE", "kurtosis", n, 4096, 0.95},
			tc{"JADE-slices", "laplace", n, 4096, 0.95},
			tc{"SOBI", "ar", n, 4096, 0.95})
	}
	// FOBI's eigenvalue gaps shrink as n grows while its noise does not: at n = 32 it needs
	// T = 16384 samples to reach p95 0.95 (at T = 4096: p95 ~0.94, mean ~0.74).
	cases = append(cases, tc{"FOBI", "kurtosis", 8, 4096, 0.9}, tc{"FOBI", "kurtosis", 16, 4096, 0.85},
		tc{"FOBI", "kurtosis", 32, 16384, 0.8})
	methods := map[string]bssMethod{}
	for _, m := range bssMethods {
		methods[m.name] = m
	}
	for _, c := range cases {
		rng := rand.New(rand.NewPCG(uint64(c.n), 77))
		s := gens[c.gen](rng, c.n, c.t)
		u := mix(rng, s)
		sep, err := methods[c.method].run(context.Background(), u)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		f, err := eval.ClassicalScore(sep.Sources, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s/%s/n=%d/T=%d: p95 |cos| %.4f mean %.4f min %.4f, %d iterations, converged %v",
			c.method, c.gen, c.n, c.t, f.AbsCosP95, f.AbsCosMean, minOf(f.AbsCos), sep.Iterations, sep.Converged)
		if f.AbsCosP95 < 0.95 || f.AbsCosMean < c.minMean || !sep.Converged {
			t.Errorf("%s/%s/n=%d: p95 |cos| %.4f, mean %.4f, converged %v; want >= 0.95, >= %v, true",
				c.method, c.gen, c.n, f.AbsCosP95, f.AbsCosMean, sep.Converged, c.minMean)
		}
	}
}

// TestGaussianSourcesStayMixed is the negative control: with Gaussian sources no method can do
// better than an arbitrary rotation of the whitened data. Iteration budgets are cut because the
// iterative methods cannot converge here.
func TestGaussianSourcesStayMixed(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	s := gaussianSources(rng, 16, 4096)
	u := mix(rng, s)
	ctx := context.Background()
	methods := map[string]func() (Separation, error){
		"FastICA":     func() (Separation, error) { return FastICA(ctx, u, FastICAOptions{Seed: 1, MaxIter: 30}) },
		"JADE":        func() (Separation, error) { return JADE(ctx, u, JADEOptions{MaxSweeps: 10}) },
		"JADE-slices": func() (Separation, error) { return JADE(ctx, u, JADEOptions{FullMax: -1, MaxRounds: 10}) },
		"FOBI":        func() (Separation, error) { return FOBI(ctx, u, FOBIOptions{}) },
		"SOBI":        func() (Separation, error) { return SOBI(ctx, u, SOBIOptions{MaxSweeps: 10}) },
	}
	for name, run := range methods {
		sep, err := run()
		if err != nil {
			t.Fatal(err)
		}
		f, _ := eval.ClassicalScore(sep.Sources, s)
		t.Logf("%s on Gaussian sources: mean |cos| %.3f, p95 %.3f", name, f.AbsCosMean, f.AbsCosP95)
		if f.AbsCosMean > 0.85 {
			t.Errorf("%s separated Gaussian sources: mean |cos| %.3f", name, f.AbsCosMean)
		}
	}
}

// TestUnmixingIsConsistent: Sources = Unmixing U, and Unmixing A is a scaled permutation when the
// separation succeeds: each row has one dominant entry.
func TestUnmixingIsConsistent(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	s := laplaceSources(rng, 8, 4096)
	a := mat.NewDense(8, 8, nil)
	for i := 0; i < 8; i++ {
		for j := 0; j < 8; j++ {
			a.Set(i, j, rng.NormFloat64())
		}
	}
	var u mat.Dense
	u.Mul(a, s)
	for _, m := range bssMethods[:3] {
		sep, err := m.run(context.Background(), &u)
		if err != nil {
			t.Fatal(err)
		}
		var src, p mat.Dense
		src.Mul(sep.Unmixing, &u)
		if !mat.EqualApprox(&src, sep.Sources, 1e-9) {
			t.Errorf("%s: Sources != Unmixing U", m.name)
		}
		p.Mul(sep.Unmixing, a)
		for i := 0; i < 8; i++ {
			row := p.RawRowView(i)
			big, total := 0.0, 0.0
			for _, v := range row {
				big = max(big, v*v)
				total += v * v
			}
			if big < 0.98*total {
				t.Errorf("%s: row %d of Unmixing A is not dominated by one entry: %v", m.name, i, row)
			}
		}
	}
}

func TestBSSHonoursCancellation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	u := mix(rng, laplaceSources(rng, 8, 512))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, m := range bssMethods {
		if _, err := m.run(ctx, u); err == nil {
			t.Errorf("%s ran with a cancelled context", m.name)
		}
	}
}

func TestBSSRejectsBadInput(t *testing.T) {
	bad := mat.NewDense(2, 3, []float64{1, 2, math.NaN(), 4, 5, 6})
	for _, m := range bssMethods {
		if _, err := m.run(context.Background(), bad); err == nil {
			t.Errorf("%s accepted NaN", m.name)
		}
	}
	if _, err := FastICA(context.Background(), mat.NewDense(3, 4, nil), FastICAOptions{}); err == nil {
		t.Error("FastICA accepted a constant U")
	}
	if _, err := FastICA(context.Background(), mat.NewDense(3, 40, nil), FastICAOptions{Components: 4}); err == nil {
		t.Error("FastICA accepted more components than mixtures")
	}
}

func minOf(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}
