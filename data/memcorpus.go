package data

import "fmt"

// MemCorpus is an in-memory Corpus: the synthetic default store and tests use it.
type MemCorpus struct {
	d, e  int
	ids   []int64
	rows  [][]float32 // rows[i]: (n_i, d); one slice per text so that Add never moves the corpus
	emb   []float32   // emb: (texts, e)
	index map[int64]int
}

// NewMemCorpus returns an empty corpus of row width d and embedding width e.
func NewMemCorpus(d, e int) *MemCorpus {
	return &MemCorpus{d: d, e: e, index: map[int64]int{}}
}

// Add appends a text. rows: (n, d) row-major; emb: (e). Both are copied.
func (m *MemCorpus) Add(textID int64, rows []float32, emb []float32) error {
	if len(rows) == 0 || len(rows)%m.d != 0 {
		return fmt.Errorf("text %d: %d row values is not a positive multiple of d=%d", textID, len(rows), m.d)
	}
	if len(emb) != m.e {
		return fmt.Errorf("text %d: embedding has %d values, want e=%d", textID, len(emb), m.e)
	}
	if _, dup := m.index[textID]; dup {
		return fmt.Errorf("text %d: duplicate text id", textID)
	}
	m.index[textID] = len(m.ids)
	m.ids = append(m.ids, textID)
	m.rows = append(m.rows, append([]float32(nil), rows...))
	m.emb = append(m.emb, emb...)
	return nil
}

// D is the row width.
func (m *MemCorpus) D() int { return m.d }

// E is the candidate embedding width.
func (m *MemCorpus) E() int { return m.e }

// NumTexts is the number of texts.
func (m *MemCorpus) NumTexts() int { return len(m.ids) }

// TextID is the text_id of text i.
func (m *MemCorpus) TextID(i int) int64 { return m.ids[i] }

// IndexOf returns the index of a text id and whether it exists.
func (m *MemCorpus) IndexOf(textID int64) (int, bool) {
	i, ok := m.index[textID]
	return i, ok
}

// NumTokens is the number of rows of text i.
func (m *MemCorpus) NumTokens(i int) int { return len(m.rows[i]) / m.d }

// Rows copies rows [start, start+n) of text i into dst: (n, d).
func (m *MemCorpus) Rows(i, start, n int, dst []float32) error {
	if i < 0 || i >= len(m.ids) {
		return fmt.Errorf("text index %d out of range [0, %d)", i, len(m.ids))
	}
	if start < 0 || n < 0 || start+n > m.NumTokens(i) {
		return fmt.Errorf("text %d: rows [%d, %d) out of range [0, %d)", m.ids[i], start, start+n, m.NumTokens(i))
	}
	if len(dst) < n*m.d {
		return fmt.Errorf("text %d: destination holds %d values, need %d", m.ids[i], len(dst), n*m.d)
	}
	copy(dst[:n*m.d], m.rows[i][start*m.d:(start+n)*m.d])
	return nil
}

// TextEmbedding copies the candidate embedding of text i into dst.
func (m *MemCorpus) TextEmbedding(i int, dst []float32) error {
	if i < 0 || i >= len(m.ids) {
		return fmt.Errorf("text index %d out of range [0, %d)", i, len(m.ids))
	}
	if len(dst) < m.e {
		return fmt.Errorf("text %d: destination holds %d values, need e=%d", m.ids[i], len(dst), m.e)
	}
	copy(dst[:m.e], m.emb[i*m.e:(i+1)*m.e])
	return nil
}

var _ Corpus = (*MemCorpus)(nil)
