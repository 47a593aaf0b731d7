package settransformer

// The unmix oracle: the unmixing model (encoder without CLS, slot decoder with cross-attention,
// row and mixing heads) and the whole unmix loss of SPEC §5 (Sinkhorn OT unrolled through its
// iterations in the balanced, dustbin and unbalanced variants, the cycle loss and both
// regularisers) as a gorgonia float64 graph. It is written independently of the engine's
// batching: every example is its own graph over its real rows only, so it has no padding, no key
// mask and no packing, and the slot queries are one parameter node shared by every example
// (which is what the engine's Broadcast must amount to). The same restricted op set as the
// retrieval oracle is used (see oracle_test.go); logsumexp is log(sum(exp(x))) unshifted, which
// float64 holds for the |C/eps| below ~100 that the tests reach.

import (
	"fmt"
	"math"
	"strings"

	"gorgonia.org/gorgonia"

	"github.com/gelo-research/geloattack/losses/ot"
)

// unmixOracleBatch is one padded batch in float64, laid out as the engine model receives it.
type unmixOracleBatch struct {
	B, N, NH int
	U        []float64 // U: (B, N, d)
	Mask     []bool    // Mask: (B, N), true = real row, in any position
	H        []float64 // H: (B, NH, d), example b's clean rows first, then padding
	Clean    []int     // Clean[b]: real clean rows of example b
	M        []float64 // M[b]: mean row norm of example b's clean rows (float32-representable)
}

// realRows returns the real rows of example b's U, in order: (n_b, d).
func (bt unmixOracleBatch) realRows(b, d int) (rows []float64, n int) {
	for i := 0; i < bt.N; i++ {
		if bt.Mask[b*bt.N+i] {
			rows = append(rows, bt.U[(b*bt.N+i)*d:(b*bt.N+i+1)*d]...)
			n++
		}
	}
	return rows, n
}

// unmixOracleResult is what the unmix oracle computes.
type unmixOracleResult struct {
	Loss  float64
	Parts map[string]float64   // the keys of ot.Parts.Values
	Grads map[string][]float64 // same layout as the weights
	HHat  [][]float64          // HHat[b]: (S, d)
	AHat  [][]float64          // AHat[b]: (n_b, S), rows for the real rows of U in order
}

// unmixOracleSpecs are the model's parameters plus the dustbin score when the loss needs one.
func unmixOracleSpecs(cfg Config, loss ot.Config) ([]ParamSpec, error) {
	specs, err := ParamSpecs(cfg)
	if err != nil {
		return nil, err
	}
	if loss.Variant == ot.Dustbin {
		specs = append(specs, ParamSpec{Name: ot.DustbinParamName, Shape: []int{1}, Const: loss.DustbinInit})
	}
	return specs, nil
}

// sumAll is the sum of the entries of x (r, c) as a (1, 1) matrix.
func (gb *graphBuilder) sumAll(x *gorgonia.Node, r, c int) *gorgonia.Node {
	return gb.mul(gb.mul(gb.filled(1, r, 1), x), gb.filled(c, 1, 1))
}

// scale is x * c for a constant c; x (r, c).
func (gb *graphBuilder) scale(x *gorgonia.Node, r, c int, v float64) *gorgonia.Node {
	return gb.had(x, gb.filled(r, c, v))
}

// sinkhorn is the log-domain iteration of losses/ot written out: logK (R, C), la (R, 1) and
// lb (1, C) log-marginals; v = 0, then iters times u and v updates scaled by tau -> plan (R, C).
func (gb *graphBuilder) sinkhorn(logK, la, lb *gorgonia.Node, R, C, iters int, tau float64) *gorgonia.Node {
	vb := lb // v + log b: (1, C)
	var ua *gorgonia.Node
	for it := 0; it < iters; it++ {
		t := gb.add(logK, gb.mul(gb.filled(R, 1, 1), vb))                                    // (R, C)
		lse := gb.unary(gorgonia.Log, gb.mul(gb.unary(gorgonia.Exp, t), gb.filled(C, 1, 1))) // (R, 1)
		ua = gb.add(gb.scale(lse, R, 1, -tau), la)
		t = gb.add(logK, gb.mul(ua, gb.filled(1, C, 1)))
		lse = gb.unary(gorgonia.Log, gb.mul(gb.filled(1, R, 1), gb.unary(gorgonia.Exp, t))) // (1, C)
		vb = gb.add(gb.scale(lse, 1, C, -tau), lb)
	}
	return gb.unary(gorgonia.Exp, gb.add(gb.add(logK, gb.mul(ua, gb.filled(1, C, 1))), gb.mul(gb.filled(R, 1, 1), vb)))
}

// unmixOracleNodes are the parameter nodes and the graph's outputs.
type unmixOracleNodes struct {
	params map[string]*gorgonia.Node
	order  []string
	loss   *gorgonia.Node
	parts  map[string]*gorgonia.Node
	// hHat and aHat are copies taken when computed (see graphBuilder.read).
	hHat, aHat []*gorgonia.Value
}

// buildUnmixOracle writes the unmixing model of SPEC §4 and its loss of SPEC §5 as a gorgonia
// graph.
func buildUnmixOracle(gb *graphBuilder, cfg Config, loss ot.Config, w map[string][]float64, bt unmixOracleBatch) (*unmixOracleNodes, error) {
	specs, err := unmixOracleSpecs(cfg, loss)
	if err != nil {
		return nil, err
	}
	on := &unmixOracleNodes{parts: map[string]*gorgonia.Node{}}
	if on.params, on.order, err = oracleParams(gb, specs, w); err != nil {
		return nil, err
	}
	p := func(name string) *gorgonia.Node { return on.params[name] }
	d, h, S, heads, eps := cfg.InputDim, cfg.Hidden, cfg.Slots, cfg.Heads, cfg.Eps
	tau := 1.0
	if loss.Variant == ot.Unbalanced {
		tau = loss.Rho / (loss.Rho + loss.Eps)
	}
	var cyc, otl, mix, nrm *gorgonia.Node // sums over examples, (1, 1)
	acc := func(sum **gorgonia.Node, v *gorgonia.Node) {
		if *sum == nil {
			*sum = v
		} else {
			*sum = gb.add(*sum, v)
		}
	}
	for b := 0; b < bt.B; b++ {
		ub, n := bt.realRows(b, d)
		u := gb.constant(n, d, ub) // (n, d)
		// Encoder over the real rows alone: no CLS, no mask.
		x := gb.linear(u, p("in_proj.weight")) // (n, h)
		for l := 0; l < cfg.Layers; l++ {
			pre := fmt.Sprintf("layers.%d.", l)
			x = gb.selfAttnSub(p, pre, x, nil, n, h, heads, eps)
			x = gb.mlpSub(p, pre, x, n, h, eps)
		}
		e := gb.rmsnorm(x, p("norm.weight"), n, h, eps) // E: (n, h)
		// Decoder over the shared slot queries.
		z := p("slots") // (S, h)
		for l := 0; l < cfg.DecLayers; l++ {
			pre := fmt.Sprintf("dec.layers.%d.", l)
			z = gb.selfAttnSub(p, pre, z, nil, S, h, heads, eps)
			c := gb.rmsnorm(z, p(pre+"cross_norm.weight"), S, h, eps)
			z = gb.add(z, gb.attnSub(p, pre+"cross_attn", c, e, nil, S, n, h, heads))
			z = gb.mlpSub(p, pre, z, S, h, eps)
		}
		z = gb.rmsnorm(z, p("dec.norm.weight"), S, h, eps) // Z: (S, h)
		hHat := gb.linear(z, p("row_head.weight"))         // (S, d)
		q, k := gb.linear(e, p("mix_head.q.weight")), gb.linear(z, p("mix_head.k.weight"))
		aHat := gb.scale(gb.mul(q, gb.tr(k)), n, S, 1/math.Sqrt(float64(h))) // (n, S)
		on.hHat, on.aHat = append(on.hHat, gb.read(hHat)), append(on.aHat, gb.read(aHat))

		// Cycle: ||A_hat H_hat - U||^2 / ||U||^2.
		var uu float64
		for _, v := range ub {
			uu += v * v
		}
		resid := gb.sub(gb.mul(aHat, hHat), u)
		acc(&cyc, gb.scale(gb.sumAll(gb.unary(gorgonia.Square, resid), n, d), 1, 1, 1/uu))
		// Mixing regulariser: ||A_hat||^2 / (n S).
		acc(&mix, gb.scale(gb.sumAll(gb.unary(gorgonia.Square, aHat), n, S), 1, 1, 1/float64(n*S)))

		// The clean rows and their statistics are data.
		nc, m := bt.Clean[b], bt.M[b]
		hb := bt.H[b*bt.NH*d : (b*bt.NH+nc)*d]
		sqH := make([]float64, nc)
		var meanH float64
		for r := 0; r < nc; r++ {
			for _, v := range hb[r*d : (r+1)*d] {
				sqH[r] += v * v
			}
			meanH += math.Sqrt(sqH[r]) / float64(nc)
		}
		sqHat := gb.mul(gb.unary(gorgonia.Square, hHat), gb.filled(d, 1, 1)) // (S, 1)
		// Row-norm regulariser: (mean ||h_hat|| - mean ||h||)^2 / m^2.
		meanHat := gb.mul(gb.filled(1, S, 1/float64(S)), gb.unary(gorgonia.Sqrt, sqHat)) // (1, 1)
		dn := gb.sub(meanHat, gb.filled(1, 1, meanH))
		acc(&nrm, gb.scale(gb.unary(gorgonia.Square, dn), 1, 1, 1/(m*m)))

		// OT: C_jk = ||h_hat_j - h_k||^2 / m^2, Sinkhorn, <P, C>.
		raw := gb.add(gb.mul(sqHat, gb.filled(1, nc, 1)), gb.mul(gb.filled(S, 1, 1), gb.constant(1, nc, sqH)))
		raw = gb.sub(raw, gb.scale(gb.mul(hHat, gb.tr(gb.constant(nc, d, hb))), S, nc, 2))
		cost := gb.scale(raw, S, nc, 1/(m*m)) // (S, nc)
		if loss.Variant == ot.Dustbin {
			S1, N1 := S+1, nc+1
			cEmb := gb.mul(gb.mul(gb.selector(S1, S, 0, 0, S), cost), gb.selector(nc, N1, 0, 0, nc)) // (S1, N1)
			binMask := make([]float64, S1*N1)
			for j := 0; j < S1; j++ {
				binMask[j*N1+nc] = 1
			}
			for kk := 0; kk < N1; kk++ {
				binMask[S*N1+kk] = 1
			}
			score := gb.mul(gb.mul(gb.filled(S1, 1, 1), p(ot.DustbinParamName)), gb.filled(1, N1, 1))
			logK := gb.scale(gb.add(cEmb, gb.had(gb.constant(S1, N1, binMask), score)), S1, N1, -1/loss.Eps)
			la, lb := make([]float64, S1), make([]float64, N1)
			for j := range la {
				la[j] = -math.Log(float64(nc))
			}
			la[S] = 0
			for kk := range lb {
				lb[kk] = -math.Log(float64(nc))
			}
			lb[nc] = math.Log(float64(S) / float64(nc))
			plan := gb.sinkhorn(logK, gb.constant(S1, 1, la), gb.constant(1, N1, lb), S1, N1, loss.Iters, 1)
			acc(&otl, gb.sumAll(gb.had(plan, cEmb), S1, N1))
		} else {
			logK := gb.scale(cost, S, nc, -1/loss.Eps)
			la := gb.filled(S, 1, -math.Log(float64(S)))
			lb := gb.filled(1, nc, -math.Log(float64(nc)))
			plan := gb.sinkhorn(logK, la, lb, S, nc, loss.Iters, tau)
			acc(&otl, gb.sumAll(gb.had(plan, cost), S, nc))
		}
	}
	// Terms of weight 0 are left out of the parts, as ot.Parts.Values leaves them out.
	invB := 1 / float64(bt.B)
	var total *gorgonia.Node
	for _, term := range []struct {
		key    string
		sum    *gorgonia.Node
		weight float64
	}{{"unmix_cyc", cyc, loss.WCyc}, {"unmix_ot", otl, loss.WOT}, {"unmix_a_reg", mix, loss.LambdaA}, {"unmix_norm", nrm, loss.WNorm}} {
		if term.weight == 0 {
			continue
		}
		mean := gb.scale(term.sum, 1, 1, invB)
		on.parts[term.key] = mean
		acc(&total, gb.scale(mean, 1, 1, term.weight))
	}
	on.parts["unmix"] = total
	on.loss = gb.unary(func(a *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Sum(a) }, total)
	return on, gb.err
}

// runUnmixOracle evaluates the unmix oracle; with grad it also returns d loss / d every
// parameter.
func runUnmixOracle(cfg Config, loss ot.Config, w map[string][]float64, bt unmixOracleBatch, grad bool) (unmixOracleResult, error) {
	gb := &graphBuilder{g: gorgonia.NewGraph()}
	on, err := buildUnmixOracle(gb, cfg, loss, w, bt)
	if err != nil {
		return unmixOracleResult{}, err
	}
	// Without the cycle and mixing terms the mixing head is off the loss's path: gorgonia
	// refuses such parameters, and their gradient is zero.
	unused := func(name string) bool {
		return loss.WCyc == 0 && loss.LambdaA == 0 && strings.HasPrefix(name, "mix_head.")
	}
	var gradNodes gorgonia.Nodes
	var wrtNames []string
	if grad {
		var wrt gorgonia.Nodes
		for _, name := range on.order {
			if !unused(name) {
				wrt = append(wrt, on.params[name])
				wrtNames = append(wrtNames, name)
			}
		}
		if gradNodes, err = gorgonia.Grad(on.loss, wrt...); err != nil {
			return unmixOracleResult{}, fmt.Errorf("unmix oracle grad: %w", err)
		}
	}
	vm := gorgonia.NewTapeMachine(gb.g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return unmixOracleResult{}, fmt.Errorf("unmix oracle run: %w", err)
	}
	res := unmixOracleResult{Loss: on.loss.Value().Data().(float64), Parts: map[string]float64{}}
	for k, n := range on.parts {
		res.Parts[k] = n.Value().Data().([]float64)[0]
	}
	for b := range on.hHat {
		res.HHat = append(res.HHat, append([]float64(nil), (*on.hHat[b]).Data().([]float64)...))
		res.AHat = append(res.AHat, append([]float64(nil), (*on.aHat[b]).Data().([]float64)...))
	}
	if grad {
		res.Grads = map[string][]float64{}
		for _, name := range on.order {
			res.Grads[name] = make([]float64, len(w[name]))
		}
		for i, name := range wrtNames {
			copy(res.Grads[name], gradNodes[i].Value().Data().([]float64))
		}
	}
	return res, nil
}
