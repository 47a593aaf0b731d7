package engine

import (
	"errors"
	"fmt"
	"strings"
)

// ParamView is one named parameter: its place in the contiguous buffer.
type ParamView struct {
	Name   string  // e.g. "layers.0.attn.q_proj.weight"
	Shape  []int   // PyTorch layout: (out, in) for Linear weights
	Offset int     // first element within Params.Data(), set by Alloc (see Params for the layout)
	Size   int     // number of elements
	Decay  bool    // AdamW applies weight decay to it
	Tensor *Tensor // the parameter itself (Grad() is its gradient)
}

// Params holds every parameter of a model in one contiguous buffer, with a
// table of named views, and a gradient buffer of the same layout: AdamW is
// one kernel per decay class and a checkpoint one pass over the table.
// Register with Add, then call Alloc once; tensors returned by Add have no
// storage until Alloc.
//
// Layout: Alloc places every decayed parameter first, in registration order,
// then every non-decayed one, in registration order. Decay alternates along a
// model (a norm weight between every pair of linear layers), so the
// registration order would split AdamW into one launch per run of equal
// decay (99 for the paper-size model); this order needs two. Views() keeps
// registration order, and checkpoints go tensor by tensor, by name, so the
// layout is not part of any file format. Whole-buffer reductions (GradNorm,
// CheckFinite) read the buffer in this order: their float64 rounding, not
// their value, follows the layout.
type Params struct {
	views []ParamView
	index map[string]int
	total int
	err   error
	data  *Tensor    // (total)
	grad  *Tensor    // (total)
	runs  []decayRun // the non-empty decay classes in buffer order, set by Alloc
	// stacks are the views made by Stack, bound by Alloc.
	stacks []paramStack
}

// paramStack is one Stack view: the tensor and the indices of its parts in views.
type paramStack struct {
	t     *Tensor
	parts []int
}

// decayRun is a range of the buffer whose parameters share one decay flag.
type decayRun struct {
	off, n int
	decay  bool
}

// NewParams returns an empty parameter table.
func NewParams() *Params {
	return &Params{index: map[string]int{}}
}

// Add registers a parameter and returns its tensor (usable after Alloc).
// decay says whether AdamW decays it; DefaultDecay gives the project's rule.
// Errors (duplicate name, bad shape, Add after Alloc) are returned by Alloc.
func (p *Params) Add(name string, shape []int, decay bool) *Tensor {
	t := &Tensor{name: name, needGrad: true, param: true, node: -1}
	if p.err != nil {
		return t
	}
	if p.data != nil {
		p.err = fmt.Errorf("engine: parameter %q added after Alloc", name)
		return t
	}
	if _, dup := p.index[name]; dup {
		p.err = fmt.Errorf("engine: parameter %q registered twice", name)
		return t
	}
	sh, size, err := makeShape(shape)
	if err != nil {
		p.err = fmt.Errorf("engine: parameter %q: %w", name, err)
		return t
	}
	t.shape, t.ndim, t.size = sh, len(shape), size
	p.index[name] = len(p.views)
	p.views = append(p.views, ParamView{Name: name, Shape: t.Shape(), Size: size, Decay: decay, Tensor: t})
	p.total += size
	return t
}

// Alloc lays the registered parameters out (decayed first, see Params),
// allocates the parameter and gradient buffers on be, zero-filled, and
// points every registered tensor at its view. It returns the first error
// recorded by Add.
func (p *Params) Alloc(be Backend) error {
	if p.err != nil {
		return p.err
	}
	if p.data != nil {
		return errors.New("engine: Params.Alloc called twice")
	}
	p.layout()
	ds, err := be.Alloc(p.total)
	if err != nil {
		return fmt.Errorf("engine: allocate %d parameters: %w", p.total, err)
	}
	gs, err := be.Alloc(p.total)
	if err != nil {
		return fmt.Errorf("engine: allocate %d parameter gradients: %w", p.total, err)
	}
	p.data = &Tensor{st: ds, ndim: 1, size: p.total, name: "params", node: -1}
	p.data.shape[0] = p.total
	p.grad = &Tensor{st: gs, ndim: 1, size: p.total, name: "params.grad", node: -1}
	p.grad.shape[0] = p.total
	for _, v := range p.views {
		p.bind(v.Tensor, v.Offset)
	}
	return p.bindStacks()
}

// Stack returns one tensor (P*rows, cols) that views P registered 2-D
// parameters of equal shape (rows, cols) as one matrix, for Tape.LinearStack
// (a fused q/k/v projection: one GEMM over the three weights). The parts keep
// their names, checkpoint entries and optimiser state; the stack is no
// parameter of its own (not in Views), only another view of their memory
// and of their gradients. The parts must have been registered one after
// another with the same decay, so that the layout puts them side by side;
// Alloc checks that and returns the error, as it does Add's.
func (p *Params) Stack(name string, parts ...*Tensor) *Tensor {
	t := &Tensor{name: name, needGrad: true, param: true, node: -1}
	if p.err != nil {
		return t
	}
	if p.data != nil {
		p.err = fmt.Errorf("engine: stack %q made after Alloc", name)
		return t
	}
	if len(parts) == 0 {
		p.err = fmt.Errorf("engine: stack %q has no parts", name)
		return t
	}
	idx := make([]int, len(parts))
	for j, part := range parts {
		i, ok := p.index[part.name]
		if !ok || p.views[i].Tensor != part {
			p.err = fmt.Errorf("engine: stack %q: part %q is not a parameter of this table", name, part.name)
			return t
		}
		if part.ndim != 2 || part.shape != parts[0].shape {
			p.err = fmt.Errorf("engine: stack %q: part %v: want 2-D parts of one shape (part 0 is %v)", name, part, parts[0])
			return t
		}
		idx[j] = i
	}
	t.ndim, t.size = 2, len(parts)*parts[0].size
	t.shape[0], t.shape[1] = len(parts)*parts[0].shape[0], parts[0].shape[1]
	p.stacks = append(p.stacks, paramStack{t: t, parts: idx})
	return t
}

// bind points t at element off of the parameter buffer and gives it the
// gradient view at the same place of the gradient buffer.
func (p *Params) bind(t *Tensor, off int) {
	t.st, t.off = p.data.st, off
	g := &Tensor{shape: t.shape, ndim: t.ndim, size: t.size, st: p.grad.st, off: off, name: t.name + ".grad", node: -1}
	t.grad, t.gradReady = g, true
}

// bindStacks points every Stack view at its parts' memory, which layout must
// have placed side by side.
func (p *Params) bindStacks() error {
	for _, s := range p.stacks {
		first := p.views[s.parts[0]]
		next := first.Offset
		for _, i := range s.parts {
			v := p.views[i]
			if v.Offset != next {
				return fmt.Errorf("engine: stack %q: %q does not follow the previous part in the buffer (register the parts one after another, with the same decay)", s.t.name, v.Name)
			}
			next += v.Size
		}
		p.bind(s.t, first.Offset)
	}
	return nil
}

// layout sets every view's Offset, decayed views first, and the runs AdamW
// updates.
func (p *Params) layout() {
	p.runs = p.runs[:0]
	off := 0
	for _, decay := range []bool{true, false} {
		start := off
		for i := range p.views {
			if p.views[i].Decay == decay {
				p.views[i].Offset = off
				off += p.views[i].Size
			}
		}
		if off > start {
			p.runs = append(p.runs, decayRun{off: start, n: off - start, decay: decay})
		}
	}
}

// Views returns the table of parameters in registration order (do not
// modify it).
func (p *Params) Views() []ParamView { return p.views }

// Lookup returns the parameter named name.
func (p *Params) Lookup(name string) (*Tensor, bool) {
	i, ok := p.index[name]
	if !ok {
		return nil, false
	}
	return p.views[i].Tensor, true
}

// Len is the total number of parameter elements.
func (p *Params) Len() int { return p.total }

// Data is the whole parameter buffer as one tensor, (Len()).
func (p *Params) Data() *Tensor { return p.data }

// Grad is the whole gradient buffer as one tensor, (Len()).
func (p *Params) Grad() *Tensor { return p.grad }

// ZeroGrad sets every parameter gradient to zero. Backward accumulates;
// AdamW.Step already leaves the gradients zero, so this is for steps that
// skip the update (a NaN loss, gradient probing).
func (p *Params) ZeroGrad() {
	if p.grad != nil {
		p.grad.st.Backend().Fill(p.grad, 0)
	}
}

// DefaultDecay is the project's weight-decay rule: matrices of Linear layers
// (2-D parameters whose name ends in ".weight" and does not contain "norm":
// in_proj, q/k/v/o, gate/up/down, the heads) are decayed; norm weights, cls,
// slots, the log-temperature and any other vector or free tensor are not.
func DefaultDecay(name string, shape []int) bool {
	return len(shape) == 2 && strings.HasSuffix(name, ".weight") && !strings.Contains(name, "norm")
}
