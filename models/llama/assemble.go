package llama

import (
	"fmt"

	"github.com/gelo-research/geloattack/engine/blas"
)

// Source gives the stored bytes of one weight tensor of a checkpoint.
type Source func(t Tensor) (Stored, error)

// Assemble makes a model of cfg over the weights of blocks 0..blocks-1 that src gives, in the
// order of cfg.Tensors(blocks) (blocks = cfg.Layers: the whole model). F16 and BF16 matrices stay
// as stored, converted to float32 a GEMM chunk at a time as a forward pass reads them, bit for bit
// what converting the file up front would give; F32 ones, and the gains and biases (a few vectors
// of d), are copied to the heap now. Assemble checks each tensor's size, not its values: a loader
// that refuses NaN does so before. closer, when not nil, releases what the bytes point into:
// Model.Close calls it, or Assemble itself when every weight was copied (a float32 checkpoint),
// since nothing reads the bytes afterwards. lib computes the matrix products (nil: the default).
func Assemble(cfg Config, lib *blas.Library, blocks int, src Source, closer func() error) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	if blocks < 1 || blocks > cfg.Layers {
		return nil, fmt.Errorf("llama: blocks %d: want 1..%d (num_hidden_layers)", blocks, cfg.Layers)
	}
	if lib == nil {
		lib = blas.Default()
	}
	m := &Model{Cfg: cfg, lib: lib, blocks: make([]block, blocks), stored: true, close: closer}
	stacks := make([]stacked, blocks)
	for _, t := range cfg.Tensors(blocks) {
		s, err := src(t)
		if err != nil {
			return nil, err
		}
		if s.DType > BF16 || len(s.Raw) != t.Elems()*s.DType.Size() {
			return nil, fmt.Errorf("llama: %s of block %d: %d bytes of %s, want %v elements", t.Part, t.Block, len(s.Raw), s.DType, t.Shape)
		}
		if err := m.place(t, s, &stacks[max(t.Block, 0)]); err != nil {
			return nil, fmt.Errorf("llama: %s of block %d: %w", t.Part, t.Block, err)
		}
	}
	for i, st := range stacks {
		b := &m.blocks[i]
		var err error
		if b.qkv, err = storedMatrix(cfg.Hidden, st.qkv...); err != nil {
			return nil, fmt.Errorf("llama: q/k/v of block %d: %w", i, err)
		}
		if b.gateUp, err = storedMatrix(cfg.Hidden, st.gateUp...); err != nil {
			return nil, fmt.Errorf("llama: gate/up of block %d: %w", i, err)
		}
		for _, s := range st.bias {
			v, err := vector(s, len(s.Raw)/s.DType.Size())
			if err != nil {
				return nil, fmt.Errorf("llama: q/k/v bias of block %d: %w", i, err)
			}
			b.qkvBias = append(b.qkvBias, v...)
		}
	}
	if blocks == cfg.Layers && cfg.TiedEmbeddings {
		m.lmHead = m.embed
	}
	if closer != nil && !m.holdsStored() {
		m.close = nil
		if err := closer(); err != nil {
			return nil, fmt.Errorf("llama: release the copied weights' source: %w", err)
		}
	}
	return m, nil
}

// holdsStored reports whether some matrix is held as the source's bytes.
func (m *Model) holdsStored() bool {
	held := m.embed.converts() || m.lmHead.converts()
	for i := range m.blocks {
		b := &m.blocks[i]
		held = held || b.qkv.converts() || b.o.converts() || b.gateUp.converts() || b.down.converts()
	}
	return held
}

// stacked collects the tensors of one block that the forward pass stacks, in order.
type stacked struct{ qkv, bias, gateUp []Stored }

// place puts one stored tensor where the model keeps it: the tensors that the forward pass
// stacks are collected into st, the others converted or wrapped now.
func (m *Model) place(t Tensor, s Stored, st *stacked) error {
	var err error
	cols := t.Shape[len(t.Shape)-1]
	switch t.Part {
	case Embedding:
		m.embed, err = storedMatrix(cols, s)
	case LMHead:
		m.lmHead, err = storedMatrix(cols, s)
	case FinalNorm:
		m.norm, err = vector(s, cols)
	case QProj, KProj, VProj:
		st.qkv = append(st.qkv, s)
	case QBias, KBias, VBias:
		st.bias = append(st.bias, s)
	case GateProj, UpProj:
		st.gateUp = append(st.gateUp, s)
	default:
		b := &m.blocks[t.Block]
		switch t.Part {
		case OProj:
			b.o, err = storedMatrix(cols, s)
		case DownProj:
			b.down, err = storedMatrix(cols, s)
		case AttnNorm:
			b.attnNorm, err = vector(s, cols)
		case MLPNorm:
			b.mlpNorm, err = vector(s, cols)
		case QNorm:
			b.qNorm, err = vector(s, cols)
		case KNorm:
			b.kNorm, err = vector(s, cols)
		}
	}
	return err
}
