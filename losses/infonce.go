package losses

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// Temperature is the InfoNCE tau: a fixed value, or a learned log-temperature parameter.
type Temperature struct {
	// Tau is the fixed temperature, used when Log is nil.
	Tau float32
	// Log, when set, is the learned log(tau), shape (1).
	Log *engine.Tensor
}

// Scores records the retrieval scores of SPEC §5 on tp, the one definition that training (InfoNCE)
// and evaluation share: s_bc = cos(q_b, cand_c) / tau, each row divided by max(||x||, 1e-12)
// (engine.L2NormEps). q: (B, e), cand: (C, e) -> (B, C).
func Scores(tp *engine.Tape, q, cand *engine.Tensor, tau Temperature) (*engine.Tensor, error) {
	if q.Rank() != 2 || cand.Rank() != 2 || q.Dim(1) != cand.Dim(1) {
		return nil, fmt.Errorf("losses: scores: queries %v and candidates %v: want (B, e) and (C, e)", q, cand)
	}
	if tau.Log != nil {
		return tp.CosineScoresLearned(q, cand, tau.Log), nil
	}
	if !(tau.Tau > 0) || math.IsInf(float64(tau.Tau), 0) {
		return nil, fmt.Errorf("losses: scores: temperature %g, want a finite value > 0", tau.Tau)
	}
	return tp.CosineScores(q, cand, tau.Tau), nil
}

// InfoNCE records the multi-positive InfoNCE of SPEC §5 on tp:
// s_bc = cos(q_b, cand_c) / tau (Scores), L = mean_b [ logsumexp_c s_bc - logsumexp_{p in pos[b]} s_bp ].
// q: (B, e) query vectors (normalised or not: cosine normalises), cand: (C, e) candidate
// embeddings (data), pos[b]: candidate indices of example b's positives -> scalar ().
func InfoNCE(tp *engine.Tape, q, cand *engine.Tensor, pos [][]int, tau Temperature) (*engine.Tensor, error) {
	if q.Rank() != 2 || cand.Rank() != 2 || q.Dim(1) != cand.Dim(1) {
		return nil, fmt.Errorf("losses: InfoNCE: queries %v and candidates %v: want (B, e) and (C, e)", q, cand)
	}
	B, C := q.Dim(0), cand.Dim(0)
	if len(pos) != B {
		return nil, fmt.Errorf("losses: InfoNCE: %d positive lists for %d queries", len(pos), B)
	}
	if err := ValidatePositives(pos, C); err != nil {
		return nil, err
	}
	scores, err := Scores(tp, q, cand, tau) // (B, C)
	if err != nil {
		return nil, err
	}
	loss := tp.InfoNCE(scores, tp.PositiveMask(B, C, pos))
	if err := tp.Err(); err != nil {
		return nil, fmt.Errorf("losses: InfoNCE: %w", err)
	}
	return loss, nil
}
