// Package llama is what a Llama-family decoder (Llama 2/3, Mistral, Qwen2, Qwen3) is, apart from
// how it computes: its architecture (Config, as config.json gives it: grouped-query attention,
// q/k/v biases, q/k norms, tied or untied output, rope scalings), its weight tensors (Part,
// Tensors, in Hugging Face's names and file order) and a checkpoint's weights (Model: float32 from
// New, Random or a checkpoint's F32 tensors, or F16/BF16 bytes as the file stores them, converted
// when read, of all blocks or the first k), with the points a forward pass taps (Point, Tap). The
// forward pass is models/causallm's Decoder, on the engine; loading from a Hugging Face directory
// lives in models/hf.
package llama

import (
	"fmt"
	"math"
)

// Config is the architecture of a decoder, in the terms of a Hugging Face config.json.
type Config struct {
	// Architecture is the Hugging Face class name, e.g. "LlamaForCausalLM" (informational).
	Architecture string
	VocabSize    int
	Hidden       int // d: width of the residual stream
	Intermediate int // f: width of the SwiGLU MLP
	Layers       int
	Heads        int // query heads
	KVHeads      int // key/value heads (grouped-query attention when < Heads)
	HeadDim      int // width of one head; Heads*HeadDim need not equal Hidden (Qwen3-0.6B)
	RMSEps       float64
	RopeTheta    float64
	// Rope is the rotary frequency scaling; the zero value is none.
	Rope RopeScaling
	// MaxPositions is max_position_embeddings: the longest sequence the model was trained on.
	MaxPositions int
	// SlidingWindow > 0 limits attention to the last SlidingWindow keys (Mistral v0.1). It is not
	// implemented; sequences are limited to SlidingWindow tokens, where the window changes nothing.
	SlidingWindow int
	// QKVBias adds biases to the q, k and v projections (Qwen2).
	QKVBias bool
	// QKNorm applies an RMSNorm over head_dim to every query and key head before rotation (Qwen3).
	QKNorm bool
	// TiedEmbeddings reuses the token embedding as the output projection.
	TiedEmbeddings bool
}

// Rope scaling kinds.
const (
	RopeDefault = ""       // no scaling
	RopeLinear  = "linear" // every frequency divided by Factor
	RopeLlama3  = "llama3" // Llama 3.1's band-wise scaling
)

// RopeScaling is a Hugging Face rope_scaling entry of a kind this package implements.
type RopeScaling struct {
	Kind           string
	Factor         float64
	LowFreqFactor  float64 // llama3
	HighFreqFactor float64 // llama3
	// OriginalMaxPositions is original_max_position_embeddings (llama3).
	OriginalMaxPositions int
}

// MaxLen is the longest sequence Forward accepts: max_position_embeddings, or the sliding window
// when that is shorter (within it the window masks nothing).
func (c Config) MaxLen() int {
	if c.SlidingWindow > 0 && c.SlidingWindow < c.MaxPositions {
		return c.SlidingWindow
	}
	return c.MaxPositions
}

// QDim is the width of all query heads together (Heads*HeadDim); KVDim that of the key heads.
func (c Config) QDim() int { return c.Heads * c.HeadDim }

// KVDim is the width of all key (or value) heads together (KVHeads*HeadDim).
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim }

// Validate checks that the sizes are positive, consistent and small enough for int arithmetic.
// Errors name the config.json key.
func (c Config) Validate() error {
	const maxDim = 1 << 20
	for _, f := range []struct {
		key string
		v   int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.Hidden}, {"intermediate_size", c.Intermediate},
		{"num_hidden_layers", c.Layers}, {"num_attention_heads", c.Heads},
		{"num_key_value_heads", c.KVHeads}, {"head_dim", c.HeadDim},
		{"max_position_embeddings", c.MaxPositions},
	} {
		if f.v <= 0 || f.v > maxDim {
			return fmt.Errorf("%s = %d: want 1..%d", f.key, f.v, maxDim)
		}
	}
	if err := c.checkProducts(); err != nil {
		return err
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim = %d: rotary embeddings need an even head width", c.HeadDim)
	}
	if !(c.RMSEps > 0 && c.RMSEps < 1) {
		return fmt.Errorf("rms_norm_eps = %g: want a small positive number", c.RMSEps)
	}
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("rope_theta = %g: want a finite number > 1", c.RopeTheta)
	}
	if c.SlidingWindow < 0 {
		return fmt.Errorf("sliding_window = %d: want positive or absent", c.SlidingWindow)
	}
	r := c.Rope
	switch r.Kind {
	case RopeDefault:
	case RopeLinear, RopeLlama3:
		if !(r.Factor >= 1) || math.IsInf(r.Factor, 0) {
			return fmt.Errorf("rope_scaling.factor = %g: want a finite number >= 1", r.Factor)
		}
		if r.Kind == RopeLlama3 {
			if !(r.LowFreqFactor > 0) || !(r.HighFreqFactor > r.LowFreqFactor) || math.IsInf(r.HighFreqFactor, 0) {
				return fmt.Errorf("rope_scaling: low_freq_factor %g, high_freq_factor %g: want 0 < low < high", r.LowFreqFactor, r.HighFreqFactor)
			}
			if r.OriginalMaxPositions <= 0 || r.OriginalMaxPositions > maxDim {
				return fmt.Errorf("rope_scaling.original_max_position_embeddings = %d: want 1..%d", r.OriginalMaxPositions, maxDim)
			}
		}
	default:
		return fmt.Errorf("rope_scaling.rope_type %q: not implemented (want none, %q or %q)", r.Kind, RopeLinear, RopeLlama3)
	}
	return nil
}

// Limits on products of the sizes, which each size's own range (1..2^20) leaves unbounded: a
// config.json of two plausible-looking numbers must not ask for a terabyte. They are far above
// every real dense model (Llama-3.1-405B: an embedding of 2.1e9 elements, 4.1e11 parameters) and
// are checked before anything is allocated; what fits the machine is the resource pre-flight's
// question (runner.Budget).
const (
	// MaxTensorElems bounds one weight matrix: 2^32 elements, 16 GiB in float32.
	MaxTensorElems = 1 << 32
	// MaxParams bounds the whole model: 2^40 parameters, 4 TiB in float32.
	MaxParams = 1 << 40
)

// checkProducts refuses a weight matrix over MaxTensorElems or a model over MaxParams, naming
// the keys, their values and the product. The sizes are already within 1..2^20, so no product
// of two overflows.
func (c Config) checkProducts() error {
	d := int64(c.Hidden)
	for _, m := range []struct {
		keys   string
		rows   int64
		tensor string
	}{
		{"vocab_size x hidden_size", int64(c.VocabSize), "model.embed_tokens.weight"},
		{"num_attention_heads x head_dim x hidden_size", int64(c.Heads) * int64(c.HeadDim), "q_proj.weight"},
		{"intermediate_size x hidden_size", int64(c.Intermediate), "mlp.gate_proj.weight"},
	} {
		if n := m.rows * d; n > MaxTensorElems {
			return fmt.Errorf("%s = %d x %d = %d elements (%s): over the limit of 2^32 elements (16 GiB in float32) for one tensor",
				m.keys, m.rows, d, n, m.tensor)
		}
	}
	// Each matrix is now below 2^32 elements, so a block is below 2^35 and layers x block below 2^55.
	if block := c.blockParams(); int64(c.Layers)*block > MaxParams-c.embedParams() {
		return fmt.Errorf("num_hidden_layers x parameters per block = %d x %d = %d, plus %d in the embeddings: over the limit of 2^40 parameters (4 TiB in float32)",
			c.Layers, block, int64(c.Layers)*block, c.embedParams())
	}
	return nil
}

// blockParams counts the weights of one decoder block.
func (c Config) blockParams() int64 {
	d, f := int64(c.Hidden), int64(c.Intermediate)
	q, kv := int64(c.QDim()), int64(c.KVDim())
	block := 2*d + d*q + 2*d*kv + q*d + 3*d*f
	if c.QKVBias {
		block += q + 2*kv
	}
	if c.QKNorm {
		block += 2 * int64(c.HeadDim)
	}
	return block
}

// embedParams counts the weights outside the blocks: the token embedding, the final norm and an
// untied output projection.
func (c Config) embedParams() int64 {
	d := int64(c.Hidden)
	p := int64(c.VocabSize)*d + d
	if !c.TiedEmbeddings {
		p += int64(c.VocabSize) * d
	}
	return p
}

// Params counts the weights of the model.
func (c Config) Params() int64 { return c.LoadedParams(c.Layers) }

// LoadedParams counts the weights of a model of blocks 0..blocks-1 (Assemble): the token
// embedding, those blocks, and with every block the final norm and an untied output projection.
func (c Config) LoadedParams(blocks int) int64 {
	blocks = min(max(blocks, 0), c.Layers)
	if blocks == c.Layers {
		return c.embedParams() + int64(c.Layers)*c.blockParams()
	}
	return int64(c.VocabSize)*int64(c.Hidden) + int64(blocks)*c.blockParams()
}

// WeightBytes is the host memory of the model's weights in float32 (New allocates all of them).
func (c Config) WeightBytes() int64 { return 4 * c.Params() }

// ScratchBytes is the float32 a decoder converts one block's stored matrices into per pass when
// none of them reads in place (models/causallm's Decoder on a CPU backend): q/k/v, o, gate/up and
// down of one block (Model.ScratchBytes without logits).
func (c Config) ScratchBytes() int64 {
	d, f, q, kv := int64(c.Hidden), int64(c.Intermediate), int64(c.QDim()), int64(c.KVDim())
	return 4 * ((q+2*kv)*d + d*q + 2*f*d + d*f)
}

// BlockBytes is the host memory of the weights of one decoder block.
func (c Config) BlockBytes() int64 { return 4 * c.blockParams() }

// CacheBytes is what a decoder's cache of capacity tokens holds (models/causallm's
// Decoder.NewCache): keys and values of every layer, float32.
func (c Config) CacheBytes(capacity int) int64 {
	return 8 * int64(c.Layers) * int64(capacity) * int64(c.KVDim())
}

// InvFreq returns the rotary frequencies theta^(-2i/hd), i < hd/2, after rope scaling, in float64.
func (c Config) InvFreq() []float64 {
	half := c.HeadDim / 2
	out := make([]float64, half)
	for i := range out {
		out[i] = math.Pow(c.RopeTheta, -float64(2*i)/float64(c.HeadDim))
	}
	r := c.Rope
	switch r.Kind {
	case RopeLinear:
		for i := range out {
			out[i] /= r.Factor
		}
	case RopeLlama3:
		// Wavelengths shorter than old/high keep their frequency, longer than old/low are divided
		// by the factor, and those in between interpolate smoothly (Llama 3.1's published rule).
		old := float64(r.OriginalMaxPositions)
		lowWave, highWave := old/r.LowFreqFactor, old/r.HighFreqFactor
		for i, f := range out {
			wave := 2 * math.Pi / f
			switch {
			case wave < highWave:
			case wave > lowWave:
				out[i] = f / r.Factor
			default:
				s := (old/wave - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
				out[i] = (1-s)*f/r.Factor + s*f
			}
		}
	}
	return out
}
