package baselines

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/synth"
	"gonum.org/v1/gonum/mat"
)

// TestPaperSizeTables prints the two tables of issue 9 as JSON lines on a synthetic corpus at
// d = 4096 (400 texts of 64..128 rows; sampler defaults: 4 positives x 64 window rows + 10%
// Gaussian shields, orthogonal A). It takes minutes, so it runs only when asked:
//
//	GELOATTACK_PAPER_TABLES=1 go test -run TestPaperSizeTables -v -timeout 60m ./baselines
func TestPaperSizeTables(t *testing.T) {
	if os.Getenv("GELOATTACK_PAPER_TABLES") == "" {
		t.Skip("set GELOATTACK_PAPER_TABLES=1 to run (minutes)")
	}
	c, err := synth.Generate(synth.Config{Texts: 400, MinTokens: 64, MaxTokens: 128, D: 4096, E: 128, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gelo.NewSampler(c, gelo.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	enc := json.NewEncoder(os.Stdout)
	for _, agg := range []Aggregate{Energy, BestRow} {
		start := time.Now()
		rows, err := RowSpaceTable(ctx, s, nil, nil, RowSpaceOptions{Split: data.Val, Examples: 8, Batch: 4, ExtraNegatives: 12, Aggregate: agg})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("row-space table (%v): %v", agg, time.Since(start))
	}
	// JADE at n = 256 is capped at 4 rounds: its cumulants are noise-dominated at T = 4096 (see
	// JADE), and more rounds only cost time.
	methods := []BSSMethod{
		{"fastica", func(ctx context.Context, u *mat.Dense) (Separation, error) {
			return FastICA(ctx, u, FastICAOptions{Seed: 1})
		}},
		{"jade", func(ctx context.Context, u *mat.Dense) (Separation, error) {
			return JADE(ctx, u, JADEOptions{MaxRounds: 4})
		}},
	}
	start := time.Now()
	rows, err := ShieldTable(ctx, s, ShieldTableOptions{BSS: BSSOptions{Split: data.Val, Examples: 1, Seed: 1}, Methods: methods})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("shield table: %v", time.Since(start))
}
