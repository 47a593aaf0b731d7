package settransformer

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/losses/ot"
)

// UnmixTargets are the unmixing targets of one batch (SPEC §5).
type UnmixTargets struct {
	// H holds each example's clean rows, zero-padded to the largest count: (B, Nmax, d), row-major.
	H []float32
	// CleanRows[b] is the number of real clean rows of example b (its first rows in H), >= 1.
	CleanRows []int
	// MeanNorm[b] is m, the mean row norm of example b's clean rows (SPEC §3), > 0.
	MeanNorm []float32
}

// UnmixOutputs are the results of an inference forward pass; the tensors stay valid until the
// model's next forward pass.
type UnmixOutputs struct {
	// HHat is the predicted clean rows, (B, S, d): slot j's final state through the row head.
	HHat *engine.Tensor
	// AHat is the predicted mixing matrix, (B, N, S): row i for row i of U, zero at padded rows.
	AHat *engine.Tensor
	// Rows is the encoder's final row states E, (B, N, h) (padded rows hold values that mean
	// nothing).
	Rows *engine.Tensor
	// Slots is the decoder's final slot states Z, (B, S, h).
	Slots *engine.Tensor
}

// UnmixModel is the unmixing attack of SPEC §4: the set encoder over the rows of U (no CLS), the
// slot decoder, the row head H_hat = Linear(h, d)(Z) and the mixing head
// A_hat = (E Wq)(Z Wk)^T / sqrt(h), trained with the unmix loss of SPEC §5 (package losses/ot).
// All parameters live in one engine.Params buffer with the SPEC §4 names; an UnmixModel is not
// safe for concurrent use.
type UnmixModel struct {
	cfg     Config
	params  *engine.Params
	enc     *Encoder
	dec     *Decoder
	rowHead *engine.Tensor // row_head.weight (d, h)
	mixQ    *engine.Tensor // mix_head.q.weight (h, h)
	mixK    *engine.Tensor // mix_head.k.weight (h, h)
	dustbin *engine.Tensor // ot.dustbin_score (1); nil unless built for a dustbin loss
	// loss is the unmix loss the model was built with (WithLoss), checked once there; nil for a
	// model built only to predict.
	loss *ot.Loss
	tape *engine.Tape
	// parts are the loss terms of the latest ForwardBackward, still on the tape (read back only
	// when LossParts asks); hasParts turns false when the tape is reset for another pass.
	parts    ot.Parts
	hasParts bool
	// clean and packed are reused host scratch for U with padded rows zeroed (Forward) or moved
	// behind the real ones (ForwardBackward); counts is the real rows per set.
	clean, packed []float32
	counts        []int
}

// UnmixOption adjusts NewUnmix.
type UnmixOption func(*unmixOptions)

type unmixOptions struct {
	loss *ot.Config
}

// WithLoss builds the model for training with the unmix loss cfg, which the model then owns: it
// is checked once, here, and every ForwardBackward uses it. The dustbin variant needs the learned
// dustbin score, which is then registered as the parameter ot.DustbinParamName (no weight decay)
// and initialised to cfg.DustbinInit. The other variants add no parameter.
func WithLoss(cfg ot.Config) UnmixOption {
	return func(o *unmixOptions) { o.loss = &cfg }
}

// NewUnmix builds an unmixing model (cfg.Task must be unmix) on be with parameters initialised
// from seed (see ParamSpec.Init). The caller owns be and closes it after the model's last use.
func NewUnmix(be engine.Backend, cfg Config, seed uint64, opts ...UnmixOption) (*UnmixModel, error) {
	if cfg.Task != TaskUnmix {
		return nil, fmt.Errorf("settransformer: NewUnmix builds task %q, got task %q (use New)", TaskUnmix, cfg.Task)
	}
	var o unmixOptions
	for _, opt := range opts {
		opt(&o)
	}
	var loss *ot.Loss
	if o.loss != nil {
		l, err := ot.NewLoss(*o.loss)
		if err != nil {
			return nil, fmt.Errorf("settransformer: unmix loss: %w", err)
		}
		loss = &l
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pb := newParamBuilder()
	enc, hd := pb.declare(cfg)
	// The dustbin score is the loss's parameter (package ot names and initialises it); it is
	// registered after the model's, so it is the last entry of the table and of checkpoints.
	var dustbin *engine.Tensor
	if o.loss != nil && o.loss.Variant == ot.Dustbin {
		dustbin = ot.AddDustbinParam(pb.ps)
	}
	if err := pb.alloc(be, seed); err != nil {
		return nil, err
	}
	if dustbin != nil {
		if err := ot.InitDustbinParam(dustbin, *o.loss); err != nil {
			return nil, fmt.Errorf("settransformer: %w", err)
		}
	}
	return &UnmixModel{
		cfg: cfg, params: pb.ps, enc: enc, dec: hd.dec,
		rowHead: hd.rowHead, mixQ: hd.mixQ, mixK: hd.mixK,
		dustbin: dustbin, loss: loss, tape: engine.NewTape(be),
	}, nil
}

// Config returns the model's configuration.
func (m *UnmixModel) Config() Config { return m.cfg }

// Params is the parameter buffer: named views for checkpoints (Views, Lookup), the gradient
// buffer that ForwardBackward fills, and what engine.NewAdamW optimises.
func (m *UnmixModel) Params() *engine.Params { return m.params }

// Encoder is the model's set encoder (without CLS).
func (m *UnmixModel) Encoder() *Encoder { return m.enc }

// Decoder is the model's slot decoder.
func (m *UnmixModel) Decoder() *Decoder { return m.dec }

// Tape is the model's tape (arena statistics, tests).
func (m *UnmixModel) Tape() *engine.Tape { return m.tape }

// Param copies the named parameter to the host.
func (m *UnmixModel) Param(name string) ([]float32, error) { return getParam(m.params, name) }

// SetParam overwrites the named parameter with v (len = the parameter's size).
func (m *UnmixModel) SetParam(name string, v []float32) error { return setParam(m.params, name, v) }

// record is the model on tp: u (B, N, d), mask (B, N) or nil -> hHat (B, S, d), aHat (B, N, S),
// e (B, N, h), z (B, S, h).
func (m *UnmixModel) record(tp *engine.Tape, u, mask *engine.Tensor) (hHat, aHat, e, z *engine.Tensor) {
	e = m.enc.ForwardRows(tp, u, mask) // (B, N, h)
	z = m.dec.Forward(tp, e, mask)     // (B, S, h)
	hHat = tp.Linear(z, m.rowHead)     // (B, S, d)
	q := tp.Linear(e, m.mixQ)          // (B, N, h)
	k := tp.Linear(z, m.mixK)          // (B, S, h)
	scale := float32(1 / math.Sqrt(float64(m.cfg.Hidden)))
	aHat = tp.Scale(tp.MatMul(q, k, false, true), scale) // (B, N, S)
	return hHat, aHat, e, z
}

// Forward runs inference on b: H_hat, A_hat (in the row order of b, padded rows zero) and the
// encoder and decoder states.
func (m *UnmixModel) Forward(b Batch) (UnmixOutputs, error) {
	d := m.cfg.InputDim
	if err := checkBatch(b, d); err != nil {
		return UnmixOutputs{}, err
	}
	tp := m.tape
	tp.Reset()
	m.hasParts = false
	u := inputU(tp, &m.clean, b, d) // (B, N, d)
	var mask *engine.Tensor
	if b.Mask != nil {
		mask = tp.Input(b.Mask, b.B, b.N) // (B, N)
	}
	hHat, aHat, e, z := m.record(tp, u, mask)
	if mask != nil {
		aHat = tp.MaskRows(aHat, mask) // (B, N, S)
	}
	if err := tp.Err(); err != nil {
		return UnmixOutputs{}, fmt.Errorf("settransformer: unmix forward: %w", err)
	}
	return UnmixOutputs{HHat: hHat, AHat: aHat, Rows: e, Slots: z}, nil
}

// ForwardBackward computes the unmix loss of SPEC §5 (the model's WithLoss, every slot a real
// prediction) of b against t and accumulates (+=) the gradient of every parameter into
// Params().Grad(); the caller zeroes gradients once per optimiser step (Params().ZeroGrad). It
// returns the total loss, the one value it reads back to the host (on a GPU each read-back is a
// sync); LossParts reads the terms when asked. A model built without WithLoss has no loss to
// train with and returns an error.
//
// The loss reads each example's real observed rows as a prefix of its set, so the rows of U are
// first packed real-rows-first (host copy, padding zeroed); the loss does not depend on the order
// of U's rows, so any mask layout gives the loss of the unpadded examples.
func (m *UnmixModel) ForwardBackward(b Batch, t UnmixTargets) (float32, error) {
	m.hasParts = false
	d := m.cfg.InputDim
	if err := checkBatch(b, d); err != nil {
		return 0, err
	}
	if len(t.H) == 0 || len(t.H)%(b.B*d) != 0 {
		return 0, fmt.Errorf("settransformer: targets H has %d values: want a positive multiple of B*d = %d*%d", len(t.H), b.B, d)
	}
	if m.loss == nil {
		return 0, fmt.Errorf("settransformer: ForwardBackward of an unmix model built without WithLoss: it has no loss to train with")
	}
	nh := len(t.H) / (b.B * d)
	packed, err := m.packRows(b)
	if err != nil {
		return 0, err
	}
	tp := m.tape
	tp.Reset()
	uT := inputU(tp, &m.clean, packed, d) // (B, N, d), real rows first
	var mask *engine.Tensor
	for _, c := range m.counts {
		if c < b.N {
			mask = tp.KeyMask(b.B, b.N, m.counts) // (B, N)
			break
		}
	}
	hHat, aHat, _, _ := m.record(tp, uT, mask)
	parts, err := m.loss.Record(tp, ot.Batch{
		Sets: ot.Sets{
			HHat: hHat, H: tp.Input(t.H, b.B, nh, d), // (B, S, d), (B, Nmax, d)
			CleanRows: t.CleanRows, MeanNorm: t.MeanNorm,
		},
		Mixing:  ot.Mixing{AHat: aHat, UObs: uT, ObsRows: m.counts},
		Dustbin: m.dustbin,
	})
	if err != nil {
		return 0, fmt.Errorf("settransformer: unmix loss: %w", err)
	}
	if err := tp.Backward(parts.Total); err != nil {
		return 0, fmt.Errorf("settransformer: backward: %w", err)
	}
	m.parts, m.hasParts = parts, true
	return parts.Total.Item(), nil
}

// LossParts reads back the total loss and its unweighted terms of the latest ForwardBackward
// under the keys of ot.Parts.Values ("unmix", "unmix_cyc", "unmix_ot", "unmix_a_reg",
// "unmix_norm"; terms of weight 0 are absent): one read-back per term, so callers ask only when
// they report them. It returns nil when there is none: before the first ForwardBackward, after
// one that failed, or once Forward has reused the tape.
func (m *UnmixModel) LossParts() map[string]float64 {
	if !m.hasParts {
		return nil
	}
	return m.parts.Values()
}

// packRows returns b with each set's real rows moved to its front in their order and the rest
// zeroed (zeroed, not masked: see cleanRows), and no mask, and sets m.counts to the real rows
// per set. The rows moved are U's, or for a device-mixed batch A's (U = A X then comes out
// packed, and the host moves B*N*NX values instead of B*N*d). With no mask b is used as it is.
func (m *UnmixModel) packRows(b Batch) (Batch, error) {
	d := m.cfg.InputDim
	if cap(m.counts) < b.B {
		m.counts = make([]int, b.B)
	}
	m.counts = m.counts[:b.B]
	if b.Mask == nil {
		for i := range m.counts {
			m.counts[i] = b.N
		}
		return b, nil
	}
	rows, w := b.U, d // rows: (B, N, w)
	if b.deviceMixed() {
		rows, w = b.A, b.NX
	}
	out := grow(&m.packed, len(rows))
	for s := 0; s < b.B; s++ {
		n := 0
		for r := 0; r < b.N; r++ {
			if b.Mask[s*b.N+r] == 1 {
				src := (s*b.N + r) * w
				copy(out[(s*b.N+n)*w:(s*b.N+n+1)*w], rows[src:src+w])
				n++
			}
		}
		if n == 0 {
			return Batch{}, fmt.Errorf("settransformer: set %d of the batch has no real rows", s)
		}
		clear(out[(s*b.N+n)*w : (s+1)*b.N*w])
		m.counts[s] = n
	}
	if b.deviceMixed() {
		b.A = out
	} else {
		b.U = out
	}
	b.Mask = nil
	return b, nil
}
