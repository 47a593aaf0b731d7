// Package causallm is the Llama-family decoder as a trainable model of the engine: token
// embedding, pre-norm blocks (RMSNorm, rotary multi-head causal attention, SwiGLU MLP), a final
// RMSNorm and the output projection tied to the embedding, trained by next-token cross-entropy.
// Its parameters carry the Hugging Face tensor names (model.layers.3.self_attn.q_proj.weight, ...),
// so a checkpoint is a decoder that models/hf writes and models/llama runs (Export) with the same
// outputs: the attacks' host forward pass is the oracle of this one (see the tests).
package causallm

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/models/causallm/lmcfg"
	"github.com/gelo-research/geloattack/models/llama"
)

// Config is the decoder's shape (the lm.model section of a run config).
type Config = lmcfg.Model

// InitStd is the standard deviation of every weight matrix at initialisation; the projections
// that feed the residual stream (o_proj, down_proj) get InitStd/sqrt(2 layers), as GPT-2 and
// the set models here do.
const InitStd = 0.02

// Model is the trainable decoder on one backend. It is not safe for concurrent use: the forward
// pass records on the model's one tape.
type Model struct {
	cfg    Config
	vocab  int
	ps     *engine.Params
	embed  *engine.Tensor // (V, d), also the output projection
	blocks []blockWeights // qkv and gateUp are engine.Params.Stack views of the named parts
	norm   *engine.Tensor // (d)
	rope   []float32      // (seq, hd): RoPETable of the training length
	tape   *engine.Tape
	init   []paramInit
}

// paramInit is how one parameter starts: normal with std, or the constant 1 when std is 0.
type paramInit struct {
	t   *engine.Tensor
	std float64
}

// New builds the decoder of cfg with a vocabulary of vocab tokens on be, initialised from seed:
// each parameter from a stream keyed by (seed, its name), so a parameter's start does not depend
// on which other parameters exist.
func New(be engine.Backend, cfg Config, vocab int, seed uint64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("causallm: %w", err)
	}
	if vocab < 2 || vocab >= 1<<24 {
		return nil, fmt.Errorf("causallm: vocabulary of %d tokens, want 2 .. 2^24-1", vocab)
	}
	if err := CheckBackend(be); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, vocab: vocab, ps: engine.NewParams()}
	d, f := cfg.Hidden, cfg.MLP
	outStd := InitStd / math.Sqrt(2*float64(cfg.Layers))
	add := func(name string, std float64, shape ...int) *engine.Tensor {
		t := m.ps.Add(name, shape, engine.DefaultDecay(name, shape))
		m.init = append(m.init, paramInit{t: t, std: std})
		return t
	}
	m.embed = add("model.embed_tokens.weight", InitStd, vocab, d)
	for i := 0; i < cfg.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		var b blockWeights
		b.attnNorm = add(p+"input_layernorm.weight", 0, d)
		q := add(p+"self_attn.q_proj.weight", InitStd, d, d)
		k := add(p+"self_attn.k_proj.weight", InitStd, d, d)
		v := add(p+"self_attn.v_proj.weight", InitStd, d, d)
		b.qkv = m.ps.Stack(p+"self_attn.qkv", q, k, v)
		b.o = add(p+"self_attn.o_proj.weight", outStd, d, d)
		b.mlpNorm = add(p+"post_attention_layernorm.weight", 0, d)
		g := add(p+"mlp.gate_proj.weight", InitStd, f, d)
		u := add(p+"mlp.up_proj.weight", InitStd, f, d)
		b.gateUp = m.ps.Stack(p+"mlp.gate_up", g, u)
		b.down = add(p+"mlp.down_proj.weight", outStd, d, f)
		m.blocks = append(m.blocks, b)
	}
	m.norm = add("model.norm.weight", 0, d)
	if err := m.ps.Alloc(be); err != nil {
		return nil, fmt.Errorf("causallm: allocate parameters: %w", err)
	}
	for _, p := range m.init {
		buf := make([]float32, p.t.Size())
		fill(buf, p.std, seed, p.t.Name())
		if err := p.t.CopyFrom(buf); err != nil {
			return nil, fmt.Errorf("causallm: initialise %s: %w", p.t.Name(), err)
		}
	}
	var err error
	if m.rope, err = engine.RoPETable(cfg.Seq, cfg.HeadDim(), cfg.RopeTheta); err != nil {
		return nil, fmt.Errorf("causallm: %w", err)
	}
	m.tape = engine.NewTape(be)
	return m, nil
}

// CheckBackend fails, naming the first missing kernel, when be lacks a fused kernel the decoder
// runs (embedding, rotary embeddings, causal attention, vocabulary cross-entropy): so far only the
// CPU backend has them all.
func CheckBackend(be engine.Backend) error {
	errs := []error{}
	_, err := engine.KernelOf[engine.EmbeddingKernels](be, engine.KernelEmbedding)
	errs = append(errs, err)
	_, err = engine.KernelOf[engine.RoPEKernels](be, engine.KernelRoPE)
	errs = append(errs, err)
	_, err = engine.KernelOf[engine.CausalAttentionKernels](be, engine.KernelCausalAttention)
	errs = append(errs, err)
	_, err = engine.KernelOf[engine.CrossEntropyKernels](be, engine.KernelCrossEntropy)
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("causallm: the language model cannot run on %s: %w (task lm runs on the CPU: device cpu)", be.Name(), err)
		}
	}
	return nil
}

// fill draws dst from N(0, std²) on the stream of (seed, name), or sets it to 1 when std is 0.
func fill(dst []float32, std float64, seed uint64, name string) {
	if std == 0 {
		for i := range dst {
			dst[i] = 1
		}
		return
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	for i := range dst {
		dst[i] = float32(rng.NormFloat64() * std)
	}
}

// Params is the parameter buffer (weights, gradients, named views in Hugging Face names).
func (m *Model) Params() *engine.Params { return m.ps }

// Config is the decoder's shape.
func (m *Model) Config() Config { return m.cfg }

// Vocab is the vocabulary size.
func (m *Model) Vocab() int { return m.vocab }

// forward records the mean next-token cross-entropy of a batch on the tape.
// windows: (B, T+1) token ids, row-major: inputs are the first T of each row, targets the last T.
func (m *Model) forward(windows []int32, B int) (*engine.Tensor, error) {
	T := m.cfg.Seq
	if B < 1 || len(windows) != B*(T+1) {
		return nil, fmt.Errorf("causallm: %d token ids for %d windows of %d+1 tokens", len(windows), B, T)
	}
	in := make([]int32, 0, B*T)
	tgt := make([]int32, 0, B*T)
	for b := 0; b < B; b++ {
		w := windows[b*(T+1) : (b+1)*(T+1)]
		in = append(in, w[:T]...)
		tgt = append(tgt, w[1:]...)
	}
	c := m.cfg
	d, hd := c.Hidden, c.HeadDim()
	eps := float32(c.Eps)
	tp := m.tape
	tp.Reset()
	table := tp.Input(m.rope, T, hd) // (T, hd)
	x := tp.Embedding(m.embed, in)   // (B*T, d)
	arch := m.LlamaConfig()
	for i := range m.blocks {
		a := tp.RMSNorm(x, m.blocks[i].attnNorm, eps) // (B*T, d)
		_, _, x = layer(tp, arch, &m.blocks[i], x, a, table, func(q, k, v *engine.Tensor) *engine.Tensor {
			return tp.Reshape(tp.CausalAttention(tp.Reshape(q, B, T, d), tp.Reshape(k, B, T, d), tp.Reshape(v, B, T, d), c.Heads, c.Heads), B*T, d)
		})
	}
	x = tp.RMSNorm(x, m.norm, eps)
	loss := tp.VocabCrossEntropy(x, m.embed, tgt) // (): mean over B*T tokens
	if err := tp.Err(); err != nil {
		return nil, fmt.Errorf("causallm: forward: %w", err)
	}
	return loss, nil
}

// ForwardBackward computes the mean next-token cross-entropy of windows (B, T+1) and accumulates
// (+=) every parameter's gradient; the caller zeroes gradients once per optimiser step.
func (m *Model) ForwardBackward(windows []int32, B int) (float64, error) {
	loss, err := m.forward(windows, B)
	if err != nil {
		return 0, err
	}
	if err := m.tape.Backward(loss); err != nil {
		return 0, fmt.Errorf("causallm: backward: %w", err)
	}
	return float64(loss.Item()), nil
}

// Loss is the mean next-token cross-entropy of windows (B, T+1), forward only.
func (m *Model) Loss(windows []int32, B int) (float64, error) {
	m.tape.SetForwardOnly(true)
	defer m.tape.SetForwardOnly(false)
	loss, err := m.forward(windows, B)
	if err != nil {
		return 0, err
	}
	return float64(loss.Item()), nil
}

// LlamaConfig is the decoder's architecture in the terms of models/llama (and of config.json).
func (m *Model) LlamaConfig() llama.Config {
	c := m.cfg
	return llama.Config{Architecture: "LlamaForCausalLM", VocabSize: m.vocab, Hidden: c.Hidden, Intermediate: c.MLP,
		Layers: c.Layers, Heads: c.Heads, KVHeads: c.Heads, HeadDim: c.HeadDim(), RMSEps: c.Eps, RopeTheta: c.RopeTheta,
		MaxPositions: c.Seq, TiedEmbeddings: true}
}

// HFConfig is the config.json of the decoder: a Llama architecture with tied embeddings, bos and
// eos the tokenizer's (negative: left out).
func (m *Model) HFConfig(bos, eos int) map[string]any {
	c := m.cfg
	cfg := map[string]any{
		"architectures": []any{"LlamaForCausalLM"}, "model_type": "llama", "hidden_act": "silu",
		"hidden_size": c.Hidden, "intermediate_size": c.MLP, "num_hidden_layers": c.Layers,
		"num_attention_heads": c.Heads, "num_key_value_heads": c.Heads, "rms_norm_eps": c.Eps,
		"rope_theta": c.RopeTheta, "rope_scaling": nil, "max_position_embeddings": c.Seq,
		"tie_word_embeddings": true, "vocab_size": m.vocab, "initializer_range": InitStd,
		"attention_bias": false, "mlp_bias": false, "torch_dtype": "float32",
	}
	if bos >= 0 {
		cfg["bos_token_id"] = bos
	}
	if eos >= 0 {
		cfg["eos_token_id"] = eos
	}
	return cfg
}

// Export copies the weights into a host decoder of models/llama (which models/hf writes as a
// Hugging Face directory). lib is the BLAS library of the host forward (nil: the default).
func (m *Model) Export(lib *blas.Library) (*llama.Model, error) {
	out, err := llama.New(m.LlamaConfig(), lib)
	if err != nil {
		return nil, fmt.Errorf("causallm: export: %w", err)
	}
	get := func(name string, part llama.Part, blk int) error {
		t, ok := m.ps.Lookup(name)
		if !ok {
			return fmt.Errorf("causallm: export: no parameter %s", name)
		}
		dst, err := out.Storage(part, blk)
		if err == nil {
			err = t.CopyTo(dst)
		}
		if err != nil {
			return fmt.Errorf("causallm: export %s: %w", name, err)
		}
		return nil
	}
	if err := get("model.embed_tokens.weight", llama.Embedding, -1); err != nil {
		return nil, err
	}
	if err := get("model.norm.weight", llama.FinalNorm, -1); err != nil {
		return nil, err
	}
	for i := 0; i < out.Blocks(); i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		for _, w := range []struct {
			name string
			part llama.Part
		}{
			{"input_layernorm.weight", llama.AttnNorm}, {"self_attn.q_proj.weight", llama.QProj}, {"self_attn.k_proj.weight", llama.KProj},
			{"self_attn.v_proj.weight", llama.VProj}, {"self_attn.o_proj.weight", llama.OProj}, {"post_attention_layernorm.weight", llama.MLPNorm},
			{"mlp.gate_proj.weight", llama.GateProj}, {"mlp.up_proj.weight", llama.UpProj}, {"mlp.down_proj.weight", llama.DownProj},
		} {
			if err := get(p+w.name, w.part, i); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
