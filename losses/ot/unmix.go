package ot

import (
	"fmt"

	"github.com/gelo-research/geloattack/engine"
)

// Batch is everything the unmix loss reads: the predicted and clean row sets, the observed
// mixtures with the predicted mixing matrices, and the dustbin score (dustbin variant only).
type Batch struct {
	Sets
	Mixing
	// Dustbin is the learned dustbin score, shape (1) (see AddDustbinParam); nil unless the
	// variant is dustbin.
	Dustbin *engine.Tensor
}

// Parts is the unmix loss and its terms, unweighted, for logging. A term whose weight is 0 is
// not computed and is nil (with the OT plan when w_ot is 0).
type Parts struct {
	// Total is w_cyc L_cyc + w_ot L_OT + lambda_a MixReg + w_norm NormReg: scalar ().
	Total *engine.Tensor
	// Cycle is L_cyc.
	Cycle *engine.Tensor
	// OT is L_OT.
	OT *engine.Tensor
	// MixReg is ||A_hat||_F^2 / (n_obs S), batch mean.
	MixReg *engine.Tensor
	// NormReg is (mean ||h_hat|| - mean ||h||)^2 / m^2, batch mean.
	NormReg *engine.Tensor
	// Plan is the OT plan (see Result.Plan).
	Plan *engine.Tensor
}

// Loss is an unmix loss whose configuration has been checked once, when it was made: a model
// holds one for its whole training run, so the steps do not validate the configuration again.
// Make it with NewLoss (the zero Loss has every weight 0).
type Loss struct {
	cfg Config
}

// NewLoss checks cfg and returns the loss it configures.
func NewLoss(cfg Config) (Loss, error) {
	if err := cfg.Validate(); err != nil {
		return Loss{}, fmt.Errorf("ot: config: %w", err)
	}
	return Loss{cfg: cfg}, nil
}

// Config is the loss's configuration.
func (l Loss) Config() Config { return l.cfg }

// Record records the unmix loss of SPEC §5 on tp: w_cyc L_cyc + w_ot L_OT + lambda_a
// ||A_hat||_F^2/(n_obs S) + w_norm (mean ||h_hat|| - mean ||h||)^2/m^2. Terms with weight 0
// are skipped, so their inputs may be nil (AHat and UObs when w_cyc and lambda_a are 0).
func (l Loss) Record(tp *engine.Tape, in Batch) (Parts, error) {
	cfg := l.cfg
	var (
		p       Parts
		weights []float32
		terms   []*engine.Tensor
		err     error
	)
	add := func(w float64, t *engine.Tensor) {
		weights = append(weights, float32(w))
		terms = append(terms, t)
	}
	if cfg.WCyc > 0 {
		if p.Cycle, err = Cycle(tp, in.HHat, in.PredRows, in.Mixing); err != nil {
			return Parts{}, err
		}
		add(cfg.WCyc, p.Cycle)
	}
	if cfg.WOT > 0 {
		r, err := OT(tp, cfg, in.Sets, in.Dustbin)
		if err != nil {
			return Parts{}, err
		}
		p.OT, p.Plan = r.Loss, r.Plan
		add(cfg.WOT, p.OT)
	}
	if cfg.LambdaA > 0 {
		if in.HHat == nil || in.HHat.Rank() != 3 {
			return Parts{}, fmt.Errorf("ot: Unmix: predicted rows %v: want (B, S, d)", in.HHat)
		}
		if _, _, err := mixShape(in.AHat, in.ObsRows, in.HHat.Dim(0), in.HHat.Dim(1)); err != nil {
			return Parts{}, fmt.Errorf("ot: Unmix: %w", err)
		}
		if p.MixReg, err = MixPenalty(tp, in.AHat, in.ObsRows, in.PredRows); err != nil {
			return Parts{}, err
		}
		add(cfg.LambdaA, p.MixReg)
	}
	if cfg.WNorm > 0 {
		if p.NormReg, err = RowNormPenalty(tp, in.Sets); err != nil {
			return Parts{}, err
		}
		add(cfg.WNorm, p.NormReg)
	}
	p.Total = tp.WeightedSum(weights, terms...)
	if err := tp.Err(); err != nil {
		return Parts{}, fmt.Errorf("ot: Unmix: %w", err)
	}
	return p, nil
}

// Values reads the computed terms to the host for logging, under the keys unmix, unmix_cyc,
// unmix_ot, unmix_a_reg and unmix_norm; skipped terms are absent.
func (p Parts) Values() map[string]float64 {
	out := make(map[string]float64, 5)
	for _, kv := range []struct {
		k string
		t *engine.Tensor
	}{{"unmix", p.Total}, {"unmix_cyc", p.Cycle}, {"unmix_ot", p.OT}, {"unmix_a_reg", p.MixReg}, {"unmix_norm", p.NormReg}} {
		if kv.t != nil {
			out[kv.k] = float64(kv.t.Item())
		}
	}
	return out
}
