package llama

import (
	"errors"
	"fmt"

	"github.com/gelo-research/geloattack/engine/blas"
)

// Model is a decoder: its config and the weights of blocks 0..Blocks()-1, held as float32 (New,
// Random, and a checkpoint's F32 tensors) or as a checkpoint file stores them (Assemble: F16 or
// BF16 bytes, converted to float32 as a forward pass reads them). Fill a New or Random model's
// weights (Storage) before the first forward pass; afterwards the model is read-only and safe for
// concurrent forward passes with separate workspaces.
type Model struct {
	Cfg Config

	embed  matrix    // (vocab, d)
	blocks []block   // blocks 0..len-1
	norm   []float32 // (d): the final RMSNorm gain; nil unless every block is held
	lmHead matrix    // (vocab, d): the embedding when tied; empty unless every block is held
	stored bool      // assembled from a checkpoint: read-only
	close  func() error
	lib    *blas.Library
}

// block is one pre-norm decoder layer. Q, K and V are stacked, and so are the gate and up
// projections, so that each triple or pair of GEMMs is one.
type block struct {
	attnNorm, mlpNorm []float32 // (d)
	qNorm, kNorm      []float32 // (hd), nil unless Cfg.QKNorm
	qkvBias           []float32 // (q+2kv), nil without biases
	qkv               matrix    // (q+2kv, d): q_proj rows, then k_proj, then v_proj
	o                 matrix    // (d, q)
	gateUp            matrix    // (2f, d): gate_proj rows, then up_proj
	down              matrix    // (d, f)
}

// New allocates a model of cfg with every weight zero (gains included), all of it float32 on the
// heap: 4 bytes per parameter (Config.Params). lib computes the matrix products; nil means
// blas.Default().
func New(cfg Config, lib *blas.Library) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	if lib == nil {
		lib = blas.Default()
	}
	d, f, q, kv := cfg.Hidden, cfg.Intermediate, cfg.QDim(), cfg.KVDim()
	m := &Model{Cfg: cfg, lib: lib, embed: heapMatrix(cfg.VocabSize, d), norm: make([]float32, d), blocks: make([]block, cfg.Layers)}
	m.lmHead = m.embed
	if !cfg.TiedEmbeddings {
		m.lmHead = heapMatrix(cfg.VocabSize, d)
	}
	for i := range m.blocks {
		b := &m.blocks[i]
		*b = block{attnNorm: make([]float32, d), mlpNorm: make([]float32, d),
			qkv: heapMatrix(q+2*kv, d), o: heapMatrix(d, q), gateUp: heapMatrix(2*f, d), down: heapMatrix(d, f)}
		if cfg.QKVBias {
			b.qkvBias = make([]float32, q+2*kv)
		}
		if cfg.QKNorm {
			b.qNorm, b.kNorm = make([]float32, cfg.HeadDim), make([]float32, cfg.HeadDim)
		}
	}
	return m, nil
}

// Lib is the BLAS library the model computes with.
func (m *Model) Lib() *blas.Library { return m.lib }

// Blocks is the number of decoder blocks the model holds: Cfg.Layers, or fewer when it was
// assembled from the first blocks of a checkpoint. Such a model runs those blocks only: its taps
// reach the residual input of block Blocks() (Hugging Face's hidden_states[Blocks()]) and it
// computes no logits.
func (m *Model) Blocks() int { return len(m.blocks) }

// Close releases what the model's weights are read from (models/hf's mapped files); the model
// must not be used afterwards. It does nothing for a float32 model.
func (m *Model) Close() error {
	if m.close == nil {
		return nil
	}
	c := m.close
	m.close = nil
	return c()
}

// Storage is the float32 storage of one weight of a model made by New or Random (block is
// ignored for the parts outside the blocks), to fill before the first forward pass. A model
// assembled from a checkpoint refuses: its weights are the file's, read-only.
func (m *Model) Storage(p Part, blk int) ([]float32, error) {
	if m.stored {
		return nil, fmt.Errorf("llama: %s: the weights are a checkpoint's, read-only", p)
	}
	w, lo, hi, vec, err := m.locate(p, blk)
	if err != nil {
		return nil, err
	}
	if w == nil {
		return vec, nil
	}
	return w.f32[lo*w.cols : hi*w.cols : hi*w.cols], nil
}

// Float32 is one weight's float32 values where the model holds them as float32 (New, Random, a
// checkpoint's F32 tensors), ok false where it converts them when read (F16, BF16). The slice is
// the model's own memory: read-only, valid while the model is. Its capacity runs to the end of the
// matrix the part is stacked in (q_proj's: k_proj and v_proj follow; gate_proj's: up_proj), so a
// caller may view the stack as one matrix.
func (m *Model) Float32(p Part, blk int) (x []float32, ok bool) {
	w, lo, hi, vec, err := m.locate(p, blk)
	switch {
	case err != nil:
		return nil, false
	case w == nil:
		return vec, true
	case w.f32 == nil:
		return nil, false
	}
	return w.f32[lo*w.cols : hi*w.cols], true
}

// Read converts the whole of one weight to float32 into dst, which must hold its element count.
func (m *Model) Read(p Part, blk int, dst []float32) error {
	rows, _, err := m.Shape(p, blk)
	if err != nil {
		return err
	}
	return m.ReadRows(p, blk, 0, rows, dst)
}

// Shape is one weight's (rows, cols); a gain or bias is one row.
func (m *Model) Shape(p Part, blk int) (rows, cols int, err error) {
	w, lo, hi, vec, err := m.locate(p, blk)
	switch {
	case err != nil:
		return 0, 0, err
	case w == nil:
		return 1, len(vec), nil
	}
	return hi - lo, w.cols, nil
}

// ReadRows converts rows lo..hi-1 of one weight to float32 into dst (hi-lo, cols): e.g. the
// embedding rows of a few tokens, without converting the table.
func (m *Model) ReadRows(p Part, blk, lo, hi int, dst []float32) error {
	w, r0, r1, vec, err := m.locate(p, blk)
	if err != nil {
		return err
	}
	if w == nil {
		if lo != 0 || hi != 1 || len(dst) != len(vec) {
			return fmt.Errorf("llama: %s: rows [%d, %d) into %d values: it is one row of %d", p, lo, hi, len(dst), len(vec))
		}
		copy(dst, vec)
		return nil
	}
	if lo < 0 || lo > hi || hi > r1-r0 || len(dst) != (hi-lo)*w.cols {
		return fmt.Errorf("llama: %s: rows [%d, %d) into %d values: it has %d rows of %d", p, lo, hi, len(dst), r1-r0, w.cols)
	}
	w.convert(r0+lo, r0+hi, dst)
	return nil
}

// errNotHeld is the error for a part the model does not hold.
var errNotHeld = errors.New("not held")

// locate finds a weight: a matrix and its rows lo..hi-1 (q_proj within the stacked q/k/v), or a
// vector (w nil).
func (m *Model) locate(p Part, blk int) (w *matrix, lo, hi int, vec []float32, err error) {
	c := m.Cfg
	switch p {
	case Embedding:
		return &m.embed, 0, m.embed.rows, nil, nil
	case FinalNorm, LMHead:
		if len(m.blocks) < c.Layers {
			return nil, 0, 0, nil, fmt.Errorf("llama: %s: %w by a model of blocks 0..%d of %d", p, errNotHeld, len(m.blocks)-1, c.Layers)
		}
		if p == FinalNorm {
			return nil, 0, 0, m.norm, nil
		}
		return &m.lmHead, 0, m.lmHead.rows, nil, nil
	}
	if !p.InBlock() {
		return nil, 0, 0, nil, fmt.Errorf("llama: %v: no such weight", p)
	}
	if blk < 0 || blk >= len(m.blocks) {
		return nil, 0, 0, nil, fmt.Errorf("llama: %s of block %d: the model holds blocks 0..%d", p, blk, len(m.blocks)-1)
	}
	b := &m.blocks[blk]
	q, kv, f := c.QDim(), c.KVDim(), c.Intermediate
	switch p {
	case QProj:
		return &b.qkv, 0, q, nil, nil
	case KProj:
		return &b.qkv, q, q + kv, nil, nil
	case VProj:
		return &b.qkv, q + kv, q + 2*kv, nil, nil
	case OProj:
		return &b.o, 0, b.o.rows, nil, nil
	case GateProj:
		return &b.gateUp, 0, f, nil, nil
	case UpProj:
		return &b.gateUp, f, 2 * f, nil, nil
	case DownProj:
		return &b.down, 0, b.down.rows, nil, nil
	case AttnNorm:
		return nil, 0, 0, b.attnNorm, nil
	case MLPNorm:
		return nil, 0, 0, b.mlpNorm, nil
	}
	var v []float32
	switch p {
	case QBias:
		v = sub(b.qkvBias, 0, q)
	case KBias:
		v = sub(b.qkvBias, q, q+kv)
	case VBias:
		v = sub(b.qkvBias, q+kv, q+2*kv)
	case QNorm:
		v = b.qNorm
	case KNorm:
		v = b.kNorm
	}
	if v == nil {
		return nil, 0, 0, nil, fmt.Errorf("llama: %s: %w (the config has no q/k/v biases or q/k norms)", p, errNotHeld)
	}
	return nil, 0, 0, v, nil
}

func sub(x []float32, lo, hi int) []float32 {
	if x == nil {
		return nil
	}
	return x[lo:hi:hi]
}

// ScratchBytes is the float32 a decoder converts this model's stored matrices into per pass
// (models/causallm's Decoder on a CPU backend): one buffer per block matrix that some block holds
// as F16/BF16 bytes, shared by the blocks, and with logits the output projection when it converts;
// 0 for a float32 model.
func (m *Model) ScratchBytes(logits bool) int64 {
	var n int64
	for j := range 4 {
		for i := range m.blocks {
			w := [...]*matrix{&m.blocks[i].qkv, &m.blocks[i].o, &m.blocks[i].gateUp, &m.blocks[i].down}[j]
			if w.converts() {
				n += int64(w.rows) * int64(w.cols)
				break
			}
		}
	}
	if logits && m.lmHead.converts() {
		n += int64(m.lmHead.rows) * int64(m.lmHead.cols)
	}
	return 4 * n
}
