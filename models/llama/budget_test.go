package llama

import "testing"

// The byte counts the resource pre-flight uses hold what the model really allocates (a decoder's
// cache and workspace are models/causallm's, checked there).
func TestBytesBoundAllocations(t *testing.T) {
	c := testConfig()
	m := randomModel(t, c, 1)
	weights := 0
	for _, tn := range c.Tensors(c.Layers) {
		weights += len(storage(t, m, tn.Part, tn.Block))
	}
	if got := c.WeightBytes(); got != 4*int64(weights) {
		t.Errorf("WeightBytes %d, the model holds %d", got, 4*weights)
	}
	for blocks := 1; blocks <= c.Layers; blocks++ {
		n := 0
		for _, tn := range c.Tensors(blocks) {
			n += tn.Elems()
		}
		if got := c.LoadedParams(blocks); got != int64(n) {
			t.Errorf("LoadedParams(%d) %d, its tensors hold %d", blocks, got, n)
		}
	}
}
