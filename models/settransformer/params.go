package settransformer

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
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

// blockSpecs lists one pre-norm block's parameters under prefix (e.g. "layers.3."); cross adds the
// decoder's cross-attention sub-block. outStd is the std of the residual output projections.
func blockSpecs(prefix string, h, mlp int, cross bool, outStd float64) []ParamSpec {
	norm := func(name string) ParamSpec { return ParamSpec{Name: prefix + name, Shape: []int{h}, Const: 1} }
	lin := func(name string, out, in int, std float64) ParamSpec {
		return ParamSpec{Name: prefix + name, Shape: []int{out, in}, Std: std}
	}
	attn := func(sub string) []ParamSpec {
		return []ParamSpec{
			lin(sub+".q_proj.weight", h, h, InitStd),
			lin(sub+".k_proj.weight", h, h, InitStd),
			lin(sub+".v_proj.weight", h, h, InitStd),
			lin(sub+".o_proj.weight", h, h, outStd),
		}
	}
	specs := []ParamSpec{norm("attn_norm.weight")}
	specs = append(specs, attn("attn")...)
	if cross {
		specs = append(specs, norm("cross_norm.weight"))
		specs = append(specs, attn("cross_attn")...)
	}
	specs = append(specs,
		norm("mlp_norm.weight"),
		lin("mlp.gate_proj.weight", mlp, h, InitStd),
		lin("mlp.up_proj.weight", mlp, h, InitStd),
		lin("mlp.down_proj.weight", h, mlp, outStd),
	)
	return specs
}

// EncoderParamSpecs lists the encoder's parameters (input projection, CLS, blocks, final norm)
// in the order they are laid out in the parameter buffer. The unmix task has no CLS vector: its
// heads read the row states alone, and an unused parameter would only sit in every checkpoint.
func EncoderParamSpecs(c Config) []ParamSpec {
	h := c.Hidden
	outStd := InitStd / math.Sqrt(2*float64(c.Layers))
	specs := []ParamSpec{{Name: "in_proj.weight", Shape: []int{h, c.InputDim}, Std: InitStd}}
	if hasCLS(c) {
		specs = append(specs, ParamSpec{Name: "cls", Shape: []int{h}, Std: InitStd})
	}
	for i := 0; i < c.Layers; i++ {
		specs = append(specs, blockSpecs(fmt.Sprintf("layers.%d.", i), h, c.MLPHidden, false, outStd)...)
	}
	return append(specs, ParamSpec{Name: "norm.weight", Shape: []int{h}, Const: 1})
}

// ParamSpecs lists every parameter of the model c describes, with the exact SPEC §4 names, in
// buffer order. A learned temperature adds "log_tau" (shape [1], the log of tau, initialised from
// Config.Temperature), which SPEC §4 leaves unnamed. The unmix task's encoder has no "cls"; a
// dustbin OT loss adds "ot.dustbin_score" at model construction (see WithLoss), not here, because
// it belongs to the loss configuration rather than to the model's.
func ParamSpecs(c Config) ([]ParamSpec, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	specs := EncoderParamSpecs(c)
	h := c.Hidden
	switch c.Task {
	case TaskRetrieval:
		specs = append(specs, ParamSpec{Name: "retrieval_head.weight", Shape: []int{c.CandidateDim, h}, Std: InitStd})
		if c.LearnTemperature {
			specs = append(specs, ParamSpec{Name: "log_tau", Shape: []int{1}, Const: math.Log(c.Temperature)})
		}
	case TaskUnmix:
		outStd := InitStd / math.Sqrt(2*float64(c.DecLayers))
		specs = append(specs, ParamSpec{Name: "slots", Shape: []int{c.Slots, h}, Std: InitStd})
		for i := 0; i < c.DecLayers; i++ {
			specs = append(specs, blockSpecs(fmt.Sprintf("dec.layers.%d.", i), h, c.MLPHidden, true, outStd)...)
		}
		specs = append(specs,
			ParamSpec{Name: "dec.norm.weight", Shape: []int{h}, Const: 1},
			ParamSpec{Name: "row_head.weight", Shape: []int{c.InputDim, h}, Std: InitStd},
			ParamSpec{Name: "mix_head.q.weight", Shape: []int{h, h}, Std: InitStd},
			ParamSpec{Name: "mix_head.k.weight", Shape: []int{h, h}, Std: InitStd},
		)
	}
	return specs, nil
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
