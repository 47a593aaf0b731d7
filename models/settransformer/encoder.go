package settransformer

import (
	"errors"
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// attnWeights are one attention sub-block's projections (PyTorch layout, (out, in)).
// The projections of one input are one weight (engine.Params.Stack of the named parameters).
type attnWeights struct {
	in *engine.Tensor // self-attention: q, k, v as (3h, h); cross-attention: k, v as (2h, h)
	wq *engine.Tensor // (h, h): cross-attention's query projection; nil for self-attention
	wo *engine.Tensor // (h, h)
}

// block is one pre-norm transformer block's weights (PyTorch layout, (out, in)).
type block struct {
	attnNorm *engine.Tensor // (h)
	attn     attnWeights
	mlpNorm  *engine.Tensor // (h)
	gate, up *engine.Tensor // (mlp, h)
	down     *engine.Tensor // (h, mlp)
}

// Encoder is the permutation-equivariant set encoder of SPEC §4: input projection d -> h, a
// learned CLS row in front of every set (retrieval task only), Layers Llama-2-style pre-norm
// blocks without positional encoding or causal mask, and a final RMSNorm. It holds views into a
// Params buffer; the unmixing model runs it without CLS (ForwardRows) and adds its decoder on
// the row states.
type Encoder struct {
	heads  int
	eps    float32        // the RMSNorm epsilon of every norm (Config.Eps)
	inProj *engine.Tensor // (h, d)
	cls    *engine.Tensor // (h); nil for the unmix task
	layers []block
	norm   *engine.Tensor // (h)
}

// encoder registers the encoder's parameters on b, in this order: the input projection, the CLS
// vector (retrieval task only), the blocks and the final norm.
func (b *paramBuilder) encoder(c Config) *Encoder {
	h := c.Hidden
	outStd := InitStd / math.Sqrt(2*float64(c.Layers))
	e := &Encoder{heads: c.Heads, eps: float32(c.Eps), inProj: b.linear("in_proj.weight", h, c.InputDim, InitStd)}
	if hasCLS(c) {
		e.cls = b.normal("cls", []int{h}, InitStd)
	}
	for i := 0; i < c.Layers; i++ {
		e.layers = append(e.layers, b.block(fmt.Sprintf("layers.%d.", i), h, c.MLPHidden, false, outStd).block)
	}
	e.norm = b.norm("norm.weight", h)
	return e
}

// errNoCLS is Forward's error on an encoder bound for the unmix task.
var errNoCLS = errors.New("settransformer: encoder has no CLS vector (task unmix): use ForwardRows")

// Forward records the encoder on tp. u: (B, N, d) the observed rows, mask: (B, N) with 1 for real
// rows and 0 for padding, or nil when every row is real. It returns the final-norm states
// x: (B, N+1, h) with the CLS state at row 0 and row j+1 for row j of u, and the key mask
// (B, N+1) that extends mask with the (real) CLS row. Nothing depends on the order of the rows of
// u: attention has no positions, so permuting them permutes rows 1..N of x and leaves row 0.
// It fails on an encoder without CLS (task unmix).
func (e *Encoder) Forward(tp *engine.Tape, u, mask *engine.Tensor) (x, keyMask *engine.Tensor, err error) {
	if e.cls == nil {
		return nil, nil, errNoCLS
	}
	x = tp.Linear(u, e.inProj)                 // (B, N, h)
	x, keyMask = tp.PrependCLS(x, e.cls, mask) // (B, N+1, h), (B, N+1)
	return e.run(tp, x, keyMask), keyMask, nil
}

// ForwardRows records the encoder over the rows of u alone, without a CLS row: u: (B, N, d),
// mask: (B, N) or nil -> x: (B, N, h), the final-norm state of every row (padded rows hold
// values that mean nothing). Permuting the rows of u with the mask permutes the rows of x.
func (e *Encoder) ForwardRows(tp *engine.Tape, u, mask *engine.Tensor) *engine.Tensor {
	return e.run(tp, tp.Linear(u, e.inProj), mask) // (B, N, h)
}

// run is the blocks and the final norm: x (B, n, h) -> (B, n, h).
func (e *Encoder) run(tp *engine.Tape, x, keyMask *engine.Tensor) *engine.Tensor {
	for i := range e.layers {
		x = e.layers[i].forward(tp, x, keyMask, e.heads, e.eps)
	}
	return tp.RMSNorm(x, e.norm, e.eps)
}

// forward is x += Attn(RMSNorm(x)); x += SwiGLU(RMSNorm(x)), both norms with epsilon eps.
// x: (B, n, h) -> (B, n, h).
func (b *block) forward(tp *engine.Tape, x, keyMask *engine.Tensor, heads int, eps float32) *engine.Tensor {
	a := tp.RMSNorm(x, b.attnNorm, eps)
	x = tp.Add(x, b.attn.selfAttend(tp, a, keyMask, heads))
	return b.feedForward(tp, x, eps)
}

// feedForward is x + SwiGLU(RMSNorm(x)) with norm epsilon eps: x (B, n, h) -> (B, n, h).
func (b *block) feedForward(tp *engine.Tape, x *engine.Tensor, eps float32) *engine.Tensor {
	m := tp.RMSNorm(x, b.mlpNorm, eps)
	act := tp.SwiGLU(tp.Linear(m, b.gate), tp.Linear(m, b.up)) // (B, n, mlp)
	return tp.Add(x, tp.Linear(act, b.down))
}

// selfAttend is projected multi-head self-attention over x: x (B, N, h), keyMask (B, N) or nil ->
// (B, N, h), the output projection applied. q, k and v are one strided GEMM over the stacked
// weights (Tape.LinearStack), with the gradients of three separate projections.
func (w *attnWeights) selfAttend(tp *engine.Tape, x, keyMask *engine.Tensor, heads int) *engine.Tensor {
	var qkv [3]*engine.Tensor // (B, N, h) each
	tp.LinearStack(x, w.in, qkv[:])
	return tp.Linear(tp.Attention(qkv[0], qkv[1], qkv[2], keyMask, heads), w.wo)
}

// crossAttend is projected multi-head attention of queries xq over keys and values from xkv:
// xq (B, Nq, h), xkv (B, Nk, h), keyMask (B, Nk) or nil -> (B, Nq, h), the output projection
// applied. k and v are one strided GEMM over the stacked weights.
func (w *attnWeights) crossAttend(tp *engine.Tape, xq, xkv, keyMask *engine.Tensor, heads int) *engine.Tensor {
	q := tp.Linear(xq, w.wq) // (B, Nq, h)
	var kv [2]*engine.Tensor // (B, Nk, h) each
	tp.LinearStack(xkv, w.in, kv[:])
	return tp.Linear(tp.Attention(q, kv[0], kv[1], keyMask, heads), w.wo)
}
