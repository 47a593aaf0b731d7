package decode

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/fptol"
)

// noisyDeployer is another stack: the model's rows, each moved by a relative error of size rel
// in a random direction (what a bf16 or fp16 forward does to a row), the same for every call.
type noisyDeployer struct {
	m   Model
	rel float64
}

func (n noisyDeployer) Rows(id int64, toks []int, l int) ([]float32, error) {
	rows, err := n.m.Rows(toks, l+1)
	if err != nil {
		return nil, err
	}
	r := rows[l]
	d := len(r) / len(toks)
	rng := rand.New(rand.NewPCG(uint64(id), uint64(l)))
	for p := range toks {
		row := r[p*d : (p+1)*d]
		var nx, ne float64
		e := make([]float64, d)
		for j := range row {
			e[j] = rng.NormFloat64()
			nx += float64(row[j]) * float64(row[j])
			ne += e[j] * e[j]
		}
		s := n.rel * math.Sqrt(nx/ne)
		for j := range row {
			row[j] += float32(s * e[j])
		}
	}
	return r, nil
}

// Rows from another stack (each off the attacker's by a relative error as large as a bf16
// deployer's bound allows at block 0, or an fp16's) are read with the bound of the declared
// precision: never a wrong claim, in every observed dtype, and the repeat-free text still claimed
// in fp32 observation. The same rows attacked as if bit-equal (rho pinned near 0) lose the texts:
// the bound is what reads them.
func TestDeployerRowsFromAnotherStack(t *testing.T) {
	m := newToy(200, 64, 3, 1)
	texts := claimCases[0].texts
	for _, prec := range []string{fptol.PrecisionFP16, fptol.PrecisionBF16} {
		rel, err := fptol.Recompute(prec, 0, m.D())
		if err != nil {
			t.Fatal(err)
		}
		rel /= 2 // within the bound at every block (it grows with the block)
		dep := noisyDeployer{m: m, rel: rel}
		for _, dt := range []gelo.ObserveDtype{gelo.ObserveNone, gelo.ObserveBF16, gelo.ObserveFP16} {
			what := fmt.Sprintf("%s deployer (error %.2g), %s observed", prec, rel, dt)
			r := decodeExact(t, m, texts, dt, Options{Deployer: dep, DeployerPrecision: prec})
			claimed := checkClaimsRight(t, what, r)
			t.Logf("%s: exact %.2f, %d claims %v", what, r.Exact, len(claimed), claimed)
			if dt == gelo.ObserveNone && !slices.ContainsFunc(claimed, func(c []int) bool { return slices.Equal(c, []int{11, 12, 13, 14}) }) {
				t.Errorf("%s: the repeat-free text [11 12 13 14] is not claimed; claimed %v", what, claimed)
			}
		}
		r := decodeExact(t, m, texts, gelo.ObserveNone, Options{Deployer: dep, Recompute: 1e-9})
		checkClaimsRight(t, prec+" deployer attacked as bit-equal", r)
		if r.Exact == 1 {
			t.Errorf("%s deployer attacked as bit-equal: every text read; the deployer's error tests nothing", prec)
		}
	}
}
