package checkpoints

import (
	"fmt"

	"github.com/gelo-research/geloattack/engine"
)

// Restore applies a loaded checkpoint to a model: it copies ck's weights into the parameters of
// ps and, when opt is not nil, sets opt's moments and step from ck.State (a resumed run; eval and
// other readers of weights pass nil). It is the one path from a checkpoint into a model.
//
// ck must hold exactly the parameters of ps, each with the model's shape; otherwise no weight is
// copied and the error names the checkpoint file and lists every missing, unexpected and misshapen
// tensor with both shapes. Moments that do not match the parameters are refused by
// engine.AdamW.SetState, after the weights were copied, with an error naming the file and the
// tensor.
func Restore(ck Checkpoint, ps *engine.Params, opt *engine.AdamW) error {
	have, byName, err := specsOf(ck.Weights)
	if err != nil {
		return fmt.Errorf("checkpoints: restore %s: %w", ck.Path, err)
	}
	views := ps.Views()
	want := make([]Spec, len(views))
	size := make(map[string]int, len(views))
	for i, pv := range views {
		want[i] = Spec{Name: pv.Name, Shape: pv.Shape}
		size[pv.Name] = pv.Size
	}
	dstLen := func(name string) (int, bool) {
		n, ok := size[name]
		return n, ok
	}
	if err := matchSpecs(have, want, dstLen); err != nil {
		return fmt.Errorf("checkpoints: restore %s: %w", ck.Path, err)
	}
	for _, pv := range views {
		if err := pv.Tensor.CopyFrom(ck.Weights[byName[pv.Name]].Data); err != nil {
			return fmt.Errorf("checkpoints: restore %s: tensor %q: %w", ck.Path, pv.Name, err)
		}
	}
	if opt == nil {
		return nil
	}
	st := engine.AdamWState{Step: int(ck.State.Step), M: map[string][]float32{}, V: map[string][]float32{}}
	for _, t := range ck.State.AdamM {
		st.M[t.Name] = t.Data
	}
	for _, t := range ck.State.AdamV {
		st.V[t.Name] = t.Data
	}
	if err := opt.SetState(st); err != nil {
		return fmt.Errorf("checkpoints: restore %s: optimizer state: %w", ck.Path, err)
	}
	return nil
}
