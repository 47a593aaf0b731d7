package bert

import (
	"fmt"
	"slices"
)

// TensorSpec is one weight tensor of a BERT checkpoint: its name as Hugging Face's BertModel saves
// it (a task model's checkpoint may add a "bert." prefix) and its shape; a matrix keeps PyTorch's
// nn.Linear layout, (out, in).
type TensorSpec struct {
	Name  string
	Shape []int

	layer int    // the block it belongs to; -1 for the embeddings
	part  weight // which of the model's weights it fills
}

// weight names a weight of the model, so that the loader places a tensor without parsing its name.
type weight int

const (
	wordEmb weight = iota
	posEmb
	typeEmb
	embNormW
	embNormB
	queryW // query, key and value alternate weight, bias: stacked() relies on the order
	queryB
	keyW
	keyB
	valueW
	valueB
	attnOutW
	attnOutB
	attnNormW
	attnNormB
	ffnInW
	ffnInB
	ffnOutW
	ffnOutB
	ffnNormW
	ffnNormB
)

// Tensors lists every tensor a BERT with cfg's shapes is read from, in the order BertModel
// registers them: the embeddings, then each block's attention, its norm, the feed-forward and its
// norm. LoadModel reads exactly these and ignores any other tensor of the file (the pooler's).
func Tensors(cfg Config) []TensorSpec {
	h, f := cfg.HiddenSize, cfg.IntermediateSize
	out := []TensorSpec{
		{"embeddings.word_embeddings.weight", []int{cfg.VocabSize, h}, -1, wordEmb},
		{"embeddings.position_embeddings.weight", []int{cfg.MaxPositions, h}, -1, posEmb},
		{"embeddings.token_type_embeddings.weight", []int{cfg.TypeVocabSize, h}, -1, typeEmb},
		{"embeddings.LayerNorm.weight", []int{h}, -1, embNormW},
		{"embeddings.LayerNorm.bias", []int{h}, -1, embNormB},
	}
	block := []struct {
		name  string
		shape []int
		part  weight
	}{
		{"attention.self.query.weight", []int{h, h}, queryW},
		{"attention.self.query.bias", []int{h}, queryB},
		{"attention.self.key.weight", []int{h, h}, keyW},
		{"attention.self.key.bias", []int{h}, keyB},
		{"attention.self.value.weight", []int{h, h}, valueW},
		{"attention.self.value.bias", []int{h}, valueB},
		{"attention.output.dense.weight", []int{h, h}, attnOutW},
		{"attention.output.dense.bias", []int{h}, attnOutB},
		{"attention.output.LayerNorm.weight", []int{h}, attnNormW},
		{"attention.output.LayerNorm.bias", []int{h}, attnNormB},
		{"intermediate.dense.weight", []int{f, h}, ffnInW},
		{"intermediate.dense.bias", []int{f}, ffnInB},
		{"output.dense.weight", []int{h, f}, ffnOutW},
		{"output.dense.bias", []int{h}, ffnOutB},
		{"output.LayerNorm.weight", []int{h}, ffnNormW},
		{"output.LayerNorm.bias", []int{h}, ffnNormB},
	}
	for i := range cfg.NumLayers {
		p := fmt.Sprintf("encoder.layer.%d.", i)
		for _, t := range block {
			out = append(out, TensorSpec{p + t.name, slices.Clone(t.shape), i, t.part})
		}
	}
	return out
}

// Elems is the tensor's element count.
func (s TensorSpec) Elems() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// weightOf allocates the weight of m that s fills and returns the slice to read s into: for the
// query, key and value, their third of the block's stacked projection, so that one GEMM projects
// all three.
func (m *Model) weightOf(s TensorSpec) []float32 {
	n := s.Elems()
	if s.layer < 0 {
		return alloc(map[weight]*[]float32{
			wordEmb: &m.wordEmb, posEmb: &m.posEmb, typeEmb: &m.typeEmb, embNormW: &m.embLNW, embNormB: &m.embLNB,
		}[s.part], n)
	}
	l := &m.layers[s.layer]
	switch s.part {
	case queryW, keyW, valueW:
		return stacked(&l.qkvW, n, int(s.part-queryW)/2)
	case queryB, keyB, valueB:
		return stacked(&l.qkvB, n, int(s.part-queryB)/2)
	}
	return alloc(map[weight]*[]float32{
		attnOutW: &l.outW, attnOutB: &l.outB, attnNormW: &l.ln1W, attnNormB: &l.ln1B,
		ffnInW: &l.ffnW1, ffnInB: &l.ffnB1, ffnOutW: &l.ffnW2, ffnOutB: &l.ffnB2, ffnNormW: &l.ln2W, ffnNormB: &l.ln2B,
	}[s.part], n)
}

// alloc makes *dst n long and returns it.
func alloc(dst *[]float32, n int) []float32 {
	*dst = make([]float32, n)
	return *dst
}

// stacked returns part i (0 query, 1 key, 2 value) of the stacked (3n) weight *dst, allocating it
// on first use.
func stacked(dst *[]float32, n, i int) []float32 {
	if *dst == nil {
		*dst = make([]float32, 3*n)
	}
	return (*dst)[i*n : (i+1)*n]
}
