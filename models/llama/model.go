package llama

import (
	"fmt"

	"github.com/gelo-research/geloattack/engine/blas"
)

// Model is a decoder with float32 weights. Fill the weights (models/hf reads them from a Hugging
// Face directory, Random draws them) before the first forward pass; afterwards the model is
// read-only and safe for concurrent forward passes with separate workspaces.
type Model struct {
	Cfg Config
	// Embed is the token embedding: (vocab, d).
	Embed []float32
	// Blocks are the decoder layers in order.
	Blocks []Block
	// Norm is the final RMSNorm gain: (d).
	Norm []float32
	// LMHead is the output projection: (vocab, d). With tied embeddings it is Embed itself.
	LMHead []float32

	lib *blas.Library
}

// Block is one pre-norm decoder layer. Q, K and V are stored stacked, and so are the gate and up
// projections, so that each pair of GEMMs is one; the accessors give the Hugging Face tensors
// as views into the stacked storage.
type Block struct {
	AttnNorm []float32 // (d): input_layernorm
	QKV      []float32 // (q+2kv, d): q_proj rows, then k_proj, then v_proj
	QKVBias  []float32 // (q+2kv), nil without biases
	QNorm    []float32 // (hd): q_norm, nil unless Cfg.QKNorm
	KNorm    []float32 // (hd): k_norm, nil unless Cfg.QKNorm
	O        []float32 // (d, q): o_proj
	MLPNorm  []float32 // (d): post_attention_layernorm
	GateUp   []float32 // (2f, d): gate_proj rows, then up_proj
	Down     []float32 // (d, f): down_proj

	q, kv, f, d int
}

// Q is q_proj.weight: (q, d).
func (b *Block) Q() []float32 { return b.QKV[:b.q*b.d] }

// K is k_proj.weight: (kv, d).
func (b *Block) K() []float32 { return b.QKV[b.q*b.d : (b.q+b.kv)*b.d] }

// V is v_proj.weight: (kv, d).
func (b *Block) V() []float32 { return b.QKV[(b.q+b.kv)*b.d:] }

// QBias is q_proj.bias (q), nil without biases.
func (b *Block) QBias() []float32 { return sub(b.QKVBias, 0, b.q) }

// KBias is k_proj.bias (kv), nil without biases.
func (b *Block) KBias() []float32 { return sub(b.QKVBias, b.q, b.q+b.kv) }

// VBias is v_proj.bias (kv), nil without biases.
func (b *Block) VBias() []float32 { return sub(b.QKVBias, b.q+b.kv, b.q+2*b.kv) }

// Gate is gate_proj.weight: (f, d).
func (b *Block) Gate() []float32 { return b.GateUp[:b.f*b.d] }

// Up is up_proj.weight: (f, d).
func (b *Block) Up() []float32 { return b.GateUp[b.f*b.d:] }

func sub(x []float32, lo, hi int) []float32 {
	if x == nil {
		return nil
	}
	return x[lo:hi:hi]
}

// New allocates a model of cfg with every weight zero (gains included). lib computes the matrix
// products; nil means blas.Default(). Memory: 4 bytes per parameter (Config.Params).
func New(cfg Config, lib *blas.Library) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	if lib == nil {
		lib = blas.Default()
	}
	d, f, q, kv := cfg.Hidden, cfg.Intermediate, cfg.QDim(), cfg.KVDim()
	m := &Model{
		Cfg: cfg, lib: lib,
		Embed:  make([]float32, cfg.VocabSize*d),
		Norm:   make([]float32, d),
		Blocks: make([]Block, cfg.Layers),
	}
	if cfg.TiedEmbeddings {
		m.LMHead = m.Embed
	} else {
		m.LMHead = make([]float32, cfg.VocabSize*d)
	}
	for i := range m.Blocks {
		b := &m.Blocks[i]
		*b = Block{
			q: q, kv: kv, f: f, d: d,
			AttnNorm: make([]float32, d), QKV: make([]float32, (q+2*kv)*d),
			O: make([]float32, d*q), MLPNorm: make([]float32, d),
			GateUp: make([]float32, 2*f*d), Down: make([]float32, d*f),
		}
		if cfg.QKVBias {
			b.QKVBias = make([]float32, q+2*kv)
		}
		if cfg.QKNorm {
			b.QNorm, b.KNorm = make([]float32, cfg.HeadDim), make([]float32, cfg.HeadDim)
		}
	}
	return m, nil
}

// Lib is the BLAS library the model computes with.
func (m *Model) Lib() *blas.Library { return m.lib }
