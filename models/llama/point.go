package llama

import "fmt"

// Point names a place in a decoder's forward pass (models/causallm's Decoder) where a Tap sees
// the rows.
type Point int

// Points a Tap sees, in the order of the forward pass.
const (
	// Residual at layer L < Layers is the input of block L (Hugging Face's hidden_states[L]; 0 is
	// the token embedding); at L = Layers it is the final RMSNorm's output (hidden_states[Layers]).
	Residual Point = iota
	// AttnInput at layer L is RMSNorm(h_L)·g_L, block L's input after input_layernorm: the rows
	// that the q, k and v projections read.
	AttnInput
)

// String names the point as the CLI does.
func (p Point) String() string {
	switch p {
	case Residual:
		return "residual"
	case AttnInput:
		return "attn-input"
	}
	return fmt.Sprintf("Point(%d)", int(p))
}

// Tap receives the rows x (n, d) of every sequence of the batch at one point of one layer, rows in
// batch order (each sequence's rows after the previous one's). x is read-only and valid only
// during the call. An error stops the forward pass, which returns it wrapped.
type Tap func(p Point, layer int, x []float32) error
