package presence

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// corpus returns texts of rows rows of width d with i.i.d. Laplace entries plus a shared direction
// (hidden states share one), and, when rel > 0, a copy whose every row is moved by exactly rel of
// its norm in a random direction: the attacker's recomputation of the same texts.
func corpus(t *testing.T, texts, rows, d int, rel float64) (mixed, attacker *data.MemCorpus) {
	t.Helper()
	rng := rand.New(rand.NewPCG(36, 2))
	dir := make([]float64, d)
	for j := range dir {
		dir[j] = rng.NormFloat64()
	}
	mixed, attacker = data.NewMemCorpus(d, 1), data.NewMemCorpus(d, 1)
	for i := 0; i < texts; i++ {
		x := make([]float32, rows*d) // (rows, d)
		y := make([]float32, rows*d)
		for r := 0; r < rows; r++ {
			var nx, ne float64
			e := make([]float64, d)
			for j := 0; j < d; j++ {
				v := rng.ExpFloat64()
				if rng.IntN(2) == 0 {
					v = -v
				}
				x[r*d+j] = float32(v + 2*dir[j])
				nx += float64(x[r*d+j]) * float64(x[r*d+j])
				e[j] = rng.NormFloat64()
				ne += e[j] * e[j]
			}
			for j := 0; j < d; j++ {
				y[r*d+j] = x[r*d+j] + float32(rel*math.Sqrt(nx/ne)*e[j])
			}
		}
		if err := mixed.Add(int64(100+i), x, []float32{1}); err != nil {
			t.Fatal(err)
		}
		if err := attacker.Add(int64(100+i), y, []float32{1}); err != nil {
			t.Fatal(err)
		}
	}
	return mixed, attacker
}

// run is row-space retrieval with the presence test at rho over 6 examples of 2 positives each
// (3 per candidate set, 4 extra texts: 10 candidates per example).
func run(t *testing.T, c, cand data.Corpus, cfg gelo.Config, rho float64) *baselines.AbsenceCounts {
	t.Helper()
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	test, err := Test(cfg.ObserveDtype, rho)
	if err != nil {
		t.Fatal(err)
	}
	row, err := baselines.RowSpaceRetrieval(context.Background(), s, baselines.RowSpaceOptions{Split: data.Train,
		Examples: 6, Batch: 3, ExtraNegatives: 4, Candidates: cand, Absence: test})
	if err != nil {
		t.Fatal(err)
	}
	a := row.Absence
	if a == nil || (a.Void == 0 && (a.Positives != 12 || a.Decoys != 48)) {
		t.Fatalf("absence counts %+v: want 12 positives and 48 decoys scored", a)
	}
	return a
}

// base is 2 positives of 8-row windows of 24-row texts, 25% shields: n 20 of d 64, below full rank.
func base() gelo.Config {
	cfg := gelo.DefaultConfig()
	cfg.Positives = gelo.Fixed(2)
	cfg.TokensPerText = gelo.Fixed(8)
	cfg.ShieldFrac = gelo.Fixed(0.25)
	return cfg
}

// Below full rank, in every observed dtype, no positive is proven absent and every decoy is: the
// positives' rows outside their 8-row window lie outside rowspace(U_obs) like a decoy's, so a
// rule that scored every row of a text would prove the positives absent too.
func TestPresenceBelowFullRankProvesDecoysAbsentNeverPositives(t *testing.T) {
	c, _ := corpus(t, 40, 24, 64, 0)
	for _, dt := range []gelo.ObserveDtype{gelo.ObserveNone, gelo.ObserveBF16, gelo.ObserveFP16} {
		cfg := base()
		cfg.ObserveDtype = dt
		a := run(t, c, nil, cfg, 0)
		t.Logf("%s: %+v", dt, a)
		if a.PositivesProven != 0 || a.DecoysProven != a.Decoys {
			t.Errorf("%s: %+v; want no positive and every decoy proven absent", dt, a)
		}
		cfg.TokenSampling = gelo.TokenRandom
		if a := run(t, c, nil, cfg, 0); a.PositivesProven != 0 || a.DecoysProven != a.Decoys {
			t.Errorf("%s, random rows: %+v; want no positive and every decoy proven absent", dt, a)
		}
	}
}

// The attacker's rows lie 1e-3 (relative) from the rows mixed, as another stack's would: with
// rho = 0 (rows taken for bit-equal) every positive is proven absent, wrongly; with rho covering
// the gap none is, and every decoy still is.
func TestPresenceAllowsForTheRecomputationError(t *testing.T) {
	mixed, attacker := corpus(t, 40, 24, 64, 1e-3)
	if a := run(t, mixed, attacker, base(), 0); a.PositivesProven != a.Positives {
		t.Errorf("rho 0 against rows 1e-3 off: %+v; want every positive (wrongly) proven absent, the case rho exists for", a)
	}
	a := run(t, mixed, attacker, base(), 2e-3)
	t.Logf("rho 2e-3: %+v", a)
	if a.PositivesProven != 0 || a.DecoysProven != a.Decoys {
		t.Errorf("rho 2e-3 against rows 1e-3 off: %+v; want no positive and every decoy proven absent", a)
	}
}

// Past full rank (+64 shield rows, n 80 > d 64) the leverage bound decides: no positive is proven
// absent, at scale 1 or 10, with the attacker's rows 1e-3 off and rho covering it.
func TestPresencePastFullRankNeverProvesAPositiveAbsent(t *testing.T) {
	mixed, attacker := corpus(t, 40, 24, 64, 1e-3)
	for _, scale := range []float64{1, 10} {
		cfg := base()
		cfg.ShieldRows, cfg.ShieldScale = 64, gelo.Fixed(scale)
		a := run(t, mixed, attacker, cfg, 2e-3)
		t.Logf("scale %g: %+v", scale, a)
		if a.PositivesProven != 0 {
			t.Errorf("scale %g: %+v; want no positive proven absent", scale, a)
		}
	}
}

// No proof where none holds: with rows dropped (obs_rows 0.9) a row of X need not lie in the
// observed rows' span, and with centred rows the rows mixed are not the texts' rows.
func TestPresenceProvesNothingWithoutItsPremises(t *testing.T) {
	c, _ := corpus(t, 40, 24, 64, 0)
	cfg := base()
	cfg.ObsRows = 0.9
	if a := run(t, c, nil, cfg, 0); a.PositivesProven+a.DecoysProven != 0 {
		t.Errorf("obs_rows 0.9: %+v; want no proof", a)
	}
	cfg = base()
	cfg.Center = true
	if a := run(t, c, nil, cfg, 0); a.PositivesProven+a.DecoysProven != 0 || a.Void != 6 {
		t.Errorf("centred: %+v; want every example void", a)
	}
}
