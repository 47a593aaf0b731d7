package gelo

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/internal/numfmt"
	"gonum.org/v1/gonum/mat"
)

func TestNewSamplerRejectsSmallSplits(t *testing.T) {
	c := testCorpus(t, 12, 4, 8, 8, 1)
	cfg := DefaultConfig()
	cfg.Positives = Fixed(3)
	cfg.ValFrac = 0.2
	train, val := 0, 0
	for i := 0; i < c.NumTexts(); i++ {
		if data.SplitOf(c.TextID(i), cfg.ValFrac) == data.Val {
			val++
		} else {
			train++
		}
	}
	if val >= 3 || train < 3 {
		t.Fatalf("test corpus has %d train and %d val texts; want val < 3 <= train", train, val)
	}
	_, err := NewSampler(c, cfg)
	if err == nil {
		t.Fatal("accepted a val split with too few texts")
	}
	if !strings.Contains(err.Error(), "val") || !strings.Contains(err.Error(), "need 3") {
		t.Fatalf("error does not name the split and the need: %v", err)
	}
	cfg.Positives = Fixed(0)
	if _, err := NewSampler(c, cfg); err == nil || !strings.Contains(err.Error(), "positives") {
		t.Fatalf("invalid config accepted or unnamed: %v", err)
	}
}

func TestExampleStructureAndTokens(t *testing.T) {
	const d = 16
	c := testCorpus(t, 40, 5, 30, d, 2)
	for _, sampling := range []TokenSampling{TokenWindow, TokenRandom} {
		cfg := DefaultConfig()
		cfg.ValFrac = 0.25
		cfg.Positives = Uniform(2, 4)
		cfg.TokensPerText = Uniform(8, 20) // some texts are shorter: they give all their rows
		cfg.TokenSampling = sampling
		s := newSampler(t, c, cfg)
		train := textSet(s, data.Train)
		for i := int64(0); i < 30; i++ {
			ex := example(t, s, data.Train, i)
			if len(ex.Positives) != ex.NumPositives || ex.NumPositives < 2 || ex.NumPositives > 4 {
				t.Fatalf("%d positives drawn for p=%d", len(ex.Positives), ex.NumPositives)
			}
			if ex.TokensPerText < 8 || ex.TokensPerText > 20 {
				t.Fatalf("t=%d outside [8, 20]", ex.TokensPerText)
			}
			seen := map[int64]bool{}
			for j, id := range ex.Positives {
				if seen[id] || !train[id] || c.TextID(ex.PositiveIdx[j]) != id {
					t.Fatalf("positive %d: duplicate, not train, or index mismatch", id)
				}
				seen[id] = true
			}
			// Rows of H are the corpus rows at (HText, HPos), per text min(t, length) of them.
			row := make([]float32, d)
			r := 0
			for j, ci := range ex.PositiveIdx {
				want := min(ex.TokensPerText, c.NumTokens(ci))
				for k := 0; k < want; k++ {
					if ex.HText[r+k] != ex.Positives[j] {
						t.Fatalf("row %d: text %d, want %d", r+k, ex.HText[r+k], ex.Positives[j])
					}
					if k > 0 {
						step := ex.HPos[r+k] - ex.HPos[r+k-1]
						if step < 1 || (sampling == TokenWindow && step != 1) {
							t.Fatalf("%s: positions %v not increasing/contiguous", sampling, ex.HPos[r:r+want])
						}
					}
					if err := c.Rows(ci, ex.HPos[r+k], 1, row); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(row, ex.H[(r+k)*d:(r+k+1)*d]) {
						t.Fatalf("row %d of H is not the corpus row", r+k)
					}
				}
				r += want
			}
			if ex.N > cfg.MaxN() {
				t.Fatalf("N %d above MaxN %d", ex.N, cfg.MaxN())
			}
			if r != ex.NClean || len(ex.H) != ex.NClean*d {
				t.Fatalf("NClean %d, counted %d", ex.NClean, r)
			}
			// Perm is a permutation and X's row annotations follow it.
			if ex.N != ex.NClean+ex.K || len(ex.Perm) != ex.N || len(ex.A) != ex.N*ex.N {
				t.Fatal("sizes disagree")
			}
			p := slices.Clone(ex.Perm)
			slices.Sort(p)
			for k, v := range p {
				if v != k {
					t.Fatalf("Perm %v is not a permutation", ex.Perm)
				}
			}
			for k, src := range ex.Perm {
				if ex.RowShield[k] != (src >= ex.NClean) {
					t.Fatal("RowShield disagrees with Perm")
				}
				if src < ex.NClean && ex.RowText[k] != ex.HText[src] || src >= ex.NClean && ex.RowText[k] != -1 {
					t.Fatal("RowText disagrees with Perm")
				}
			}
		}
	}
}

func TestShieldCounts(t *testing.T) {
	c := testCorpus(t, 30, 40, 40, 8, 3)
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Positives, cfg.TokensPerText = Fixed(3), Fixed(10) // n_clean = 30
	for _, tc := range []struct {
		frac float64
		rows int
		want int
	}{{0.1, 0, 3}, {0.25, 0, 8}, {0, 0, 0}, {1, 0, 30}, {0.55, 0, 17}, {0.25, 5, 5}, {0.5, 75, 75}, {0, 1, 1}} {
		cfg.ShieldFrac, cfg.ShieldRows = Fixed(tc.frac), tc.rows
		ex := example(t, newSampler(t, c, cfg), data.Train, 0)
		if cfg.MaxN() != ex.N {
			t.Errorf("MaxN %d, N %d with nothing random", cfg.MaxN(), ex.N)
		}
		if ex.NClean != 30 || ex.K != tc.want || ex.N != 30+tc.want {
			t.Errorf("frac %v rows %d: NClean %d K %d N %d, want K %d", tc.frac, tc.rows, ex.NClean, ex.K, ex.N, tc.want)
		}
		shields := 0
		for _, sh := range ex.RowShield {
			if sh {
				shields++
			}
		}
		if shields != ex.K {
			t.Errorf("%d rows marked shield, K = %d", shields, ex.K)
		}
	}
}

func TestSyntheticShieldNormsAndTails(t *testing.T) {
	const d = 512
	c := testCorpus(t, 30, 40, 40, d, 4)
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Positives, cfg.TokensPerText = Fixed(2), Fixed(20)
	cfg.ShieldRows = 40
	cfg.ShieldScale = Uniform(0.5, 3)
	for _, kind := range []ShieldKind{ShieldGaussian, ShieldStudentT} {
		cfg.ShieldKind, cfg.StudentTDF = kind, 5
		s := newSampler(t, c, cfg)
		var ratio float64 // mean over rows of ||s||^2 / (scale m)^2
		var tail, entries float64
		rows := 0
		for i := int64(0); i < 20; i++ {
			ex := example(t, s, data.Train, i)
			sigma := ex.ShieldScale * ex.M / math.Sqrt(d)
			for j := 0; j < ex.K; j++ {
				nr := norm(ex.S[j*d : (j+1)*d])
				ratio += nr * nr / (ex.ShieldScale * ex.M * ex.ShieldScale * ex.M)
				rows++
			}
			for _, v := range ex.S {
				if math.Abs(float64(v)) > 3.87*sigma {
					tail++
				}
				entries++
			}
		}
		ratio /= float64(rows)
		tail /= entries
		t.Logf("%s: E||s||^2/(scale m)^2 = %.4f, P(|s| > 3.87 sigma) = %.4f", kind, ratio, tail)
		if math.Abs(ratio-1) > 0.05 {
			t.Errorf("%s: mean squared norm ratio %.4f, want 1", kind, ratio)
		}
		// Gaussian: P = 1.09e-4; unit-variance t(5): P(|t5| > 3.87 sqrt(5/3)) = 4.12e-3.
		if kind == ShieldGaussian && math.Abs(tail-1.09e-4) > 0.5e-4 || kind == ShieldStudentT && math.Abs(tail-4.12e-3) > 0.6e-3 {
			t.Errorf("%s: tail fraction %.4f", kind, tail)
		}
	}
}

func TestManifoldShieldsAreRescaledDonorRowsOfTheSameSplit(t *testing.T) {
	const d = 24
	c := testCorpus(t, 50, 6, 20, d, 5)
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Positives, cfg.TokensPerText = Uniform(1, 3), Fixed(8)
	cfg.ShieldKind, cfg.ShieldFrac, cfg.ShieldScale = ShieldManifold, Uniform(0.5, 1), Uniform(0.5, 4)
	cfg.Center = true
	s := newSampler(t, c, cfg)
	for _, split := range []data.Split{data.Train, data.Val} {
		in := textSet(s, split)
		for i := int64(0); i < 25; i++ {
			ex := example(t, s, split, i)
			target := ex.ShieldScale * ex.M
			for k, src := range ex.Perm {
				if src < ex.NClean {
					continue
				}
				j := src - ex.NClean
				donor := ex.RowText[k]
				if !in[donor] || slices.Contains(ex.Positives, donor) {
					t.Fatalf("%s example %d: donor %d not a non-positive %s text", split, i, donor, split)
				}
				row := ex.S[j*d : (j+1)*d]
				if nr := norm(row); math.Abs(nr/target-1) > 1e-6 {
					t.Fatalf("manifold shield norm %v, want exactly %v", nr, target)
				}
				// The shield is a centered donor row up to a positive factor: cosine 1 with one of them.
				ci, _ := c.IndexOf(donor)
				best := -1.0
				cand := make([]float32, d)
				for p := 0; p < c.NumTokens(ci); p++ {
					if err := c.Rows(ci, p, 1, cand); err != nil {
						t.Fatal(err)
					}
					var dp, nc float64
					for f := range cand {
						v := float64(cand[f] - ex.CenterMean[f])
						dp += v * float64(row[f])
						nc += v * v
					}
					best = max(best, dp/math.Sqrt(nc)/target)
				}
				if best < 1-1e-6 {
					t.Fatalf("shield is no rescaled row of its donor: best cosine %v", best)
				}
			}
		}
	}
}

func TestNoTextCrossesTheSplit(t *testing.T) {
	c := testCorpus(t, 60, 4, 12, 8, 6)
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Positives, cfg.TokensPerText = Uniform(1, 4), Fixed(6)
	cfg.ShieldKind, cfg.ShieldFrac = ShieldManifold, Fixed(1)
	s := newSampler(t, c, cfg)
	sets := map[data.Split]map[int64]bool{data.Train: textSet(s, data.Train), data.Val: textSet(s, data.Val)}
	for id := range sets[data.Train] {
		if sets[data.Val][id] {
			t.Fatalf("text %d on both sides", id)
		}
	}
	for split, in := range sets {
		for i := int64(0); i < 100; i++ {
			ex := example(t, s, split, i)
			ids := slices.Concat(ex.Positives, ex.HText, ex.RowText)
			for _, id := range ids {
				if !in[id] || data.SplitOf(id, cfg.ValFrac) != split {
					t.Fatalf("%s example %d uses text %d of the other split", split, i, id)
				}
			}
		}
	}
}

func TestCenteringRemovesTheCleanMean(t *testing.T) {
	const d = 8
	c := testCorpus(t, 30, 20, 20, d, 7)
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Center = true
	cfg.Positives, cfg.TokensPerText = Fixed(3), Fixed(10)
	ex := example(t, newSampler(t, c, cfg), data.Train, 3)
	// H + CenterMean gives back the corpus rows, CenterMean is their mean, and H's mean is 0.
	raw := make([]float64, d)
	row := make([]float32, d)
	for i := 0; i < ex.NClean; i++ {
		ci, _ := c.IndexOf(ex.HText[i])
		if err := c.Rows(ci, ex.HPos[i], 1, row); err != nil {
			t.Fatal(err)
		}
		for f, v := range row {
			raw[f] += float64(v) / float64(ex.NClean)
			if math.Abs(float64(ex.H[i*d+f]+ex.CenterMean[f]-v)) > 2e-6 {
				t.Fatalf("row %d feature %d: H + mean = %v, corpus %v", i, f, ex.H[i*d+f]+ex.CenterMean[f], v)
			}
		}
	}
	for f, v := range rowMean(ex.H, d) {
		if math.Abs(float64(v)) > 1e-6 || math.Abs(float64(ex.CenterMean[f])-raw[f]) > 1e-6 {
			t.Fatalf("feature %d: mean after centering %v; removed %v, raw mean %v", f, v, ex.CenterMean[f], raw[f])
		}
	}
}

// U must be A X: checked against an independent float64 product, then the functional identity
// A^-1 ((A X) W) = X W that makes GELO exact.
func TestMixingIsInvertibleToFloat32RoundOff(t *testing.T) {
	const d, w = 40, 7
	c := testCorpus(t, 30, 30, 30, d, 8)
	rng := rand.New(rand.NewPCG(9, 9))
	wm := make([]float32, d*w) // W: (d, w)
	for i := range wm {
		wm[i] = float32(rng.NormFloat64())
	}
	for _, mix := range []struct {
		kind  MixKind
		kappa float64
	}{{MixOrthogonal, 1}, {MixNonOrthogonal, 10}, {MixNonOrthogonal, 100}} {
		cfg := DefaultConfig()
		cfg.ValFrac = 0.3
		cfg.Positives, cfg.TokensPerText = Fixed(2), Fixed(20)
		cfg.ShieldFrac, cfg.Mix, cfg.MixCond = Fixed(0.5), mix.kind, Fixed(mix.kappa)
		ex := example(t, newSampler(t, c, cfg), data.Train, 1)
		n := ex.N
		x := ex.X()
		if e := relErr(ex.UObs, matmul64(n, d, n, ex.A, x)); e > 1e-6 {
			t.Fatalf("%s: U differs from A X by %.2e", mix.kind, e)
		}
		y := make([]float32, n*w) // (A X) W: (n, w)
		matmul(n, w, d, ex.UObs, wm, y)
		a64, y64 := mat.NewDense(n, n, nil), mat.NewDense(n, w, nil)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				a64.Set(i, j, float64(ex.A[i*n+j]))
			}
			for j := 0; j < w; j++ {
				y64.Set(i, j, float64(y[i*w+j]))
			}
		}
		var z mat.Dense
		if err := z.Solve(a64, y64); err != nil {
			t.Fatal(err)
		}
		xw := matmul64(n, w, d, x, wm)
		var num, den float64
		for i := 0; i < n; i++ {
			for j := 0; j < w; j++ {
				e := z.At(i, j) - xw[i*w+j]
				num += e * e
				den += xw[i*w+j] * xw[i*w+j]
			}
		}
		e := math.Sqrt(num / den)
		t.Logf("%s kappa %v: ||A^-1((AX)W) - XW|| / ||XW|| = %.2e", mix.kind, mix.kappa, e)
		if e > 2e-7*mix.kappa*math.Sqrt(float64(n)) {
			t.Fatalf("%s kappa %v: relative error %.2e beyond float32 round-off", mix.kind, mix.kappa, e)
		}
	}
}

func TestPartialObservationAndRounding(t *testing.T) {
	const d = 16
	c := testCorpus(t, 30, 30, 30, d, 9)
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Positives, cfg.TokensPerText, cfg.ShieldFrac = Fixed(2), Fixed(15), Fixed(0.3) // n = 30 + 9
	cfg.ObsRows = 0.5
	full := example(t, newSampler(t, c, cfg), data.Val, 4)
	u := matmul64(full.N, d, full.N, full.A, full.X())
	if full.NObs != 20 || len(full.ObsRows) != 20 || len(full.UObs) != 20*d {
		t.Fatalf("NObs %d of N %d, want ceil(0.5*39) = 20", full.NObs, full.N)
	}
	if !slices.IsSorted(full.ObsRows) || len(slices.Compact(slices.Clone(full.ObsRows))) != 20 {
		t.Fatalf("ObsRows %v not ascending and distinct", full.ObsRows)
	}
	for r, i := range full.ObsRows {
		if e := relErr(full.UObs[r*d:(r+1)*d], u[i*d:(i+1)*d]); e > 1e-6 {
			t.Fatalf("observed row %d is not row %d of A X (%.2e)", r, i, e)
		}
	}
	// The observe dtype touches no other draw, so rounding is exactly a function of the float32 U.
	for _, dt := range []struct {
		dtype ObserveDtype
		round func(float32) float32
	}{{ObserveBF16, numfmt.RoundBF16}, {ObserveFP16, numfmt.RoundF16}} {
		cfg.ObserveDtype = dt.dtype
		ex := example(t, newSampler(t, c, cfg), data.Val, 4)
		changed := 0
		for i, v := range ex.UObs {
			if v != dt.round(full.UObs[i]) {
				t.Fatalf("%s: UObs[%d] = %v, want round(%v)", dt.dtype, i, v, full.UObs[i])
			}
			if v != full.UObs[i] {
				changed++
			}
		}
		if changed < len(ex.UObs)/2 {
			t.Fatalf("%s changed only %d of %d values", dt.dtype, changed, len(ex.UObs))
		}
	}
}

func TestExamplesDependOnSeedSplitAndIndexOnly(t *testing.T) {
	c := testCorpus(t, 40, 10, 30, 12, 10)
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Positives, cfg.TokensPerText = Uniform(1, 3), Uniform(5, 15)
	cfg.ShieldKind, cfg.ShieldFrac, cfg.Mix, cfg.MixCond = ShieldManifold, Uniform(0.1, 1), MixNonOrthogonal, LogUniform(2, 50)
	cfg.ObsRows, cfg.ObserveDtype = 0.8, ObserveFP16
	s := newSampler(t, c, cfg)
	ws := new(Workspace)
	fwd := make([]*Example, 10)
	for i := range fwd {
		ex, err := s.ExampleWith(ws, data.Train, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		fwd[i] = ex
	}
	for i := len(fwd) - 1; i >= 0; i-- { // reverse order, fresh workspace each time
		if ex := example(t, s, data.Train, int64(i)); !reflect.DeepEqual(ex, fwd[i]) {
			t.Fatalf("example %d differs when generated in another order", i)
		}
	}
	if reflect.DeepEqual(fwd[0].UObs, example(t, s, data.Val, 0).UObs) {
		t.Fatal("train and val example 0 are equal")
	}
	cfg.Seed = 1
	if reflect.DeepEqual(fwd[0].A, example(t, newSampler(t, c, cfg), data.Train, 0).A) {
		t.Fatal("another seed gave the same A")
	}
	// Stages draw from separate streams: another shield kind keeps positives, rows and A.
	cfg.Seed, cfg.ShieldKind = 0, ShieldGaussian
	g := example(t, newSampler(t, c, cfg), data.Train, 2)
	if !slices.Equal(g.Positives, fwd[2].Positives) || !slices.Equal(g.H, fwd[2].H) || !slices.Equal(g.A, fwd[2].A) {
		t.Fatal("changing the shield kind changed the texts or A")
	}
}
