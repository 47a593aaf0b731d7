package ot

import (
	"fmt"

	"github.com/gelo-research/geloattack/engine"
)

// Mixing is a batch's observed mixtures and the predicted mixing matrices. The real observed
// rows of example b are the first ObsRows[b] rows of UObs[b] and AHat[b].
type Mixing struct {
	// AHat is the predicted mixing matrix, (B, O, S).
	AHat *engine.Tensor
	// UObs is the observed rows of U = A [H; S], (B, O, d); data, it receives no gradient.
	UObs *engine.Tensor
	// ObsRows[b] is the number of real observed rows of example b, in [1, O]; nil means O.
	ObsRows []int
}

// mixShape checks aHat (B, O, S) against the batch size B and slot count S and fills in nil
// observed-row counts.
func mixShape(aHat *engine.Tensor, obsRows []int, B, S int) (O int, obs []int, err error) {
	if aHat == nil || aHat.Rank() != 3 || aHat.Dim(0) != B || aHat.Dim(2) != S {
		return 0, nil, fmt.Errorf("mixing matrix %v: want (%d, O, %d)", aHat, B, S)
	}
	O = aHat.Dim(1)
	obs, err = counts("observed rows", obsRows, B, O)
	return O, obs, err
}

// Cycle records L_cyc = ||A_hat H_hat - U_obs||_F^2 / ||U_obs||_F^2 per example over its real
// observed rows and real predicted rows, averaged over the batch (SPEC §5):
// hHat (B, S, d), mx.AHat (B, O, S), mx.UObs (B, O, d) -> scalar (). predRows as in
// Sets.PredRows (nil: all S). Padded slots and observed rows get no gradient. An example
// whose observed rows are all zero divides by zero (+Inf or NaN): the sampler never makes one.
func Cycle(tp *engine.Tape, hHat *engine.Tensor, predRows []int, mx Mixing) (*engine.Tensor, error) {
	if hHat == nil || hHat.Rank() != 3 {
		return nil, fmt.Errorf("ot: Cycle: predicted rows %v: want (B, S, d)", hHat)
	}
	B, S, d := hHat.Dim(0), hHat.Dim(1), hHat.Dim(2)
	pred, err := counts("predicted rows", predRows, B, S)
	if err != nil {
		return nil, fmt.Errorf("ot: Cycle: %w", err)
	}
	O, obs, err := mixShape(mx.AHat, mx.ObsRows, B, S)
	if err != nil {
		return nil, fmt.Errorf("ot: Cycle: %w", err)
	}
	if mx.UObs == nil || mx.UObs.Rank() != 3 || mx.UObs.Dim(0) != B || mx.UObs.Dim(1) != O || mx.UObs.Dim(2) != d {
		return nil, fmt.Errorf("ot: Cycle: observed rows %v: want (%d, %d, %d)", mx.UObs, B, O, d)
	}
	hh := maskRows(tp, hHat, pred, B, S)                           // (B, S, d)
	resid := tp.Sub(tp.MatMul(mx.AHat, hh, false, false), mx.UObs) // (B, O, d)
	resid = maskRows(tp, resid, obs, B, O)
	num := setSums(tp, tp.Square(resid), B)                            // (B)
	den := setSums(tp, tp.Square(maskRows(tp, mx.UObs, obs, B, O)), B) // (B)
	loss := tp.Scale(tp.Sum(tp.Div(num, den)), 1/float32(B))
	if err := tp.Err(); err != nil {
		return nil, fmt.Errorf("ot: Cycle: %w", err)
	}
	return loss, nil
}

// MixPenalty records ||A_hat||_F^2 / (n_obs S) per example over its real observed rows and
// real slots, averaged over the batch (the unweighted lambda_A term of SPEC §5):
// aHat (B, O, S) -> scalar (). obsRows and predRows as in Mixing and Sets (nil: all).
func MixPenalty(tp *engine.Tape, aHat *engine.Tensor, obsRows, predRows []int) (*engine.Tensor, error) {
	if aHat == nil || aHat.Rank() != 3 {
		return nil, fmt.Errorf("ot: MixPenalty: mixing matrix %v: want (B, O, S)", aHat)
	}
	B, O, S := aHat.Dim(0), aHat.Dim(1), aHat.Dim(2)
	obs, err := counts("observed rows", obsRows, B, O)
	if err != nil {
		return nil, fmt.Errorf("ot: MixPenalty: %w", err)
	}
	pred, err := counts("predicted rows", predRows, B, S)
	if err != nil {
		return nil, fmt.Errorf("ot: MixPenalty: %w", err)
	}
	mask := make([]float32, B*O*S) // (B, O, S): 1 at real (observed row, slot) entries
	w := make([]float32, B)        // (B): 1 / (B n_obs S)
	for b := range B {
		for i := range obs[b] {
			fill(mask[(b*O+i)*S:(b*O+i)*S+pred[b]], 1)
		}
		w[b] = 1 / float32(B*obs[b]*pred[b])
	}
	sq := tp.Square(tp.Mul(aHat, tp.Input(mask, B, O, S)))
	loss := tp.Sum(tp.Mul(setSums(tp, sq, B), tp.Input(w, B)))
	if err := tp.Err(); err != nil {
		return nil, fmt.Errorf("ot: MixPenalty: %w", err)
	}
	return loss, nil
}

// RowNormPenalty records (mean_j ||h_hat_j|| - mean_k ||h_k||)^2 / m^2 per example over its
// real rows, averaged over the batch (SPEC §5) -> scalar (). It keeps the predictions at the
// clean rows' scale, which the cycle loss alone leaves free (A_hat can absorb any scale).
func RowNormPenalty(tp *engine.Tape, s Sets) (*engine.Tensor, error) {
	sh, err := s.shape()
	if err != nil {
		return nil, fmt.Errorf("ot: RowNormPenalty: %w", err)
	}
	B, S, N := sh.B, sh.S, sh.N
	// RowNorm's backward is 0 at a zero row; MeanPool gives padded rows no weight.
	meanHat := tp.MeanPool(tp.Reshape(tp.RowNorm(s.HHat), B, S, 1), tp.KeyMask(B, S, sh.pred)) // (B, 1)
	meanH := tp.MeanPool(tp.Reshape(tp.RowNorm(s.H), B, N, 1), tp.KeyMask(B, N, sh.clean))     // (B, 1)
	w := make([]float32, B)                                                                    // (B): 1 / (B m_b^2)
	for b := range w {
		w[b] = sh.invM2[b] / float32(B)
	}
	loss := tp.Sum(tp.Mul(tp.Reshape(tp.Square(tp.Sub(meanHat, meanH)), B), tp.Input(w, B)))
	if err := tp.Err(); err != nil {
		return nil, fmt.Errorf("ot: RowNormPenalty: %w", err)
	}
	return loss, nil
}

// maskRows zeroes the rows past n[b] of every set of x (B, R, ...), and returns x itself when
// no set is padded.
func maskRows(tp *engine.Tape, x *engine.Tensor, n []int, B, R int) *engine.Tensor {
	for _, v := range n {
		if v < R {
			return tp.MaskRows(x, tp.KeyMask(B, R, n))
		}
	}
	return x
}

// setSums sums every example's entries: x (B, ...) -> (B).
func setSums(tp *engine.Tape, x *engine.Tensor, B int) *engine.Tensor {
	per := x.Size() / B
	return tp.Reshape(tp.Linear(tp.Reshape(x, B, per), tp.Input(filled(per, 1), 1, per)), B)
}
