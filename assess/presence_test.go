package assess

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/internal/fptol"
)

// perturbedDeployer is a deployer whose rows differ from the attacker's recomputation as much as
// its declared precision allows: each row moved by 0.9 rho of its norm (rho = fptol.Recompute
// for the precision and the block's depth) along a random direction, seeded by block and text.
func perturbedDeployer(precision string, d int) func(int, int64, []float32) ([]float32, error) {
	return func(block int, id int64, rows []float32) ([]float32, error) {
		rho, err := fptol.Recompute(precision, block, d)
		if err != nil {
			return nil, err
		}
		rng := rand.New(rand.NewPCG(uint64(block)+1, uint64(id)))
		for i := 0; i+d <= len(rows); i += d {
			row := rows[i : i+d]
			e := make([]float64, d)
			var ne, nx float64
			for j := range e {
				e[j] = rng.NormFloat64()
				ne += e[j] * e[j]
				nx += float64(row[j]) * float64(row[j])
			}
			s := 0.9 * rho * math.Sqrt(nx/ne)
			for j := range row {
				row[j] += float32(s * e[j])
			}
		}
		return rows, nil
	}
}

// Presence claims only what its test proves: a text proven absent. Against a bf16 deployer whose
// rows lie 0.9 rho from the attacker's, with U observed in fp32, bf16 and fp16, below full rank,
// at full rank and twice past it with scale-1 and scale-10 shields, and at cond(A) 100 and 1e4
// (the default grid's other axes), no prompt (all are in their
// batch) is ever excluded; most decoys are proven absent below full rank; and past full rank with
// strong shields the attack says it cannot tell rather than call a decoy present, as it did
// before (2026-11-27's grid: 100 wrong claims per setting at 512 rows on d = 256).
func TestPresenceClaimsAreProofs(t *testing.T) {
	model, texts := tinyDecoder(t)
	for _, dtype := range []string{DTypeNone, DTypeBF16, DTypeFP16} {
		d := tinyDeployment(model, texts, 8)
		d.Attacker.Attacks = []string{"presence"}
		d.Deployer.Precision = fptol.PrecisionBF16
		d.Observe.DType = dtype
		d.Grid = Grid{Enabled: true, ShieldRows: []int{64, 128}, ShieldScales: []float64{1, 10}}
		_, res := run(t, d, Options{DeployerRows: perturbedDeployer(fptol.PrecisionBF16, 64)})
		a := res.Summary.Attacks[0]
		for _, c := range a.Cells {
			t.Logf("%s %s: %d/%d told apart, %d decoys excluded, %d wrong, %d cannot tell; ranks %v-%v",
				dtype, c.Setting.Name, c.Successes, c.Prompts, c.Claims, c.Wrong, c.CannotTell, c.RankMin, c.RankMax)
			if c.Prompts != 8 || c.Wrong != 0 {
				t.Errorf("%s, %s: %d wrong claims in %d prompts: a prompt in its batch was excluded", dtype, c.Setting.Name, c.Wrong, c.Prompts)
			}
			if c.Successes+c.CannotTell != c.Prompts {
				t.Errorf("%s, %s: %d told apart + %d cannot tell != %d prompts", dtype, c.Setting.Name, c.Successes, c.CannotTell, c.Prompts)
			}
		}
		// A decoy that shares most of its rows with the batch's prompts lies within rho of their
		// span: proving it absent needs a tighter deployer (fp32: every decoy, as
		// TestWeakSettingReadsEveryPrompt checks).
		if c := a.Cells[0]; c.Successes < 4 {
			t.Errorf("%s, below full rank: %d/8 decoys proven absent, want most", dtype, c.Successes)
		}
		strong := slices.IndexFunc(a.Cells, func(c Cell) bool { return c.Setting.Name == "rows=128,scale=10" })
		if c := a.Cells[strong]; c.CannotTell == 0 {
			t.Errorf("%s, %s: %d cannot tell; want the strong setting past full rank to leave some undecided", dtype, c.Setting.Name, c.CannotTell)
		}
	}
}
