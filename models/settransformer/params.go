package settransformer

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/gelo-research/geloattack/engine"
)

// InitStd is the standard deviation of the normal initialisation of every linear weight and the
// CLS vector (GPT-2's choice); output projections of residual branches get InitStd/sqrt(2L) so
// the residual stream's variance does not grow with depth.
const InitStd = 0.02

// ParamSpec is one named parameter: its SPEC §4 name, its shape in PyTorch layout ([out, in] for
// linear weights) and how it is initialised.
type ParamSpec struct {
	// Name is the checkpoint name, e.g. "layers.3.attn.q_proj.weight".
	Name string
	// Shape is the tensor shape; linear weights are [out, in].
	Shape []int
	// Std is the normal standard deviation; 0 means a constant fill with Const.
	Std float64
	// Const is the fill value when Std is 0 (1 for norm weights).
	Const float64
}

// Size is the number of elements of the parameter.
func (p ParamSpec) Size() int {
	n := 1
	for _, s := range p.Shape {
		n *= s
	}
	return n
}

// Init fills dst (len Size()) deterministically from seed and the parameter's name, so a
// parameter's initial values do not depend on which other parameters exist.
func (p ParamSpec) Init(dst []float32, seed uint64) error {
	if len(dst) != p.Size() {
		return fmt.Errorf("settransformer: init %s: buffer has %d elements, shape %v needs %d", p.Name, len(dst), p.Shape, p.Size())
	}
	if p.Std == 0 {
		for i := range dst {
			dst[i] = float32(p.Const)
		}
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte(p.Name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	for i := range dst {
		dst[i] = float32(rng.NormFloat64() * p.Std)
	}
	return nil
}

// paramBuilder registers a model's parameters: each call names one parameter once, records its
// spec (shape and initialisation) and registers it in the engine.Params with the project's decay
// rule, returning the tensor the model's structs hold. Building a model and listing its specs run
// the same code, so the two cannot disagree and no name is looked up at run time.
type paramBuilder struct {
	ps      *engine.Params
	specs   []ParamSpec      // in registration (and checkpoint) order
	tensors []*engine.Tensor // tensors[i] is specs[i]
}

// newParamBuilder returns a builder over a fresh parameter table.
func newParamBuilder() *paramBuilder { return &paramBuilder{ps: engine.NewParams()} }

// add registers s; the tensor has storage once the builder's table is allocated.
func (b *paramBuilder) add(s ParamSpec) *engine.Tensor {
	t := b.ps.Add(s.Name, s.Shape, engine.DefaultDecay(s.Name, s.Shape))
	b.specs = append(b.specs, s)
	b.tensors = append(b.tensors, t)
	return t
}

// linear registers a linear layer's weight, (out, in) in PyTorch layout, drawn with std.
func (b *paramBuilder) linear(name string, out, in int, std float64) *engine.Tensor {
	return b.add(ParamSpec{Name: name, Shape: []int{out, in}, Std: std})
}

// norm registers an RMSNorm weight of width h, initialised to ones.
func (b *paramBuilder) norm(name string, h int) *engine.Tensor {
	return b.add(ParamSpec{Name: name, Shape: []int{h}, Const: 1})
}

// normal registers a free tensor (a vector, the slots) drawn with std.
func (b *paramBuilder) normal(name string, shape []int, std float64) *engine.Tensor {
	return b.add(ParamSpec{Name: name, Shape: shape, Std: std})
}

// constant registers a free tensor filled with v.
func (b *paramBuilder) constant(name string, shape []int, v float64) *engine.Tensor {
	return b.add(ParamSpec{Name: name, Shape: shape, Const: v})
}

// alloc allocates the table on be and initialises every registered parameter from seed (see
// ParamSpec.Init). Parameters registered on b.ps directly (a loss's) are left to their owner.
func (b *paramBuilder) alloc(be engine.Backend, seed uint64) error {
	if err := b.ps.Alloc(be); err != nil {
		return fmt.Errorf("settransformer: allocate %d parameters: %w", b.ps.Len(), err)
	}
	for i, s := range b.specs {
		buf := make([]float32, s.Size())
		if err := s.Init(buf, seed); err != nil {
			return err
		}
		if err := b.tensors[i].CopyFrom(buf); err != nil {
			return fmt.Errorf("settransformer: initialise %s: %w", s.Name, err)
		}
	}
	return nil
}

// attn registers one attention sub-block's q, k, v and o projections under prefix (e.g.
// "layers.3.attn"); outStd is the std of the output projection, which feeds the residual stream.
// q, k and v are registered one after another, so the table can view the projections of one
// input as one weight for the fused projection: q, k, v as (3h, h) for self-attention, k, v as
// (2h, h) for cross-attention (whose queries come from another input).
func (b *paramBuilder) attn(prefix string, h int, outStd float64, cross bool) attnWeights {
	wq := b.linear(prefix+".q_proj.weight", h, h, InitStd)
	wk := b.linear(prefix+".k_proj.weight", h, h, InitStd)
	wv := b.linear(prefix+".v_proj.weight", h, h, InitStd)
	w := attnWeights{wo: b.linear(prefix+".o_proj.weight", h, h, outStd)}
	if cross {
		w.wq, w.in = wq, b.ps.Stack(prefix+".kv_proj (stack)", wk, wv)
	} else {
		w.in = b.ps.Stack(prefix+".qkv_proj (stack)", wq, wk, wv)
	}
	return w
}

// block registers one pre-norm block under prefix (e.g. "layers.3."): self-attention, then, when
// cross is set, the decoder's cross-attention sub-block, then the MLP, in that registration order.
// outStd is the std of the residual output projections.
func (b *paramBuilder) block(prefix string, h, mlp int, cross bool, outStd float64) decBlock {
	var d decBlock
	d.attnNorm = b.norm(prefix+"attn_norm.weight", h)
	d.attn = b.attn(prefix+"attn", h, outStd, false)
	if cross {
		d.crossNorm = b.norm(prefix+"cross_norm.weight", h)
		d.cross = b.attn(prefix+"cross_attn", h, outStd, true)
	}
	d.mlpNorm = b.norm(prefix+"mlp_norm.weight", h)
	d.gate = b.linear(prefix+"mlp.gate_proj.weight", mlp, h, InitStd)
	d.up = b.linear(prefix+"mlp.up_proj.weight", mlp, h, InitStd)
	d.down = b.linear(prefix+"mlp.down_proj.weight", h, mlp, outStd)
	return d
}

// taskParams are the task-specific parameters that follow the encoder: the retrieval head, or
// the unmix decoder and heads.
type taskParams struct {
	retrieval *engine.Tensor // retrieval_head.weight (e, h); retrieval task
	logTau    *engine.Tensor // log_tau (1); retrieval task with a learned temperature
	dec       *Decoder       // unmix task
	rowHead   *engine.Tensor // row_head.weight (d, h); unmix task
	mixQ      *engine.Tensor // mix_head.q.weight (h, h); unmix task
	mixK      *engine.Tensor // mix_head.k.weight (h, h); unmix task
}

// declare registers every parameter of the model c describes (c valid) and returns the structs
// that hold them: the encoder, then the task's parameters (the retrieval head and log_tau, or the
// unmix decoder and heads), in that order (ParamSpecs documents it).
func (b *paramBuilder) declare(c Config) (*Encoder, taskParams) {
	enc := b.encoder(c)
	h := c.Hidden
	var hd taskParams
	switch c.Task {
	case TaskRetrieval:
		hd.retrieval = b.linear("retrieval_head.weight", c.CandidateDim, h, InitStd)
		if c.LearnTemperature {
			hd.logTau = b.constant("log_tau", []int{1}, math.Log(c.Temperature))
		}
	case TaskUnmix:
		hd.dec = b.decoder(c)
		hd.rowHead = b.linear("row_head.weight", c.InputDim, h, InitStd)
		hd.mixQ = b.linear("mix_head.q.weight", h, h, InitStd)
		hd.mixK = b.linear("mix_head.k.weight", h, h, InitStd)
	}
	return enc, hd
}

// EncoderParamSpecs lists the encoder's parameters (input projection, CLS, blocks, final norm)
// in registration order (that of Params.Views and checkpoints). The unmix task has no CLS vector: its
// heads read the row states alone, and an unused parameter would only sit in every checkpoint.
func EncoderParamSpecs(c Config) []ParamSpec {
	b := newParamBuilder()
	b.encoder(c)
	return b.specs
}

// ParamSpecs lists every parameter of the model c describes, with the exact SPEC §4 names, in
// registration order (the order of Params.Views and of checkpoints). A learned temperature adds
// "log_tau" (shape [1], the log of tau, initialised from Config.Temperature), which SPEC §4 leaves
// unnamed. The unmix task's encoder has no "cls"; a dustbin OT loss adds "ot.dustbin_score" at
// model construction (see WithLoss), not here, because it belongs to the loss configuration
// rather than to the model's. The list comes from the code that builds the model, registering
// into a table that is never allocated.
func ParamSpecs(c Config) ([]ParamSpec, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := newParamBuilder()
	b.declare(c)
	return b.specs, nil
}

// NumParams is the total number of scalars in ParamSpecs(c).
func NumParams(c Config) (int, error) {
	specs, err := ParamSpecs(c)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range specs {
		n += s.Size()
	}
	return n, nil
}
