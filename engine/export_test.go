package engine

// TensorSlabs is the number of Tensor slabs tp holds, for the external tests'
// check that a step's tensors are recycled rather than reallocated.
func TensorSlabs(tp *Tape) int { return len(tp.blocks) }

// LayoutTable is layoutTable, for the external tests.
var LayoutTable = layoutTable

// StepPerView is one AdamW step made with one Backend.AdamW call per parameter, with Step's
// hyper-parameters: the reference the per-decay-class update must match bit for bit.
func StepPerView(o *AdamW) {
	s := o.next()
	be := o.p.data.st.Backend()
	for _, v := range o.p.views {
		s.Decay = 0
		if v.Decay {
			s.Decay = o.cfg.WeightDecay
		}
		be.AdamW(v.Tensor, v.Tensor.Grad(), o.view(o.m, v), o.view(o.v, v), s)
	}
}
