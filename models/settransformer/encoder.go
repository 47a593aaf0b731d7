package settransformer

import (
	"fmt"

	"github.com/gelo-research/geloattack/engine"
)

// block is one pre-norm transformer block's weights (PyTorch layout, (out, in)).
type block struct {
	attnNorm       *engine.Tensor // (h)
	wq, wk, wv, wo *engine.Tensor // (h, h)
	mlpNorm        *engine.Tensor // (h)
	gate, up       *engine.Tensor // (mlp, h)
	down           *engine.Tensor // (h, mlp)
}

// Encoder is the permutation-equivariant set encoder of SPEC §4: input projection d -> h, a
// learned CLS row in front of every set, Layers Llama-2-style pre-norm blocks without positional
// encoding or causal mask, and a final RMSNorm. It holds views into a Params buffer; the unmixing
// model reuses it and adds its decoder on the row states.
type Encoder struct {
	heads  int
	inProj *engine.Tensor // (h, d)
	cls    *engine.Tensor // (h)
	layers []block
	norm   *engine.Tensor // (h)
}

// lookup returns the named parameter of ps or records an error naming it.
type lookup struct {
	ps  *engine.Params
	err error
}

func (l *lookup) get(name string) *engine.Tensor {
	t, ok := l.ps.Lookup(name)
	if !ok && l.err == nil {
		l.err = fmt.Errorf("settransformer: parameter %q is not registered", name)
	}
	return t
}

// NewEncoder binds an encoder to the parameters named by EncoderParamSpecs(c) in ps.
func NewEncoder(c Config, ps *engine.Params) (*Encoder, error) {
	l := &lookup{ps: ps}
	e := &Encoder{heads: c.Heads, inProj: l.get("in_proj.weight"), cls: l.get("cls"), norm: l.get("norm.weight")}
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("layers.%d.", i)
		e.layers = append(e.layers, block{
			attnNorm: l.get(p + "attn_norm.weight"),
			wq:       l.get(p + "attn.q_proj.weight"),
			wk:       l.get(p + "attn.k_proj.weight"),
			wv:       l.get(p + "attn.v_proj.weight"),
			wo:       l.get(p + "attn.o_proj.weight"),
			mlpNorm:  l.get(p + "mlp_norm.weight"),
			gate:     l.get(p + "mlp.gate_proj.weight"),
			up:       l.get(p + "mlp.up_proj.weight"),
			down:     l.get(p + "mlp.down_proj.weight"),
		})
	}
	return e, l.err
}

// Forward records the encoder on tp. u: (B, N, d) the observed rows, mask: (B, N) with 1 for real
// rows and 0 for padding, or nil when every row is real. It returns the final-norm states
// x: (B, N+1, h) with the CLS state at row 0 and row j+1 for row j of u, and the key mask
// (B, N+1) that extends mask with the (real) CLS row. Nothing depends on the order of the rows of
// u: attention has no positions, so permuting them permutes rows 1..N of x and leaves row 0.
func (e *Encoder) Forward(tp *engine.Tape, u, mask *engine.Tensor) (x, keyMask *engine.Tensor) {
	x = tp.Linear(u, e.inProj)                 // (B, N, h)
	x, keyMask = tp.PrependCLS(x, e.cls, mask) // (B, N+1, h), (B, N+1)
	for i := range e.layers {
		x = e.layers[i].forward(tp, x, keyMask, e.heads)
	}
	return tp.RMSNorm(x, e.norm), keyMask
}

// forward is x += Attn(RMSNorm(x)); x += SwiGLU(RMSNorm(x)). x: (B, n, h) -> (B, n, h).
func (b *block) forward(tp *engine.Tape, x, keyMask *engine.Tensor, heads int) *engine.Tensor {
	a := tp.RMSNorm(x, b.attnNorm)
	o := tp.Attention(tp.Linear(a, b.wq), tp.Linear(a, b.wk), tp.Linear(a, b.wv), keyMask, heads)
	x = tp.Add(x, tp.Linear(o, b.wo))
	m := tp.RMSNorm(x, b.mlpNorm)
	act := tp.SwiGLU(tp.Linear(m, b.gate), tp.Linear(m, b.up)) // (B, n, mlp)
	return tp.Add(x, tp.Linear(act, b.down))
}
