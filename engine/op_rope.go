package engine

import (
	"fmt"
	"math"
)

// KernelRoPE names RoPE's fused kernels, a RoPEKernels.
const KernelRoPE = "rope"

// RoPEKernels are RoPE's fused kernels.
type RoPEKernels struct {
	// Forward: x: (B*T, heads*hd), table: (T, hd) -> y: (B*T, heads*hd),
	// each head's pairs (i, i+hd/2) of row r rotated by position r mod T.
	Forward func(y, x, table *Tensor, heads int)
	// Backward accumulates dx += the inverse rotation of dy.
	Backward func(dx, dy, table *Tensor, heads int)
}

// RoPETable is the host table RoPE reads for positions 0..T-1 of heads of
// width headDim (even) with base theta (10000 for Llama-2): row p is
// [cos(p f_0) .. cos(p f_{hd/2-1}), sin(p f_0) .. sin(p f_{hd/2-1})],
// f_i = theta^(-2i/hd), computed in float64 and rounded once, as
// models/llama does, so that the engine's rotation gives the host decoder's
// numbers. A model computes it once and uploads it each step (Tape.Input,
// shape (T, headDim)).
func RoPETable(T, headDim int, theta float64) ([]float32, error) {
	if T < 1 || headDim < 2 || headDim%2 != 0 {
		return nil, fmt.Errorf("engine: RoPETable: %d positions, head width %d: want T >= 1 and an even width >= 2", T, headDim)
	}
	if !(theta > 1) || math.IsInf(theta, 0) {
		return nil, fmt.Errorf("engine: RoPETable: theta %g: want a finite number > 1", theta)
	}
	half := headDim / 2
	out := make([]float32, T*headDim) // (T, hd): cos | sin
	for i := range half {
		f := math.Pow(theta, -float64(2*i)/float64(headDim))
		for p := range T {
			s, c := math.Sincos(float64(p) * f)
			out[p*headDim+i], out[p*headDim+half+i] = float32(c), float32(s)
		}
	}
	return out, nil
}

// RoPE applies rotary position embeddings in Hugging Face's rotate-half
// layout to every head of every row: for row r at position p = r mod T and
// pair i < hd/2 of a head, (x_i, x_{i+hd/2}) -> (x_i cos - x_{i+hd/2} sin,
// x_{i+hd/2} cos + x_i sin), angle p f_i, cos and sin read from table
// (RoPETable). Rows are sequences of T positions one after another, as the
// decoder lays out its queries and keys.
// x: (B*T, heads*hd) or (B, T, heads*hd), table: (T, hd) -> x's shape.
// Saves nothing but its inputs: a rotation's backward is the inverse
// rotation of the gradient.
func (tp *Tape) RoPE(x, table *Tensor, heads int) *Tensor {
	if !tp.usable("RoPE", x, table) {
		return tp.placeholder()
	}
	if table.ndim != 2 || x.ndim < 2 {
		return tp.failf("RoPE", "x %v, table %v: want x (B*T, heads*hd) and table (T, hd)", x, table)
	}
	T, hd := table.shape[0], table.shape[1]
	if heads < 1 || hd%2 != 0 || x.Cols() != heads*hd || x.Rows()%T != 0 {
		return tp.failf("RoPE", "x %v, table %v, %d heads: want x (B*T, heads*hd) with T = %d and an even hd = %d", x, table, heads, T, hd)
	}
	if table.needGrad {
		return tp.failf("RoPE", "the table %v needs a gradient: it is data (Tape.Input)", table)
	}
	k, ok := kernel[RoPEKernels](tp, KernelRoPE)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc("rope", x.Shape()...)
	if !ok {
		return y
	}
	k.Forward(y, x, table, heads)
	return tp.record(node{op: ropeOp{}, out: y, in: [4]*Tensor{x, table}, heads: heads})
}

// ropeOp is RoPE's node: in = x, table.
type ropeOp struct{}

func (ropeOp) backward(tp *Tape, n *node) {
	k, ok := kernel[RoPEKernels](tp, KernelRoPE)
	if !ok {
		return
	}
	x, table := n.in[0], n.in[1]
	if dx := tp.accumGrad(x); dx != nil {
		k.Backward(dx, n.out.grad, table, n.heads)
	}
}
