package settransformer

import (
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
)

// decBlock is one decoder block: a pre-norm block whose self-attention runs over the slots, plus a
// cross-attention sub-block from the slots to the encoder rows.
type decBlock struct {
	block
	crossNorm *engine.Tensor // (h)
	cross     attnWeights
}

// Decoder is the unmixing decoder of SPEC §4: S learned slot queries, the same for every set,
// refined by DecLayers pre-norm blocks (self-attention over the slots, cross-attention to the
// encoder rows, SwiGLU) and a final RMSNorm. Slot j's final state is the model's j-th predicted
// clean row (through the row head). The slots are ordered, the encoder rows are not: permuting
// the rows of U leaves every slot state unchanged.
type Decoder struct {
	heads  int
	eps    float32        // the RMSNorm epsilon of every norm (Config.Eps)
	slots  *engine.Tensor // (S, h)
	layers []decBlock
	norm   *engine.Tensor // (h)
}

// decoder registers the decoder's parameters on b, in this order: "slots", the blocks
// "dec.layers.{i}.…" (with cross-attention) and "dec.norm.weight".
func (b *paramBuilder) decoder(c Config) *Decoder {
	h := c.Hidden
	outStd := InitStd / math.Sqrt(2*float64(c.DecLayers))
	d := &Decoder{heads: c.Heads, eps: float32(c.Eps), slots: b.normal("slots", []int{c.Slots, h}, InitStd)}
	for i := 0; i < c.DecLayers; i++ {
		d.layers = append(d.layers, b.block(fmt.Sprintf("dec.layers.%d.", i), h, c.MLPHidden, true, outStd))
	}
	d.norm = b.norm("dec.norm.weight", h)
	return d
}

// Forward records the decoder on tp: enc (B, N, h) the encoder's row states, mask (B, N) with 1
// for real rows (nil: all real) -> z (B, S, h), the final-norm slot states. Per block:
// z += SelfAttn(RMSNorm(z)); z += CrossAttn(RMSNorm(z), enc); z += SwiGLU(RMSNorm(z)). The
// encoder rows enter cross-attention as they are: they already carry the encoder's final norm.
func (d *Decoder) Forward(tp *engine.Tape, enc, mask *engine.Tensor) *engine.Tensor {
	z := tp.Broadcast(d.slots, enc.Dim(0)) // (B, S, h)
	for i := range d.layers {
		b := &d.layers[i]
		a := tp.RMSNorm(z, b.attnNorm, d.eps)
		z = tp.Add(z, b.attn.selfAttend(tp, a, nil, d.heads)) // every slot is real
		c := tp.RMSNorm(z, b.crossNorm, d.eps)
		z = tp.Add(z, b.cross.crossAttend(tp, c, enc, mask, d.heads))
		z = b.feedForward(tp, z, d.eps)
	}
	return tp.RMSNorm(z, d.norm, d.eps)
}
