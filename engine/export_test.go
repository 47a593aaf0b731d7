package engine

import "math"

// TensorSlabs is the number of Tensor slabs tp holds, for the external tests'
// check that a step's tensors are recycled rather than reallocated.
func TensorSlabs(tp *Tape) int { return len(tp.blocks) }

// LayoutTable is layoutTable, for the external tests.
var LayoutTable = layoutTable

// StepPerView is one AdamW step made with one Backend.AdamW call per parameter, with Step's
// hyper-parameters: the reference the per-decay-class update must match bit for bit.
func StepPerView(o *AdamW) {
	o.step++
	lr := o.cfg.LR
	if o.cfg.Schedule != nil {
		lr = o.cfg.Schedule(o.step)
	}
	o.lr = lr
	t := float64(o.step)
	s := AdamWStep{LR: lr, Beta1: o.cfg.Beta1, Beta2: o.cfg.Beta2, Eps: o.cfg.Eps,
		BiasCorr1: float32(1 - math.Pow(float64(o.cfg.Beta1), t)),
		BiasCorr2: float32(1 - math.Pow(float64(o.cfg.Beta2), t))}
	be := o.p.data.st.Backend()
	for _, v := range o.p.views {
		s.Decay = 0
		if v.Decay {
			s.Decay = o.cfg.WeightDecay
		}
		be.AdamW(v.Tensor, v.Tensor.Grad(), o.view(o.m, v), o.view(o.v, v), s)
	}
}
