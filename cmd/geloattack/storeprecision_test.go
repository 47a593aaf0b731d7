package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data/store"
)

// withStoreRows: a bf16 store's candidates widen an fp32 deployer's bound past a bf16 deployer's
// own, a tf32 store's by fp16's bound; an fp32 store and a bound given outright stay as they are.
func TestWithStoreRowsWidens(t *testing.T) {
	const blocks, width = 10, 4096
	rc := func(prec string) content.Recompute {
		c, err := membership.RecomputeError(prec, blocks, width)
		if err != nil {
			t.Fatal(err)
		}
		return content.Recompute{Rho: membership.StoredRecompute(c, 0x1p-11), Precision: prec, Compute: c, StoreRoundoff: 0x1p-11, Blocks: blocks, Width: width}
	}
	fp32, bf16, fp16 := rc("fp32"), rc("bf16"), rc("fp16")
	for _, c := range []struct {
		prec  string
		floor content.Recompute // the store side's own bound, which the widened one must pass
	}{{store.PrecisionBF16, bf16}, {store.PrecisionTF32, fp16}} {
		got, note, err := withStoreRows(fp32, store.Meta{ComputePrecision: c.prec})
		if err != nil {
			t.Fatal(err)
		}
		if !(got.Rho > c.floor.Rho) || !(got.Rho > fp32.Rho) || !strings.Contains(note, c.prec+" GEMMs") {
			t.Errorf("fp32 deployer, %s store: rho %.3g (note %q); want above the store side's %.3g and the deployer's %.3g", c.prec, got.Rho, note, c.floor.Rho, fp32.Rho)
		}
		if want := (fp32.Compute + c.floor.Compute) / (1 - c.floor.Compute); got.Compute != want {
			t.Errorf("%s store: compute part %.6g, want (c_dep + c_st)/(1 - c_st) = %.6g", c.prec, got.Compute, want)
		}
		if got.Precision != "fp32" || got.Blocks != blocks || got.Width != width {
			t.Errorf("%s store: the deployer's fields changed: %+v", c.prec, got)
		}
	}
	for name, m := range map[string]store.Meta{"unrecorded": {}, "fp32": {ComputePrecision: store.PrecisionFP32}} {
		if got, note, err := withStoreRows(fp32, m); err != nil || got != fp32 || note != "" {
			t.Errorf("%s store: %+v, %q, %v; want the bound unchanged", name, got, note, err)
		}
	}
	given := content.Recompute{Rho: 1e-6}
	if got, _, err := withStoreRows(given, store.Meta{ComputePrecision: store.PrecisionBF16}); err != nil || got != given {
		t.Errorf("-recompute-error with a bf16 store: %+v, %v; want the user's bound as given", got, err)
	}
}

// `baseline -attack rowspace -deployer-rows` against a store declared bf16 (meta.json
// compute_precision): the candidates are that store's rows, so even -deployer-precision fp32
// allows for a bf16 deployer on the store's side, and no positive of the PyTorch bf16 deployer is
// proven absent. The same flags on the store without the field prove positives absent wrongly
// (TestBaselineRowspaceAttacksPyTorchBF16Deployer's wrong bound): a consumer that read the bf16
// store as fp32 would fail here.
func TestBaselineRowspaceBF16StoreWidensTheBound(t *testing.T) {
	d := rowspaceBF16Deployer(t)
	st := d.store
	attack := append(append([]string{}, d.base...), "-deployer-rows", d.rows, "-deployer-precision", "fp32")
	plain := rowspaceJSON(t, attack...)
	if plain.Absence.PositivesProven == 0 {
		t.Fatalf("the fp32 bound on the fp32-declared store proves no positive absent (%+v): the test cannot tell the bounds apart", *plain.Absence)
	}

	s, err := store.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	meta := s.Meta()
	s.Close()
	meta.ComputePrecision = store.PrecisionBF16
	raw, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st, store.MetaFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	wide := rowspaceJSON(t, attack...)
	bf16, err := membership.RecomputeError("bf16", meta.Layer, meta.D)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fp32-declared store: rho %.3g, %+v; bf16-declared: rho %.3g, %+v", plain.Recompute.Rho, *plain.Absence, wide.Recompute.Rho, *wide.Absence)
	if !(wide.Recompute.Rho > bf16) || !(wide.Recompute.Rho > plain.Recompute.Rho) {
		t.Errorf("bf16 store: rho %.3g; want above the bf16 bound %.3g and the fp32-declared store's %.3g", wide.Recompute.Rho, bf16, plain.Recompute.Rho)
	}
	if wide.Absence.PositivesProven != 0 {
		t.Errorf("bf16 store: %+v; want no positive proven absent", *wide.Absence)
	}
	out, err := cli(t, append([]string{"baseline", "-attack", "rowspace"}, attack...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "the candidates are the store's rows, computed in bf16 GEMMs") {
		t.Errorf("the run does not say the bound was widened for the store's rows: %v\n%s", err, out)
	}
}
