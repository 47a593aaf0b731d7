// Package data defines what every data source of geloattack offers the sampler: a corpus of texts,
// each a sequence of hidden-state rows plus one text-level candidate embedding, and the stable
// train/val split of those texts.
package data

// Corpus is a read-only collection of texts with per-token hidden states (rows of width D) and a
// text-level candidate embedding (width E). Implementations must be safe for concurrent readers.
// Texts are addressed by index 0..NumTexts()-1; TextID gives the store's stable text_id.
type Corpus interface {
	// D is the width of a hidden-state row (d_model).
	D() int
	// E is the width of a text-level candidate embedding.
	E() int
	// NumTexts is the number of texts.
	NumTexts() int
	// TextID is the stable text_id of text i.
	TextID(i int) int64
	// NumTokens is the number of rows of text i.
	NumTokens(i int) int
	// Rows copies rows [start, start+n) of text i, converted to float32, into dst.
	// dst: (n, D) row-major, len(dst) >= n*D.
	Rows(i, start, n int, dst []float32) error
	// TextEmbedding copies the candidate embedding of text i into dst (len >= E).
	TextEmbedding(i int, dst []float32) error
}
