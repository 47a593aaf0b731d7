package ot

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// logZero stands for log(0), the log-mass of padded rows and columns. It is finite so that no
// -Inf meets a +Inf (or a 0 in a backward product) anywhere on the tape, and so negative that
// exp(logZero + anything the iterations produce) flushes to exactly 0 in float32.
const logZero = -1e9

// Sets is one batch of predicted and clean row sets, padded to common sizes. The real rows of
// example b are the first PredRows[b] of HHat[b] and the first CleanRows[b] of H[b]; padded
// rows may hold any finite values: they get no mass and no gradient.
type Sets struct {
	// HHat is the predicted rows, (B, S, d).
	HHat *engine.Tensor
	// H is the clean rows, (B, N, d); data, it receives no gradient.
	H *engine.Tensor
	// PredRows[b] is the number of real predicted rows of example b, in [1, S]; nil means S.
	PredRows []int
	// CleanRows[b] is the number of real clean rows of example b, in [1, N]; nil means N.
	CleanRows []int
	// MeanNorm[b] is m, the mean row norm of example b's real clean rows, > 0 (SPEC §3); the
	// costs are divided by m^2 so that eps means the same for every example.
	MeanNorm []float32
}

// shape is a Sets batch's sizes with nil counts filled in.
type shape struct {
	B, S, N, d  int
	pred, clean []int
	invM2       []float32 // 1/m_b^2
}

func (s Sets) shape() (shape, error) {
	if s.HHat == nil || s.H == nil {
		return shape{}, fmt.Errorf("predicted rows %v or clean rows %v missing", s.HHat, s.H)
	}
	if s.HHat.Rank() != 3 || s.H.Rank() != 3 || s.HHat.Dim(0) != s.H.Dim(0) || s.HHat.Dim(2) != s.H.Dim(2) {
		return shape{}, fmt.Errorf("predicted rows %v and clean rows %v: want (B, S, d) and (B, N, d)", s.HHat, s.H)
	}
	sh := shape{B: s.HHat.Dim(0), S: s.HHat.Dim(1), N: s.H.Dim(1), d: s.HHat.Dim(2)}
	var err error
	if sh.pred, err = counts("predicted rows", s.PredRows, sh.B, sh.S); err != nil {
		return shape{}, err
	}
	if sh.clean, err = counts("clean rows", s.CleanRows, sh.B, sh.N); err != nil {
		return shape{}, err
	}
	if len(s.MeanNorm) != sh.B {
		return shape{}, fmt.Errorf("%d mean row norms for batch %d", len(s.MeanNorm), sh.B)
	}
	sh.invM2 = make([]float32, sh.B)
	for b, m := range s.MeanNorm {
		if !(m > 0) || math.IsInf(float64(m), 0) {
			return shape{}, fmt.Errorf("example %d: mean row norm %v, want a finite value > 0", b, m)
		}
		sh.invM2[b] = float32(1 / (float64(m) * float64(m)))
	}
	return sh, nil
}

// counts checks per-example real-row counts against the padded size; nil means all rows.
func counts(what string, c []int, B, max int) ([]int, error) {
	if c == nil {
		c = make([]int, B)
		for b := range c {
			c[b] = max
		}
		return c, nil
	}
	if len(c) != B {
		return nil, fmt.Errorf("%d counts of %s for batch %d", len(c), what, B)
	}
	for b, n := range c {
		if n < 1 || n > max {
			return nil, fmt.Errorf("example %d: %d %s, want [1, %d]", b, n, what, max)
		}
	}
	return c, nil
}

// Result is the OT loss with what was computed on the way, for diagnostics.
type Result struct {
	// Loss is L_OT = <P, C> over predicted x clean entries, averaged over the batch: scalar ().
	Loss *engine.Tensor
	// Plan is P: (B, S, N), or (B, S+1, N+1) for the dustbin variant (row S and column N are
	// the dustbins). Padded entries are exactly 0. Mass units: see OT.
	Plan *engine.Tensor
	// Cost is C_jk = ||h_hat_j - h_k||^2 / m^2, 0 at padded entries: (B, S, N).
	Cost *engine.Tensor
}

// OT records the Sinkhorn OT loss of SPEC §5 on tp, with gradients through the cfg.Iters
// unrolled log-domain iterations (u = f/eps, v = g/eps, tau = 1 or rho/(rho+eps)):
//
//	u_j = -tau LSE_k(-C_jk/eps + v_k + log b_k),  v_k = -tau LSE_j(-C_jk/eps + u_j + log a_j),
//	P_jk = exp(-C_jk/eps + u_j + v_k + log a_j + log b_k),  starting from v = 0.
//
// Marginals. balanced and unbalanced: a_j = 1/S_b, b_k = 1/n_b (total mass 1; after the last
// v update the balanced plan meets b exactly and a to the convergence error). dustbin
// (SuperGlue): every real row and column carries 1/n_b, the dustbin row 1 (it can absorb every
// clean row) and the dustbin column S_b/n_b (every predicted row); the dustbin entries cost
// the learned score dustbin (shape (1)), so a pair is left unmatched when its cost exceeds the
// score, and at least (S_b - n_b)/n_b of the predicted mass ends in the dustbin column. L_OT
// counts the real entries only: matched clean rows weigh 1/n_b, as in the balanced variant,
// and the loss stays >= 0. Note that L_OT alone always favours a lower score (unmatched rows
// cost nothing), so a learned score needs a floor or a small learning rate.
// dustbin is ignored by the other variants.
func OT(tp *engine.Tape, cfg Config, s Sets, dustbin *engine.Tensor) (Result, error) {
	if err := validateSinkhorn(cfg); err != nil {
		return Result{}, fmt.Errorf("ot: config: %w", err)
	}
	sh, err := s.shape()
	if err != nil {
		return Result{}, fmt.Errorf("ot: OT: %w", err)
	}
	if cfg.Variant == Dustbin && (dustbin == nil || dustbin.Size() != 1) {
		return Result{}, fmt.Errorf("ot: OT: dustbin variant needs a one-element dustbin score, got %v", dustbin)
	}
	B, S, N := sh.B, sh.S, sh.N
	cost := pairCost(tp, s.HHat, s.H, sh) // (B, S, N)
	eps := float32(cfg.Eps)
	var plan, loss *engine.Tensor
	switch cfg.Variant {
	case Dustbin:
		// Embedding by products with [I; 0] is O(S N (S+N)) per example where a pad op would
		// be O(S N); see models/settransformer/ENGINE_REQUESTS.md.
		cEmb := tp.Linear(cost, tp.Input(embedding(N+1, N), N+1, N))                            // (B, S, N+1)
		cEmb = tp.Transpose(tp.Linear(tp.Transpose(cEmb), tp.Input(embedding(S+1, S), S+1, S))) // (B, S+1, N+1)
		bins := tp.Mul(tp.Input(dustbinMask(sh), B, S+1, N+1), dustbin)                         // (B, S+1, N+1)
		logK := tp.Scale(tp.Add(cEmb, bins), -1/eps)
		la, lb := dustbinLogMarginals(sh)
		plan = sinkhorn(tp, logK, tp.Input(la, B, S+1), tp.Input(lb, B, N+1), cfg.Iters, 1)
		loss = tp.Scale(tp.Sum(tp.Mul(plan, cEmb)), 1/float32(B))
	default:
		la, lb := uniformLogMarginals(sh)
		plan = sinkhorn(tp, tp.Scale(cost, -1/eps), tp.Input(la, B, S), tp.Input(lb, B, N), cfg.Iters, tau(cfg))
		loss = tp.Scale(tp.Sum(tp.Mul(plan, cost)), 1/float32(B))
	}
	if err := tp.Err(); err != nil {
		return Result{}, fmt.Errorf("ot: OT (%s): %w", cfg.Variant, err)
	}
	return Result{Loss: loss, Plan: plan, Cost: cost}, nil
}

// sinkhorn runs the unrolled log-domain iterations on the log-kernel logK = -C/eps:
// logK (B, R, C), la (B, R), lb (B, C) log-marginals -> plan (B, R, C). tau scales every
// potential update (1 balanced, rho/(rho+eps) unbalanced). It keeps u + log a and v + log b,
// which are what the next update and the plan add to logK.
func sinkhorn(tp *engine.Tape, logK, la, lb *engine.Tensor, iters int, tau float32) *engine.Tensor {
	logKt := tp.Transpose(logK) // (B, C, R)
	vb := lb                    // v + log b with v = 0: (B, C)
	var ua *engine.Tensor       // u + log a: (B, R)
	for range iters {
		ua = tp.Add(tp.Scale(tp.LogSumExp(tp.BroadcastAdd(logK, nil, vb)), -tau), la)
		vb = tp.Add(tp.Scale(tp.LogSumExp(tp.BroadcastAdd(logKt, nil, ua)), -tau), lb)
	}
	return tp.Exp(tp.BroadcastAdd(logK, ua, vb))
}

// pairCost is C_jk = (||h_hat_j||^2 + ||h_k||^2 - 2 h_hat_j . h_k) / m_b^2 at real entries and
// 0 at padded ones: hHat (B, S, d), h (B, N, d) -> (B, S, N). The expanded form keeps the
// work in one batched GEMM; its cancellation error (float32, relative to m^2) is far below
// any eps in use. Squared norms come from a product with ones rather than RowNorm, whose
// backward is undefined at zero rows.
func pairCost(tp *engine.Tape, hHat, h *engine.Tensor, sh shape) *engine.Tensor {
	B, S, N, d := sh.B, sh.S, sh.N, sh.d
	ones := tp.Input(filled(d, 1), 1, d)
	sqHat := tp.Reshape(tp.Linear(tp.Square(hHat), ones), B, S) // (B, S)
	sqH := tp.Reshape(tp.Linear(tp.Square(h), ones), B, N)      // (B, N)
	dot := tp.MatMul(hHat, h, false, true)                      // (B, S, N)
	raw := tp.BroadcastAdd(tp.Scale(dot, -2), sqHat, sqH)
	w := make([]float32, B*S*N) // (B, S, N): 1/m_b^2 at real entries, 0 at padded ones
	for b := range B {
		for j := range sh.pred[b] {
			row := w[(b*S+j)*N:]
			for k := range sh.clean[b] {
				row[k] = sh.invM2[b]
			}
		}
	}
	return tp.Mul(raw, tp.Input(w, B, S, N))
}

// uniformLogMarginals is log a (B, S) = log(1/S_b) and log b (B, N) = log(1/n_b) at real
// rows, logZero at padded ones.
func uniformLogMarginals(sh shape) (la, lb []float32) {
	la = filled(sh.B*sh.S, logZero)
	lb = filled(sh.B*sh.N, logZero)
	for b := range sh.B {
		fill(la[b*sh.S:b*sh.S+sh.pred[b]], float32(-math.Log(float64(sh.pred[b]))))
		fill(lb[b*sh.N:b*sh.N+sh.clean[b]], float32(-math.Log(float64(sh.clean[b]))))
	}
	return la, lb
}

// dustbinLogMarginals is log a (B, S+1) and log b (B, N+1) of the dustbin variant: 1/n_b per
// real row and column, 1 for the dustbin row (index S), S_b/n_b for the dustbin column
// (index N), logZero at padded entries.
func dustbinLogMarginals(sh shape) (la, lb []float32) {
	S1, N1 := sh.S+1, sh.N+1
	la = filled(sh.B*S1, logZero)
	lb = filled(sh.B*N1, logZero)
	for b := range sh.B {
		unit := float32(-math.Log(float64(sh.clean[b])))
		fill(la[b*S1:b*S1+sh.pred[b]], unit)
		la[b*S1+sh.S] = 0
		fill(lb[b*N1:b*N1+sh.clean[b]], unit)
		lb[b*N1+sh.N] = float32(math.Log(float64(sh.pred[b]) / float64(sh.clean[b])))
	}
	return la, lb
}

// dustbinMask is 1 at the real entries of the dustbin row and column (the corner included),
// 0 elsewhere: (B, S+1, N+1).
func dustbinMask(sh shape) []float32 {
	S1, N1 := sh.S+1, sh.N+1
	m := make([]float32, sh.B*S1*N1)
	for b := range sh.B {
		p := m[b*S1*N1:]
		for j := range sh.pred[b] {
			p[j*N1+sh.N] = 1
		}
		fill(p[sh.S*N1:sh.S*N1+sh.clean[b]], 1)
		p[sh.S*N1+sh.N] = 1
	}
	return m
}

// embedding is the (rows, cols) matrix [I; 0], rows >= cols: Linear with it appends
// rows - cols zero features.
func embedding(rows, cols int) []float32 {
	e := make([]float32, rows*cols)
	for i := range cols {
		e[i*cols+i] = 1
	}
	return e
}

func filled(n int, v float32) []float32 {
	s := make([]float32, n)
	fill(s, v)
	return s
}

func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}
