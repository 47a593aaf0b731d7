package checkpoints

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// restoreModel is a CPU parameter buffer with the given names and shapes and its AdamW.
func restoreModel(t *testing.T, specs ...Spec) (*engine.Params, *engine.AdamW) {
	t.Helper()
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ps := engine.NewParams()
	for _, s := range specs {
		ps.Add(s.Name, s.Shape, true)
	}
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	opt, err := engine.NewAdamW(ps, engine.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	if err != nil {
		t.Fatal(err)
	}
	return ps, opt
}

// restoreCheckpoint is a checkpoint of makeRun's weights at step 7 with a moment for every one.
func restoreCheckpoint(t *testing.T) Checkpoint {
	t.Helper()
	r := makeRun(7, 2)
	moments := func(off float32) []Tensor {
		var out []Tensor
		for _, w := range r.weights {
			d := make([]float32, len(w.Data))
			for i := range d {
				d[i] = off + float32(i)
			}
			out = append(out, Tensor{Name: w.Name, Shape: w.Shape, Data: d})
		}
		return out
	}
	r.state.AdamM, r.state.AdamV = moments(10), moments(20)
	path := filepath.Join(t.TempDir(), CheckpointName(7))
	return Checkpoint{Path: path, Weights: r.weights, State: r.state, Metadata: r.meta, Verified: true}
}

// specsOfRun are the names and shapes of makeRun's weights.
func specsOfRun(ck Checkpoint) []Spec {
	var out []Spec
	for _, w := range ck.Weights {
		out = append(out, Spec{Name: w.Name, Shape: w.Shape})
	}
	return out
}

func TestRestoreWeightsAndOptimizerState(t *testing.T) {
	ck := restoreCheckpoint(t)
	ps, opt := restoreModel(t, specsOfRun(ck)...)
	if err := Restore(ck, ps, opt); err != nil {
		t.Fatal(err)
	}
	st := opt.State()
	if st.Step != 7 {
		t.Errorf("optimizer step %d, want 7", st.Step)
	}
	for i, w := range ck.Weights {
		got, ok := ps.Lookup(w.Name)
		if !ok {
			t.Fatalf("no parameter %q", w.Name)
		}
		if !slices.Equal(bitsOf(got.ToHost()), bitsOf(w.Data)) {
			t.Errorf("%s: %v, want %v bit for bit", w.Name, got.ToHost(), w.Data)
		}
		if !slices.Equal(st.M[w.Name], ck.State.AdamM[i].Data) || !slices.Equal(st.V[w.Name], ck.State.AdamV[i].Data) {
			t.Errorf("%s: moments m %v v %v, want %v %v", w.Name, st.M[w.Name], st.V[w.Name], ck.State.AdamM[i].Data, ck.State.AdamV[i].Data)
		}
	}

	// Without an optimizer only the weights are copied (eval): the optimizer stays fresh.
	ps2, opt2 := restoreModel(t, specsOfRun(ck)...)
	if err := Restore(ck, ps2, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := ps2.Lookup("cls"); !slices.Equal(got.ToHost(), ck.Weights[0].Data) {
		t.Errorf("weights only: cls %v, want %v", got.ToHost(), ck.Weights[0].Data)
	}
	if st := opt2.State(); st.Step != 0 || slices.ContainsFunc(st.M["cls"], func(x float32) bool { return x != 0 }) {
		t.Errorf("weights only: optimizer state changed: step %d, m %v", st.Step, st.M["cls"])
	}
}

// A checkpoint that does not fit the model is refused before any weight is copied, with an error
// naming the file and every tensor that differs, with both shapes.
func TestRestoreRefusesAnotherModel(t *testing.T) {
	ck := restoreCheckpoint(t)
	ps, opt := restoreModel(t,
		Spec{Name: "in_proj.weight", Shape: []int{4, 3}},
		Spec{Name: "norm.weight", Shape: []int{5}},
		Spec{Name: "out.weight", Shape: []int{2}})
	err := Restore(ck, ps, opt)
	if err == nil {
		t.Fatal("a checkpoint of another model was restored")
	}
	for _, want := range []string{ck.Path, `tensor "norm.weight" has shape [4], want [5]`,
		`missing tensor "out.weight" (want shape [2])`, `unexpected tensor "cls" (shape [4])`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got, _ := ps.Lookup("in_proj.weight"); slices.ContainsFunc(got.ToHost(), func(x float32) bool { return x != 0 }) {
		t.Errorf("in_proj.weight was copied although the checkpoint was refused: %v", got.ToHost())
	}
	if opt.State().Step != 0 {
		t.Errorf("optimizer step set although the checkpoint was refused")
	}

	// Moments that do not cover the model are named with the file.
	ck = restoreCheckpoint(t)
	ck.State.AdamV = ck.State.AdamV[1:]
	ps, opt = restoreModel(t, specsOfRun(ck)...)
	err = Restore(ck, ps, opt)
	if err == nil || !strings.Contains(err.Error(), ck.Path) || !strings.Contains(err.Error(), `v lacks "cls"`) {
		t.Errorf("checkpoint without a moment: error %v, want one naming %s and the tensor cls", err, ck.Path)
	}
}
