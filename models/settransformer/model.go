package settransformer

import (
	"fmt"
	"math"
	"slices"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/losses"
)

// Batch is a padded batch of obfuscated examples as the model consumes them.
type Batch struct {
	// B is the number of sets and N the rows of the largest one.
	B, N int
	// U holds the observed rows: (B, N, d), row-major. nil when X and A are set.
	U []float32
	// Mask is (B, N): 1 for a real row, 0 for padding (any position); nil when every row is real.
	Mask []float32

	// X and A, set instead of U, make the model's backend form U = A X (engine.Tape.MixRows,
	// fp32, rounded to Round) at the start of each pass: device-side mixing, where the host
	// uploads X and A and no longer multiplies. X: (B, NX, d), each set's rows [H; S], padded
	// rows zero; A: (B, N, NX), each set's observed rows of its mixing matrix, padded rows and
	// columns zero (so U's padded rows come out zero).
	X, A  []float32
	NX    int
	Round engine.MixRound
}

// deviceMixed reports whether b carries X and A for the backend to form U.
func (b Batch) deviceMixed() bool { return b.X != nil || b.A != nil }

// Targets are the retrieval targets of one batch (SPEC §5, in-batch candidates).
type Targets struct {
	// Candidates holds the candidate text embeddings: (C, e), row-major.
	Candidates []float32
	// Positives[b] lists the indices into Candidates of example b's positive texts.
	Positives [][]int
}

// Outputs are the results of an inference forward pass; the tensors stay valid until the model's
// next forward pass.
type Outputs struct {
	// Retrieval is the L2-normalised retrieval vectors, (B, e).
	Retrieval *engine.Tensor
	// Rows is the encoder's final states, (B, N+1, h): the CLS state at row 0, row j+1 for row j
	// of U (padded rows hold values that mean nothing).
	Rows *engine.Tensor
	// KeyMask is (B, N+1): Batch.Mask with the CLS column (1) in front.
	KeyMask *engine.Tensor
}

// Model is the retrieval attack of SPEC §4: the set encoder, whose CLS state goes through
// Linear(h, e) and L2 normalisation, trained with multi-positive InfoNCE. All parameters live in
// one engine.Params buffer (named views with the SPEC §4 names); a Model is not safe for
// concurrent use.
type Model struct {
	cfg    Config
	params *engine.Params
	enc    *Encoder
	head   *engine.Tensor // retrieval_head.weight (e, h)
	logTau *engine.Tensor // log_tau (1); nil for a fixed temperature
	tape   *engine.Tape
	// clean is reused host scratch for U with its padded rows zeroed (see cleanRows).
	clean []float32
}

// New builds a retrieval model on be with parameters initialised from seed (see ParamSpec.Init).
// The caller chooses the device (commands with package engine/device) and owns be: it closes be
// after the model's last use.
func New(be engine.Backend, cfg Config, seed uint64) (*Model, error) {
	if cfg.Task != TaskRetrieval {
		return nil, fmt.Errorf("settransformer: New builds task %q, got task %q (use NewUnmix)", TaskRetrieval, cfg.Task)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pb := newParamBuilder()
	enc, hd := pb.declare(cfg)
	if err := pb.alloc(be, seed); err != nil {
		return nil, err
	}
	return &Model{cfg: cfg, params: pb.ps, enc: enc, head: hd.retrieval, logTau: hd.logTau, tape: engine.NewTape(be)}, nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Params is the parameter buffer: named views for checkpoints (Views, Lookup), the gradient
// buffer that ForwardBackward fills, and what engine.NewAdamW optimises.
func (m *Model) Params() *engine.Params { return m.params }

// Encoder is the model's set encoder.
func (m *Model) Encoder() *Encoder { return m.enc }

// Tape is the model's tape (arena statistics, tests).
func (m *Model) Tape() *engine.Tape { return m.tape }

// Param copies the named parameter to the host.
func (m *Model) Param(name string) ([]float32, error) { return getParam(m.params, name) }

// SetParam overwrites the named parameter with v (len = the parameter's size).
func (m *Model) SetParam(name string, v []float32) error { return setParam(m.params, name, v) }

func getParam(ps *engine.Params, name string) ([]float32, error) {
	t, ok := ps.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("settransformer: no parameter %q", name)
	}
	return t.ToHost(), nil
}

func setParam(ps *engine.Params, name string, v []float32) error {
	t, ok := ps.Lookup(name)
	if !ok {
		return fmt.Errorf("settransformer: no parameter %q", name)
	}
	if err := t.CopyFrom(v); err != nil {
		return fmt.Errorf("settransformer: set %s: %w", name, err)
	}
	return nil
}

// checkBatch validates the sizes of b against the row width d.
func checkBatch(b Batch, d int) error {
	if b.B < 1 || b.N < 1 {
		return fmt.Errorf("settransformer: batch of %d sets of %d rows: want both >= 1", b.B, b.N)
	}
	if b.deviceMixed() {
		if b.U != nil {
			return fmt.Errorf("settransformer: batch has both U and X, A: want U, or X and A for the backend to form U")
		}
		if b.NX < 1 || len(b.X) != b.B*b.NX*d || len(b.A) != b.B*b.N*b.NX {
			return fmt.Errorf("settransformer: batch X has %d values and A %d, want B*NX*d = %d*%d*%d and B*N*NX = %d*%d*%d",
				len(b.X), len(b.A), b.B, b.NX, d, b.B, b.N, b.NX)
		}
	} else if want := b.B * b.N * d; len(b.U) != want {
		return fmt.Errorf("settransformer: batch U has %d values, want B*N*d = %d*%d*%d = %d", len(b.U), b.B, b.N, d, want)
	}
	if b.Mask != nil {
		if len(b.Mask) != b.B*b.N {
			return fmt.Errorf("settransformer: batch mask has %d values, want B*N = %d", len(b.Mask), b.B*b.N)
		}
		for i, v := range b.Mask {
			if v != 0 && v != 1 {
				return fmt.Errorf("settransformer: batch mask[%d] = %g, want 0 or 1", i, v)
			}
		}
	}
	return nil
}

// inputU puts b's U on tp: uploaded with its padded rows zeroed (cleanRows, scratch *buf), or,
// for a device-mixed batch, formed there from X and A. u: (B, N, d).
func inputU(tp *engine.Tape, buf *[]float32, b Batch, d int) *engine.Tensor {
	if b.deviceMixed() {
		return tp.MixRows(tp.Input(b.A, b.B, b.N, b.NX), tp.Input(b.X, b.B, b.NX, d), b.Round)
	}
	return tp.Input(cleanRows(buf, b, d), b.B, b.N, d)
}

// cleanRows returns b.U with every padded row zeroed. Attention never reads padded keys, but a
// weight gradient is a product over all rows, and a zero gradient times NaN or Inf padding is NaN:
// padding must be zeroed, not multiplied by zero. The copy is one pass over the batch into the
// reused scratch *buf (ENGINE_REQUESTS.md beside this file, request 4, would do it on the device); without padding
// b.U is used as it is.
func cleanRows(buf *[]float32, b Batch, d int) []float32 {
	if b.Mask == nil || !slices.Contains(b.Mask, 0) {
		return b.U
	}
	c := grow(buf, len(b.U))
	for r, real := range b.Mask {
		if real == 0 {
			clear(c[r*d : (r+1)*d])
		} else {
			copy(c[r*d:(r+1)*d], b.U[r*d:(r+1)*d])
		}
	}
	return c
}

// grow returns (*buf)[:n], reallocating when the capacity is short.
func grow(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	return (*buf)[:n]
}

// forward records the model up to the retrieval vectors. q: (B, e).
func (m *Model) forward(b Batch) (q, rows, keyMask *engine.Tensor, err error) {
	if err := checkBatch(b, m.cfg.InputDim); err != nil {
		return nil, nil, nil, err
	}
	tp := m.tape
	tp.Reset()
	u := inputU(tp, &m.clean, b, m.cfg.InputDim) // (B, N, d)
	var mask *engine.Tensor
	if b.Mask != nil {
		mask = tp.Input(b.Mask, b.B, b.N) // (B, N)
	}
	rows, keyMask, err = m.enc.Forward(tp, u, mask) // (B, N+1, h)
	if err != nil {
		return nil, nil, nil, err
	}
	q = tp.L2Normalize(tp.Linear(tp.TakeRow(rows, 0), m.head)) // (B, e)
	if err := tp.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("settransformer: forward: %w", err)
	}
	return q, rows, keyMask, nil
}

// Forward runs inference: the retrieval vectors and the encoder states of b.
func (m *Model) Forward(b Batch) (Outputs, error) {
	q, rows, keyMask, err := m.forward(b)
	if err != nil {
		return Outputs{}, err
	}
	return Outputs{Retrieval: q, Rows: rows, KeyMask: keyMask}, nil
}

// ForwardBackward computes the InfoNCE loss of b against t and accumulates (+=) the gradient of
// every parameter into Params().Grad(); the caller zeroes gradients once per optimiser step
// (Params().ZeroGrad), which also allows accumulation over several batches.
func (m *Model) ForwardBackward(b Batch, t Targets) (float32, error) {
	if len(t.Positives) != b.B {
		return 0, fmt.Errorf("settransformer: %d positive lists for a batch of %d", len(t.Positives), b.B)
	}
	e := m.cfg.CandidateDim
	if len(t.Candidates) == 0 || len(t.Candidates)%e != 0 {
		return 0, fmt.Errorf("settransformer: %d candidate values: want a positive multiple of e = %d", len(t.Candidates), e)
	}
	q, _, _, err := m.forward(b)
	if err != nil {
		return 0, err
	}
	tp := m.tape
	cand := tp.Input(t.Candidates, len(t.Candidates)/e, e) // (C, e)
	loss, err := losses.InfoNCE(tp, q, cand, t.Positives, m.temperature())
	if err != nil {
		return 0, fmt.Errorf("settransformer: %w", err)
	}
	if err := tp.Backward(loss); err != nil {
		return 0, fmt.Errorf("settransformer: backward: %w", err)
	}
	return loss.Item(), nil
}

// Scores runs inference and returns the retrieval scores of b against the candidates (C, e):
// (B, C) row-major on the host, computed on the tape by losses.Scores, the definition
// ForwardBackward's InfoNCE uses, so that evaluation ranks with the scores training optimises.
func (m *Model) Scores(b Batch, candidates []float32) ([]float32, error) {
	e := m.cfg.CandidateDim
	if len(candidates) == 0 || len(candidates)%e != 0 {
		return nil, fmt.Errorf("settransformer: %d candidate values: want a positive multiple of e = %d", len(candidates), e)
	}
	q, _, _, err := m.forward(b)
	if err != nil {
		return nil, err
	}
	tp := m.tape
	cand := tp.Input(candidates, len(candidates)/e, e) // (C, e)
	scores, err := losses.Scores(tp, q, cand, m.temperature())
	if err != nil {
		return nil, fmt.Errorf("settransformer: %w", err)
	}
	if err := tp.Err(); err != nil {
		return nil, fmt.Errorf("settransformer: scores: %w", err)
	}
	return scores.ToHost(), nil
}

// temperature is the InfoNCE tau: fixed from the config or the learned log_tau.
func (m *Model) temperature() losses.Temperature {
	if m.logTau != nil {
		return losses.Temperature{Log: m.logTau}
	}
	return losses.Temperature{Tau: float32(m.cfg.Temperature)}
}

// Tau is the current temperature (the learned one when LearnTemperature is set).
func (m *Model) Tau() float64 {
	if m.logTau != nil {
		return math.Exp(float64(m.logTau.Item()))
	}
	return m.cfg.Temperature
}
