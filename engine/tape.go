package engine

import (
	"errors"
	"fmt"
	"math/bits"
)

// op is the kind of a recorded node: its backward moves the gradient of
// n.out into the gradients of n.in (accumulating). Each op is a zero-size
// type declared in its op_*.go file beside its forward, so a node holding
// one allocates nothing.
type op interface {
	backward(tp *Tape, n *node)
}

// node is one recorded op: its output, inputs and whatever its backward
// needs. One fat struct so the tape is a reusable slice and recording
// allocates nothing after warm-up; each op uses the fields it names.
type node struct {
	op    op
	out   *Tensor
	in    [4]*Tensor // the op's tensor arguments in order; nil for an absent optional one
	saved *Tensor    // computed by forward for backward: rstd, lse, row norms

	unary   UnaryOp  // Unary's function
	binary  BinaryOp // Binary's function
	rowOp   RowOp    // RowReduce's reduction
	reduce  ReduceOp // Reduce's reduction
	c       float32  // Unary's constant
	heads   int      // Attention's head count
	row     int      // TakeRow's row
	part    int      // a LinearStack part's index
	parts   int      // LinearStack's number of parts
	partsIn uint8    // LinearStack: bit i set when part i's gradient has been written (maxStackParts bits)
	transA  bool     // MatMul: a enters transposed
	transB  bool     // MatMul: b enters transposed
}

// tensorBlock is a slab of Tensor structs; pointers into it stay valid.
type tensorBlock [256]Tensor

// Tape records ops on one backend for reverse-mode differentiation and owns
// the per-step activation arena. It is not safe for concurrent use.
type Tape struct {
	be     Backend
	arena  arena
	nodes  []node
	blocks []*tensorBlock
	nt     int // tensors handed out this step
	grads  gradPool
	err    error
	// forwardOnly: no Backward will follow, so ops skip the work only a backward uses.
	forwardOnly bool
}

// NewTape returns an empty tape whose tensors live on be.
func NewTape(be Backend) *Tape {
	return &Tape{be: be, arena: arena{be: be}, grads: gradPool{be: be, free: map[int][]Storage{}, seq: map[Storage]int{}}}
}

// Backend is the device the tape computes on.
func (tp *Tape) Backend() Backend { return tp.be }

// Err is the first error recorded since Reset (a shape mismatch, an index
// out of range, memory exhausted). After an error every op returns a
// placeholder scalar without computing; Backward returns the error.
func (tp *Tape) Err() error { return tp.err }

// SetForwardOnly marks the tape as used for forward passes only (evaluation) or
// not: ops then skip the work only a backward pass uses (VocabCrossEntropy's
// gradient, which its forward otherwise prepares), and Backward refuses.
func (tp *Tape) SetForwardOnly(on bool) { tp.forwardOnly = on }

// Reset starts a new step: forgets the recorded ops, rewinds the arena and
// clears the error. Tensors made by this tape before Reset become invalid.
func (tp *Tape) Reset() {
	// Variables keep their gradients until now; give those back.
	for i := range tp.nt {
		t := &tp.blocks[i/len(tensorBlock{})][i%len(tensorBlock{})]
		if t.grad != nil && !t.param {
			tp.grads.put(t.grad)
			t.grad, t.gradReady = nil, false
		}
	}
	tp.grads.canonical()
	tp.nodes = tp.nodes[:0]
	tp.nt = 0
	tp.arena.reset()
	tp.err = nil
}

// ArenaBytes reports the activation memory held (allocated chunks) and the
// most used by one step so far, in bytes.
func (tp *Tape) ArenaBytes() (held, peak int64) {
	return int64(tp.arena.total) * 4, int64(tp.arena.high) * 4
}

// GradPoolBytes reports the memory held for activation gradients, in bytes.
func (tp *Tape) GradPoolBytes() int64 { return int64(tp.grads.total) * 4 }

// fail records the first error and returns the placeholder tensor.
func (tp *Tape) fail(err error) *Tensor {
	if tp.err == nil {
		tp.err = err
	}
	return tp.placeholder()
}

// failf is fail with a formatted error prefixed by the op name.
func (tp *Tape) failf(op, format string, args ...any) *Tensor {
	return tp.fail(fmt.Errorf("engine: %s: "+format, append([]any{op}, args...)...))
}

// usable reports whether op may run: no error so far, and every input
// (nil ones are absent optional inputs) has storage on the tape's backend.
// Otherwise it records why, naming op, the tensor and both backends: a
// backend's kernels read only their own memory, so a foreign tensor would
// crash the CPU or hand the GPU a meaningless address.
func (tp *Tape) usable(op string, ts ...*Tensor) bool {
	if tp.err != nil {
		return false
	}
	for _, t := range ts {
		if t == nil {
			continue
		}
		if t.st == nil {
			tp.failf(op, "%v has no storage (a parameter used before Params.Alloc?)", t)
			return false
		}
		if be := t.st.Backend(); !tp.home(be) {
			other := ""
			if be.Name() == tp.be.Name() {
				other = " (another backend of the same kind)"
			}
			tp.failf(op, "%v is on backend %q but the tape computes on %q%s", t, be.Name(), tp.be.Name(), other)
			return false
		}
	}
	return true
}

// home reports whether be is one the tape's backend computes on: tp.be
// itself or, for a wrapper around another backend (a test double that
// injects faults, a decorator that counts FLOPs) whose memory is the inner
// backend's, a backend its Unwrap chain reaches.
func (tp *Tape) home(be Backend) bool {
	for b := tp.be; b != nil; {
		if b == be {
			return true
		}
		w, ok := b.(Wrapper)
		if !ok {
			return false
		}
		b = w.Unwrap()
	}
	return false
}

// placeholder is the scalar returned by ops after an error. It has storage
// so that reading it (Item) is harmless.
func (tp *Tape) placeholder() *Tensor {
	t := tp.newTensor()
	t.ndim, t.size, t.name = 0, 1, "placeholder"
	st, off, err := tp.arena.alloc(1)
	if err == nil {
		t.st, t.off = st, off
		tp.be.Fill(t, 0)
	}
	return t
}

// newTensor returns a zeroed Tensor struct from the tape's slabs.
func (tp *Tape) newTensor() *Tensor {
	b, i := tp.nt/len(tensorBlock{}), tp.nt%len(tensorBlock{})
	if b == len(tp.blocks) {
		tp.blocks = append(tp.blocks, new(tensorBlock))
	}
	tp.nt++
	t := &tp.blocks[b][i]
	*t = Tensor{node: -1}
	return t
}

// alloc makes an activation tensor of the given shape in the arena; ok is
// false after an error (recorded on the tape).
func (tp *Tape) alloc(name string, dims ...int) (*Tensor, bool) {
	if tp.err != nil {
		return tp.placeholder(), false
	}
	sh, size, err := makeShape(dims)
	if err != nil {
		tp.fail(fmt.Errorf("engine: %s: %w", name, err))
		return tp.placeholder(), false
	}
	st, off, err := tp.arena.alloc(size)
	if err != nil {
		tp.fail(err)
		return tp.placeholder(), false
	}
	t := tp.newTensor()
	t.shape, t.ndim, t.size, t.st, t.off, t.name = sh, len(dims), size, st, off, name
	return t, true
}

// record appends a node producing out; out needs a gradient when any input
// does. It returns out.
func (tp *Tape) record(n node) *Tensor {
	for _, in := range n.in {
		if in != nil && in.needGrad {
			n.out.needGrad = true
		}
	}
	if !n.out.needGrad {
		return n.out // nothing will flow back: no need to keep the node
	}
	n.out.node = len(tp.nodes)
	tp.nodes = append(tp.nodes, n)
	return n.out
}

// Input copies host data into a new tensor of the given shape that needs no
// gradient (model inputs, masks, targets).
func (tp *Tape) Input(data []float32, dims ...int) *Tensor {
	t, ok := tp.alloc("input", dims...)
	if !ok {
		return t
	}
	if len(data) != t.size {
		return tp.failf("Input", "%d values for shape %v", len(data), dims)
	}
	tp.be.Upload(t, data)
	return t
}

// Variable is Input for a tensor that receives a gradient (tests, probing
// what an input's gradient is); its Grad stays valid until Reset.
func (tp *Tape) Variable(data []float32, dims ...int) *Tensor {
	t := tp.Input(data, dims...)
	if tp.err == nil {
		t.needGrad = true
		t.name = "variable"
	}
	return t
}

// Backward computes the gradient of the scalar loss with respect to every
// tensor that needs one, running the tape in reverse. Parameter gradients
// are accumulated (+=) into the Params gradient buffer; activation gradients
// are taken from a reusable pool and given back as soon as their producer's
// backward has run.
func (tp *Tape) Backward(loss *Tensor) error {
	if tp.err != nil {
		return tp.err
	}
	if !tp.usable("Backward", loss) {
		return tp.err
	}
	if loss.size != 1 {
		return fmt.Errorf("engine: Backward: loss %v is not a scalar", loss)
	}
	if tp.forwardOnly {
		return errors.New("engine: Backward on a forward-only tape (SetForwardOnly)")
	}
	if !loss.needGrad {
		return errors.New("engine: Backward: loss does not depend on any parameter or variable")
	}
	tp.ensureGrad(loss)
	if tp.err != nil {
		return tp.err
	}
	tp.be.Fill(loss.grad, 1)
	loss.gradReady = true
	for i := len(tp.nodes) - 1; i >= 0; i-- {
		n := &tp.nodes[i]
		if n.out.grad == nil {
			continue // no gradient reached this op
		}
		for _, in := range n.in {
			if in != nil && in.needGrad {
				tp.ensureGrad(in)
			}
		}
		if tp.err != nil {
			return tp.err
		}
		n.op.backward(tp, n)
		tp.grads.put(n.out.grad)
		n.out.grad, n.out.gradReady = nil, false
	}
	// A Variable whose gradient buffer was handed out but never written
	// (no path carried a gradient into it) must read as zero.
	for i := range tp.nt {
		t := &tp.blocks[i/len(tensorBlock{})][i%len(tensorBlock{})]
		if t.grad != nil && !t.gradReady {
			tp.be.Fill(t.grad, 0)
			t.gradReady = true
		}
	}
	// Leaves that are not parameters (Variables) keep their gradient until
	// Reset; give the buffers back to the pool then.
	if tp.err == nil {
		// An asynchronous device reports failed kernels here (without waiting).
		if err := BackendErr(tp.be); err != nil {
			return fmt.Errorf("engine: backward: %w", err)
		}
	}
	return tp.err
}

// ensureGrad gives t a gradient buffer if it has none. The buffer is
// recycled and not cleared: the first kernel to reach it overwrites it
// (see overwriteGrad) or clears it first (accumGrad), which saves a pass of
// zeroing over most activation gradients.
func (tp *Tape) ensureGrad(t *Tensor) {
	if t.grad != nil {
		return
	}
	if t.node >= 0 && isStackPart(tp.nodes[t.node].op) {
		// A LinearStack part's gradient is its block of the stack's gradient:
		// its consumers write it in place, where the stack's GEMMs read it.
		s := tp.nodes[t.node].in[0]
		tp.ensureGrad(s)
		if tp.err != nil {
			return
		}
		g := tp.newTensor()
		g.shape, g.ndim, g.size, g.name = t.shape, t.ndim, t.size, t.name+".grad"
		g.st, g.off, g.alias = s.grad.st, s.grad.off+(t.off-s.off), true
		t.grad, t.gradReady = g, false
		return
	}
	g := tp.newTensor()
	g.shape, g.ndim, g.size, g.name = t.shape, t.ndim, t.size, t.name+".grad"
	st, err := tp.grads.get(t.size)
	if err != nil {
		tp.fail(err)
		return
	}
	g.st, g.off = st, 0
	t.grad, t.gradReady = g, false
}

// beta is a GEMM's beta for a gradient that is added into (1) or
// overwritten (0).
func beta(accumulate bool) float32 {
	if accumulate {
		return 1
	}
	return 0
}

// accumGrad returns t's gradient for a kernel that adds into it (clearing
// the buffer first if it holds no values yet), or nil when t needs none.
func (tp *Tape) accumGrad(t *Tensor) *Tensor {
	if t == nil || !t.needGrad || t.grad == nil {
		return nil
	}
	if !t.gradReady {
		tp.be.Fill(t.grad, 0)
		t.gradReady = true
	}
	return t.grad
}

// overwriteGrad returns t's gradient for a kernel that writes every element
// and can either add into it or overwrite it, and whether to add (false when
// the buffer holds no values yet); nil when t needs none. It marks the buffer
// as holding values, so a later overwriteGrad or accumGrad of t adds: it is
// right for one kernel writing one input, and for an input that the same
// node also passes again only when this kernel runs before the other input's
// (Linear's dx, then dW). A single kernel that writes two aliased inputs
// must use accumGrad instead (see opSwiGLU).
func (tp *Tape) overwriteGrad(t *Tensor) (g *Tensor, accumulate bool) {
	if t == nil || !t.needGrad || t.grad == nil {
		return nil, false
	}
	accumulate = t.gradReady
	t.gradReady = true
	return t.grad, accumulate
}

// gradPool recycles gradient buffers by capacity, so that after the first
// step Backward allocates nothing, and so that a set size N that changes from
// batch to batch (ranged positives, tokens or shield fractions) does not grow
// the pool without bound: pooled by exact size, every new N added buffers that
// were never reused (300 distinct N held 122 times one step's pool in
// settransformer's TestMemoryBoundedUnderChangingSetSizes). A request takes the
// smallest free buffer that holds it, and a new buffer is allocated at the
// request's size class (sizeClass: at most 25% larger), so the pool stays at
// about one step at the largest N seen.
type gradPool struct {
	be    Backend
	free  map[int][]Storage // by capacity (a sizeClass value)
	total int
	seq   map[Storage]int // allocation order (see canonical)
}

// sizeClass rounds n up to the next m * 2^k with m in {4, 5, 6, 7} (n <= 8
// stays as it is): at most 25% above n.
func sizeClass(n int) int {
	if n <= 8 {
		return max(n, 1)
	}
	k := bits.Len(uint(n)) - 3 // n >> k is in [4, 8)
	m := n >> k
	if m<<k < n {
		m++
	}
	return m << k
}

func (p *gradPool) get(n int) (Storage, error) {
	c := sizeClass(n)
	// Best fit: the smallest free class that holds n. Taking a larger buffer than the class
	// keeps one step's buffers reusable by a step of another size, so the pool is bounded by
	// about one step at the largest size rather than by one step per class.
	best := 0
	if len(p.free[c]) > 0 {
		best = c // the usual case once a size has been seen: no scan
	} else {
		for k, l := range p.free {
			if k >= c && len(l) > 0 && (best == 0 || k < best) {
				best = k
			}
		}
	}
	if best > 0 {
		l := p.free[best]
		st := l[len(l)-1]
		p.free[best] = l[:len(l)-1]
		return st, nil
	}
	st, err := p.be.Alloc(c)
	if err != nil {
		return nil, fmt.Errorf("engine: allocate gradient of %d elements (pool holds %d): %w", n, p.total, err)
	}
	p.total += c
	p.seq[st] = len(p.seq)
	return st, nil
}

func (p *gradPool) put(g *Tensor) {
	if g == nil || g.off != 0 || g.alias {
		return
	}
	c := g.st.Len()
	p.free[c] = append(p.free[c], g.st)
}
