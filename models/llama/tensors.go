package llama

import "fmt"

// Part names one weight tensor of a decoder as Hugging Face checkpoints split them (the names are
// models/hf's table).
type Part int

// The weights of a decoder: the embedding, each block's, then the final norm and output head.
const (
	Embedding Part = iota // model.embed_tokens.weight: (vocab, d)
	AttnNorm              // input_layernorm.weight: (d)
	QProj                 // self_attn.q_proj.weight: (q, d)
	KProj                 // self_attn.k_proj.weight: (kv, d)
	VProj                 // self_attn.v_proj.weight: (kv, d)
	QBias                 // self_attn.q_proj.bias: (q), with Config.QKVBias
	KBias                 // self_attn.k_proj.bias: (kv)
	VBias                 // self_attn.v_proj.bias: (kv)
	QNorm                 // self_attn.q_norm.weight: (hd), with Config.QKNorm
	KNorm                 // self_attn.k_norm.weight: (hd)
	OProj                 // self_attn.o_proj.weight: (d, q)
	MLPNorm               // post_attention_layernorm.weight: (d)
	GateProj              // mlp.gate_proj.weight: (f, d)
	UpProj                // mlp.up_proj.weight: (f, d)
	DownProj              // mlp.down_proj.weight: (d, f)
	FinalNorm             // model.norm.weight: (d)
	LMHead                // lm_head.weight: (vocab, d); the embedding itself when tied
)

// String names the part as its tensor's name ends.
func (p Part) String() string {
	if p >= 0 && int(p) < len(partNames) {
		return partNames[p]
	}
	return fmt.Sprintf("Part(%d)", int(p))
}

var partNames = [...]string{"embed_tokens", "input_layernorm", "q_proj", "k_proj", "v_proj", "q_proj.bias", "k_proj.bias",
	"v_proj.bias", "q_norm", "k_norm", "o_proj", "post_attention_layernorm", "gate_proj", "up_proj", "down_proj", "norm", "lm_head"}

// InBlock reports whether the part belongs to a decoder block (a block index names it).
func (p Part) InBlock() bool { return p > Embedding && p < FinalNorm }

// Gain reports whether the part is an RMSNorm gain (Random draws it around 1).
func (p Part) Gain() bool {
	return p == AttnNorm || p == QNorm || p == KNorm || p == MLPNorm || p == FinalNorm
}

// Tensor is one weight tensor of a config: its part, its block (-1 outside the blocks) and its
// shape.
type Tensor struct {
	Part  Part
	Block int
	Shape []int
}

// Elems is the tensor's element count.
func (t Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Tensors lists the weight tensors of blocks 0..blocks-1 in Hugging Face's file order (the
// order Random draws them): the embedding, each block's, and with every block (blocks =
// Layers) the final norm and an untied output projection.
func (c Config) Tensors(blocks int) []Tensor {
	d, f, hd, q, kv := c.Hidden, c.Intermediate, c.HeadDim, c.QDim(), c.KVDim()
	out := []Tensor{{Embedding, -1, []int{c.VocabSize, d}}}
	for b := 0; b < min(blocks, c.Layers); b++ {
		add := func(p Part, shape ...int) { out = append(out, Tensor{p, b, shape}) }
		add(AttnNorm, d)
		add(QProj, q, d)
		add(KProj, kv, d)
		add(VProj, kv, d)
		if c.QKVBias {
			add(QBias, q)
			add(KBias, kv)
			add(VBias, kv)
		}
		if c.QKNorm {
			add(QNorm, hd)
			add(KNorm, hd)
		}
		add(OProj, d, q)
		add(MLPNorm, d)
		add(GateProj, f, d)
		add(UpProj, f, d)
		add(DownProj, d, f)
	}
	if blocks >= c.Layers {
		out = append(out, Tensor{FinalNorm, -1, []int{d}})
		if !c.TiedEmbeddings {
			out = append(out, Tensor{LMHead, -1, []int{c.VocabSize, d}})
		}
	}
	return out
}
