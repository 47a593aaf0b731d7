package bert_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/bert/berttest"
)

// exactHook computes every projection as the forward pass would (one GEMM, then the bias) and
// records what it was asked.
type exactHook struct {
	layers []int // blocks to hook
	calls  []bert.Projection
	offs   [][]int
	failOn bert.Projection // Linear fails on this projection; the zero value never
}

func (e *exactHook) Hooked(layer int) bool { return slices.Contains(e.layers, layer) }

func (e *exactHook) Linear(p bert.Projection, offs []int, x []float32, in int, w, b []float32, out int, dst []float32) error {
	if p == e.failOn {
		return errors.New("device lost")
	}
	e.calls = append(e.calls, p)
	e.offs = append(e.offs, slices.Clone(offs))
	n := offs[len(offs)-1]
	blas.Default().Sgemm(false, true, n, out, in, 1, x[:n*in], in, w, in, 0, dst[:n*out], out)
	for r := 0; r < n; r++ {
		row := dst[r*out : (r+1)*out]
		for j := range row {
			row[j] += b[j]
		}
	}
	return nil
}

// scaleHook perturbs the value projection of its layer, so that a hook demonstrably takes effect.
type scaleHook struct{ exactHook }

func (s *scaleHook) Linear(p bert.Projection, offs []int, x []float32, in int, w, b []float32, out int, dst []float32) error {
	if err := s.exactHook.Linear(p, offs, x, in, w, b, out, dst); err != nil {
		return err
	}
	if p.Which == bert.ProjValue {
		for i := range dst[:offs[len(offs)-1]*out] {
			dst[i] *= 1.5
		}
	}
	return nil
}

func TestLinearHook(t *testing.T) {
	m, err := bert.LoadModel(writeTinyModel(t, tinyConfig, "", safetensors.F32, 5), blas.Default())
	if err != nil {
		t.Fatal(err)
	}
	h := m.Hidden()
	seqs := [][]int32{{2, 5, 6, 3}, {2, 7, 3}, {2, 8, 9, 10, 11, 3}}
	n := 13
	ctx := context.Background()
	run := func(hook bert.LinearHook) ([]float32, []float32, error) {
		ws, err := m.NewWorkspace(16, 8, 2)
		if err != nil {
			t.Fatal(err)
		}
		ws.Hook = hook
		hidden, pooled := make([]float32, n*h), make([]float32, len(seqs)*h)
		err = m.Forward(ctx, ws, seqs, m.NumLayers(), hidden, pooled)
		return hidden, pooled, err
	}
	plainH, plainP, err := run(nil)
	if err != nil {
		t.Fatal(err)
	}

	// A hook that selects no block never sees a call and changes no bit.
	none := &exactHook{}
	gotH, gotP, err := run(none)
	if err != nil || len(none.calls) != 0 || !slices.Equal(gotH, plainH) || !slices.Equal(gotP, plainP) {
		t.Fatalf("hook selecting no block: err %v, %d calls, equal %v", err, len(none.calls), slices.Equal(gotH, plainH))
	}

	// An exact hook on every block reproduces the forward pass to float32 round-off (Q, K and V are
	// three GEMMs instead of one) and sees q, k, v, o per block with the batch's sequence offsets.
	all := &exactHook{layers: []int{1, 2}}
	gotH, gotP, err = run(all)
	if err != nil {
		t.Fatal(err)
	}
	if d := berttest.MaxDiff(gotH, plainH); d > 1e-5 {
		t.Errorf("exact hook: hidden states differ by %g", d)
	}
	if d := berttest.MaxDiff(gotP, plainP); d > 1e-5 {
		t.Errorf("exact hook: embeddings differ by %g", d)
	}
	var want []bert.Projection
	for _, l := range []int{1, 2} {
		for _, w := range []string{bert.ProjQuery, bert.ProjKey, bert.ProjValue, bert.ProjOutput} {
			want = append(want, bert.Projection{Layer: l, Which: w})
		}
	}
	if !slices.Equal(all.calls, want) {
		t.Errorf("calls %v, want %v", all.calls, want)
	}
	for _, o := range all.offs {
		if !slices.Equal(o, []int{0, 4, 7, 13}) {
			t.Fatalf("offsets %v, want [0 4 7 13]", o)
		}
	}

	// A hook on block 2 only: block 1 is computed as without hooks, and what the hook returns is
	// what the block uses.
	sc := &scaleHook{exactHook{layers: []int{2}}}
	gotH, _, err = run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.calls) != 4 || sc.calls[0].Layer != 2 {
		t.Errorf("block-2 hook calls %v", sc.calls)
	}
	if d := berttest.MaxDiff(gotH, plainH); d < 1e-3 {
		t.Errorf("scaling V of block 2 changed the output by only %g", d)
	}

	// A failing hook stops the pass with its error, naming the layer and projection.
	_, _, err = run(&exactHook{layers: []int{1, 2}, failOn: bert.Projection{Layer: 2, Which: bert.ProjOutput}})
	if err == nil || err.Error() != "forward: layer 2: o projection: device lost" {
		t.Errorf("failing hook: err %v", err)
	}
}
