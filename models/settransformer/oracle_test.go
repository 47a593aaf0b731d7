package settransformer

// The autodiff oracle: the retrieval model and its InfoNCE loss written a second time, as a
// gorgonia float64 graph, so the engine's hand-written backward passes have an independent
// reference. Only gorgonia ops whose gradients are known to be right are used: matrix products,
// elementwise arithmetic, Exp, Log, Sqrt, Inverse, Sigmoid and a full Sum. Slicing, concatenation
// and broadcasting are all expressed as products with constant 0/1 matrices (selectors), because a
// product's gradient is the one thing every autodiff gets right; rsqrt is Inverse(Sqrt(x)) because
// gorgonia's InverseSqrt has a wrong gradient, and logsumexp is written out with a constant shift.

import (
	"fmt"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// oracleBatch is one padded batch in float64, laid out exactly as the engine model receives it.
type oracleBatch struct {
	B, N, C   int
	U         []float64 // U: (B, N, d)
	Mask      []bool    // Mask: (B, N), true = real row
	Cand      []float64 // Cand: (C, e), unnormalised candidate embeddings
	Positives [][]int   // Positives[b]: indices into Cand
}

// oracleResult is what the oracle computes.
type oracleResult struct {
	Loss      float64
	Grads     map[string][]float64 // same layout as the weights
	Rows      [][]float64          // Rows[b]: (N+1, h) final-norm states, CLS first
	Retrieval []float64            // (B, e) L2-normalised retrieval vectors
}

// graphBuilder wraps a gorgonia graph and keeps the first error, so the model reads as a plain
// sequence of operations.
type graphBuilder struct {
	g      *gorgonia.ExprGraph
	err    error
	consts int
}

func (gb *graphBuilder) keep(n *gorgonia.Node, err error) *gorgonia.Node {
	if err != nil && gb.err == nil {
		gb.err = err
	}
	return n
}

// constant is a fixed (r, c) float64 matrix.
func (gb *graphBuilder) constant(r, c int, v []float64) *gorgonia.Node {
	t := tensor.New(tensor.WithShape(r, c), tensor.WithBacking(append([]float64(nil), v...)))
	// A named graph input rather than gorgonia.NewConstant: a product of two graph-less constants
	// fails, and unnamed inputs of equal shape are deduplicated into one node by gorgonia.
	gb.consts++
	name := fmt.Sprintf("const%d", gb.consts)
	return gorgonia.NewMatrix(gb.g, tensor.Float64, gorgonia.WithShape(r, c), gorgonia.WithName(name), gorgonia.WithValue(t))
}

// filled is a constant (r, c) matrix with every entry v.
func (gb *graphBuilder) filled(r, c int, v float64) *gorgonia.Node {
	data := make([]float64, r*c)
	for i := range data {
		data[i] = v
	}
	return gb.constant(r, c, data)
}

// selector is the constant (r, c) matrix with ones at (i, off+i): it picks or places a block.
func (gb *graphBuilder) selector(r, c, rowOff, colOff, n int) *gorgonia.Node {
	data := make([]float64, r*c)
	for i := 0; i < n; i++ {
		data[(rowOff+i)*c+colOff+i] = 1
	}
	return gb.constant(r, c, data)
}

// binary applies f unless an earlier step failed (then a nil node would make gorgonia panic).
func (gb *graphBuilder) binary(f func(a, b *gorgonia.Node) (*gorgonia.Node, error), a, b *gorgonia.Node) *gorgonia.Node {
	if gb.err != nil {
		return nil
	}
	return gb.keep(f(a, b))
}

// unary is binary for one operand.
func (gb *graphBuilder) unary(f func(a *gorgonia.Node) (*gorgonia.Node, error), a *gorgonia.Node) *gorgonia.Node {
	if gb.err != nil {
		return nil
	}
	return gb.keep(f(a))
}

func (gb *graphBuilder) mul(a, b *gorgonia.Node) *gorgonia.Node { return gb.binary(gorgonia.Mul, a, b) }
func (gb *graphBuilder) add(a, b *gorgonia.Node) *gorgonia.Node { return gb.binary(gorgonia.Add, a, b) }
func (gb *graphBuilder) sub(a, b *gorgonia.Node) *gorgonia.Node { return gb.binary(gorgonia.Sub, a, b) }
func (gb *graphBuilder) had(a, b *gorgonia.Node) *gorgonia.Node {
	return gb.binary(gorgonia.HadamardProd, a, b)
}
func (gb *graphBuilder) tr(a *gorgonia.Node) *gorgonia.Node {
	return gb.unary(func(a *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Transpose(a) }, a)
}

// linear is x W^T with W in PyTorch layout [out, in]; x: (n, in) -> (n, out).
func (gb *graphBuilder) linear(x, w *gorgonia.Node) *gorgonia.Node { return gb.mul(x, gb.tr(w)) }

// rowScale multiplies row i of x (n, c) by s[i] (s: (n, 1)).
func (gb *graphBuilder) rowScale(x, s *gorgonia.Node, n, c int) *gorgonia.Node {
	return gb.had(x, gb.mul(s, gb.filled(1, c, 1)))
}

// rmsnorm: x (n, c), w (1, c) -> x / sqrt(mean(x^2) + eps) * w.
func (gb *graphBuilder) rmsnorm(x, w *gorgonia.Node, n, c int, eps float64) *gorgonia.Node {
	sq := gb.unary(gorgonia.Square, x)
	ms := gb.mul(sq, gb.filled(c, 1, 1/float64(c))) // (n, 1)
	ms = gb.add(ms, gb.filled(n, 1, eps))
	r := gb.unary(gorgonia.Inverse, gb.unary(gorgonia.Sqrt, ms))
	y := gb.rowScale(x, r, n, c)
	return gb.had(y, gb.mul(gb.filled(n, 1, 1), w))
}

// softmaxRows: x (n, c) -> row-wise softmax. The attention scores of the test model are O(1), so
// exp needs no shift in float64; masked entries carry -1e9 and underflow to exactly 0.
func (gb *graphBuilder) softmaxRows(x *gorgonia.Node, n, c int) *gorgonia.Node {
	e := gb.unary(gorgonia.Exp, x)
	s := gb.mul(e, gb.filled(c, 1, 1)) // (n, 1)
	return gb.rowScale(e, gb.unary(gorgonia.Inverse, s), n, c)
}

// paramFn returns the node of a named parameter.
type paramFn func(name string) *gorgonia.Node

// oracleParams makes every weight of specs a named (rows, cols) graph input (vectors as (1, n))
// and returns the nodes by name and their order.
func oracleParams(gb *graphBuilder, specs []ParamSpec, w map[string][]float64) (map[string]*gorgonia.Node, []string, error) {
	nodes := map[string]*gorgonia.Node{}
	var order []string
	for _, s := range specs {
		v, ok := w[s.Name]
		if !ok || len(v) != s.Size() {
			return nil, nil, fmt.Errorf("oracle: weight %s missing or of wrong size", s.Name)
		}
		r, c := 1, s.Size()
		if len(s.Shape) == 2 {
			r, c = s.Shape[0], s.Shape[1]
		}
		t := tensor.New(tensor.WithShape(r, c), tensor.WithBacking(append([]float64(nil), v...)))
		nodes[s.Name] = gorgonia.NewMatrix(gb.g, tensor.Float64, gorgonia.WithShape(r, c), gorgonia.WithName(s.Name), gorgonia.WithValue(t))
		order = append(order, s.Name)
	}
	return nodes, order, nil
}

// mha is multi-head scaled dot-product attention: q (nq, h), k and v (nk, h), mask an additive
// (nq, nk) constant or nil -> (nq, h) with the heads side by side.
func (gb *graphBuilder) mha(q, k, v, mask *gorgonia.Node, nq, nk, h, heads int) *gorgonia.Node {
	dh := h / heads
	var o *gorgonia.Node
	for hd := 0; hd < heads; hd++ {
		sel := gb.selector(h, dh, hd*dh, 0, dh) // picks columns hd*dh.. of a (., h) matrix
		qh, kh, vh := gb.mul(q, sel), gb.mul(k, sel), gb.mul(v, sel)
		s := gb.had(gb.mul(qh, gb.tr(kh)), gb.filled(nq, nk, 1/math.Sqrt(float64(dh))))
		if mask != nil {
			s = gb.add(s, mask)
		}
		oh := gb.mul(gb.mul(gb.softmaxRows(s, nq, nk), vh), gb.tr(sel)) // placed back at its columns
		if o == nil {
			o = oh
		} else {
			o = gb.add(o, oh)
		}
	}
	return o
}

// attnSub is the projected attention sub-block under prefix (e.g. "layers.0.attn"): queries from
// xq (nq, h), keys and values from xkv (nk, h) -> o_proj(attention) (nq, h).
func (gb *graphBuilder) attnSub(p paramFn, prefix string, xq, xkv, mask *gorgonia.Node, nq, nk, h, heads int) *gorgonia.Node {
	q := gb.linear(xq, p(prefix+".q_proj.weight"))
	k := gb.linear(xkv, p(prefix+".k_proj.weight"))
	v := gb.linear(xkv, p(prefix+".v_proj.weight"))
	return gb.linear(gb.mha(q, k, v, mask, nq, nk, h, heads), p(prefix+".o_proj.weight"))
}

// selfAttnSub is x + Attn(RMSNorm(x)) for a block under prefix (e.g. "layers.0."): x (n, h).
func (gb *graphBuilder) selfAttnSub(p paramFn, prefix string, x, mask *gorgonia.Node, n, h, heads int, eps float64) *gorgonia.Node {
	a := gb.rmsnorm(x, p(prefix+"attn_norm.weight"), n, h, eps)
	return gb.add(x, gb.attnSub(p, prefix+"attn", a, a, mask, n, n, h, heads))
}

// mlpSub is x + SwiGLU(RMSNorm(x)) for a block under prefix: x (n, h).
func (gb *graphBuilder) mlpSub(p paramFn, prefix string, x *gorgonia.Node, n, h int, eps float64) *gorgonia.Node {
	m := gb.rmsnorm(x, p(prefix+"mlp_norm.weight"), n, h, eps)
	g := gb.linear(m, p(prefix+"mlp.gate_proj.weight"))
	up := gb.linear(m, p(prefix+"mlp.up_proj.weight"))
	act := gb.had(gb.had(g, gb.unary(gorgonia.Sigmoid, g)), up) // silu(g) * up
	return gb.add(x, gb.linear(act, p(prefix+"mlp.down_proj.weight")))
}

// oracleNodes are the parameter nodes by name and the graph's outputs.
type oracleNodes struct {
	params map[string]*gorgonia.Node
	order  []string
	loss   *gorgonia.Node
	// rows and retrieval are copies taken when the nodes are computed (gorgonia.Read): the tape
	// machine may reuse a node's memory once nothing on the loss's path reads it.
	rows      []*gorgonia.Value
	retrieval *gorgonia.Value
}

// read returns a copy of n's value as the graph computes it.
func (gb *graphBuilder) read(n *gorgonia.Node) *gorgonia.Value {
	v := new(gorgonia.Value)
	if gb.err == nil {
		gorgonia.Read(n, v)
	}
	return v
}

// buildOracle writes the model of SPEC §4-5 as a gorgonia graph.
func buildOracle(gb *graphBuilder, cfg Config, w map[string][]float64, bt oracleBatch) (*oracleNodes, error) {
	specs, err := ParamSpecs(cfg)
	if err != nil {
		return nil, err
	}
	on := &oracleNodes{}
	if on.params, on.order, err = oracleParams(gb, specs, w); err != nil {
		return nil, err
	}
	p := func(name string) *gorgonia.Node { return on.params[name] }

	d, e, h, N, B, C := cfg.InputDim, cfg.CandidateDim, cfg.Hidden, bt.N, bt.B, bt.C
	n := N + 1           // CLS first
	var Q *gorgonia.Node // Q: (B, e)
	for b := 0; b < B; b++ {
		u := gb.constant(N, d, bt.U[b*N*d:(b+1)*N*d])                                                   // (N, d)
		x := gb.linear(u, p("in_proj.weight"))                                                          // (N, h)
		x = gb.add(gb.mul(gb.selector(n, 1, 0, 0, 1), p("cls")), gb.mul(gb.selector(n, N, 1, 0, N), x)) // (n, h)
		// Additive key mask: column j+1 (row j of U) is -1e9 when that row is padding.
		maskData := make([]float64, n*n)
		for i := 0; i < n; i++ {
			for j := 0; j < N; j++ {
				if !bt.Mask[b*N+j] {
					maskData[i*n+j+1] = -1e9
				}
			}
		}
		mask := gb.constant(n, n, maskData)
		for l := 0; l < cfg.Layers; l++ {
			pre := fmt.Sprintf("layers.%d.", l)
			x = gb.selfAttnSub(p, pre, x, mask, n, h, cfg.Heads, cfg.Eps)
			x = gb.mlpSub(p, pre, x, n, h, cfg.Eps)
		}
		x = gb.rmsnorm(x, p("norm.weight"), n, h, cfg.Eps)
		on.rows = append(on.rows, gb.read(x))
		z := gb.linear(gb.mul(gb.selector(1, n, 0, 0, 1), x), p("retrieval_head.weight")) // (1, e)
		ss := gb.mul(gb.unary(gorgonia.Square, z), gb.filled(e, 1, 1))                    // (1, 1)
		qb := gb.rowScale(z, gb.unary(gorgonia.Inverse, gb.unary(gorgonia.Sqrt, ss)), 1, e)
		placed := gb.mul(gb.selector(B, 1, b, 0, 1), qb) // (B, e), row b
		if Q == nil {
			Q = placed
		} else {
			Q = gb.add(Q, placed)
		}
	}
	on.retrieval = gb.read(Q)

	// Candidates are data, so their normalisation happens outside the graph.
	cn := make([]float64, C*e)
	for c := 0; c < C; c++ {
		var ss float64
		for j := 0; j < e; j++ {
			ss += bt.Cand[c*e+j] * bt.Cand[c*e+j]
		}
		for j := 0; j < e; j++ {
			cn[c*e+j] = bt.Cand[c*e+j] / math.Sqrt(ss)
		}
	}
	cos := gb.mul(Q, gb.tr(gb.constant(C, e, cn))) // (B, C)
	var s *gorgonia.Node
	if cfg.LearnTemperature {
		scale := gb.unary(gorgonia.Exp, gb.had(p("log_tau"), gb.filled(1, 1, -1))) // 1/tau: (1, 1)
		s = gb.had(cos, gb.mul(gb.filled(B, 1, 1), gb.mul(scale, gb.filled(1, C, 1))))
	} else {
		s = gb.had(cos, gb.filled(B, C, 1/cfg.Temperature))
	}
	// logsumexp with the constant shift 1/tau0 + 1 >= s for every s the test reaches.
	shift := 1/cfg.Temperature + 1
	ex := gb.unary(gorgonia.Exp, (gb.sub(s, gb.filled(B, C, shift))))
	pos := make([]float64, B*C)
	for b, ps := range bt.Positives {
		for _, c := range ps {
			pos[b*C+c] = 1
		}
	}
	all := gb.unary(gorgonia.Log, (gb.mul(ex, gb.filled(C, 1, 1))))                                 // (B, 1)
	num := gb.unary(gorgonia.Log, (gb.mul(gb.had(ex, gb.constant(B, C, pos)), gb.filled(C, 1, 1)))) // (B, 1)
	on.loss = gb.unary(func(a *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Sum(a) },
		gb.had(gb.sub(all, num), gb.filled(B, 1, 1/float64(B))))
	return on, gb.err
}

// runOracle evaluates the oracle; with grad it also returns d loss / d every parameter.
func runOracle(cfg Config, w map[string][]float64, bt oracleBatch, grad bool) (oracleResult, error) {
	gb := &graphBuilder{g: gorgonia.NewGraph()}
	on, err := buildOracle(gb, cfg, w, bt)
	if err != nil {
		return oracleResult{}, err
	}
	var gradNodes gorgonia.Nodes
	if grad {
		wrt := make(gorgonia.Nodes, len(on.order))
		for i, name := range on.order {
			wrt[i] = on.params[name]
		}
		if gradNodes, err = gorgonia.Grad(on.loss, wrt...); err != nil {
			return oracleResult{}, fmt.Errorf("oracle grad: %w", err)
		}
	}
	vm := gorgonia.NewTapeMachine(gb.g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return oracleResult{}, fmt.Errorf("oracle run: %w", err)
	}
	res := oracleResult{Loss: on.loss.Value().Data().(float64)}
	res.Retrieval = append([]float64(nil), (*on.retrieval).Data().([]float64)...)
	for _, r := range on.rows {
		res.Rows = append(res.Rows, append([]float64(nil), (*r).Data().([]float64)...))
	}
	if grad {
		res.Grads = map[string][]float64{}
		for i, name := range on.order {
			res.Grads[name] = append([]float64(nil), gradNodes[i].Value().Data().([]float64)...)
		}
	}
	return res, nil
}
