package gelo

import (
	"fmt"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/internal/sample"
)

// VictimTextID is the text id that a victim's rows carry in an Example made by ExampleWithVictim
// (in Positives, HText and RowText): the victim is not a text of the corpus. It differs from -1,
// the RowText of a synthetic shield row.
const VictimTextID int64 = -2

// stageVictim keys the stream that picks which positive slot the victim takes. It is a stage of
// its own, so no existing stream's draws change.
const stageVictim stage = 0x7669637469 // "victi"

// ExampleWithVictim draws example index of split as ExampleWith does, except that one of its
// positive texts is replaced by the victim: a text given by its hidden-state rows victim (t_v, D),
// computed by the caller with the same forward pass as the store's texts. Every other draw is
// ExampleWith's own: the number of positives, the other positives, tokens per text (so a victim
// longer than tokens_per_text contributes a window of its rows, at the offset the sampler would
// draw), shields, the permutation, A, the observed rows and the dtype rounding. Which positive slot
// the victim takes is drawn from a stream of its own (keyed by seed, split and index), uniformly
// among the example's positives; it is returned as slot.
//
// In the result, Positives[slot], and the HText and RowText of the victim's rows, are VictimTextID,
// and PositiveIdx[slot] is -1. ExampleWith itself and every stream it reads are unchanged.
func (s *Sampler) ExampleWithVictim(ws *Workspace, split data.Split, index int64, victim []float32) (ex *Example, slot int, err error) {
	texts := s.Texts(split)
	if texts == nil {
		return nil, 0, fmt.Errorf("gelo victim example: unknown split %v", split)
	}
	if index < 0 {
		return nil, 0, fmt.Errorf("gelo victim example: %s index %d, want >= 0", split, index)
	}
	d := s.c.D()
	if len(victim) == 0 || len(victim)%d != 0 {
		return nil, 0, fmt.Errorf("gelo victim example %s/%d: victim has %d values, want a positive multiple of d = %d", split, index, len(victim), d)
	}
	// The positives ExampleWith will pick: the same two draws it starts with.
	p := s.cfg.Positives.drawInt(stream(s.cfg.Seed, split, index, stageParams))
	picks := sample.Distinct(stream(s.cfg.Seed, split, index, stageTexts), len(texts), p)
	slot = stream(s.cfg.Seed, split, index, stageVictim).IntN(p)
	replaced := texts[picks[slot]]
	vc := &victimCorpus{Corpus: s.c, idx: replaced, rows: victim, n: len(victim) / d}
	// The replaced text keeps its text id inside the draw (so nothing that depends on ids moves);
	// the text lists are those of s, since a non-empty text is replaced by a non-empty one.
	sub := &Sampler{c: vc, cfg: s.cfg, texts: s.texts}
	ex, err = sub.ExampleWith(ws, split, index)
	if err != nil {
		return nil, 0, fmt.Errorf("victim example: %w", err)
	}
	if ex.PositiveIdx[slot] != replaced {
		return nil, 0, fmt.Errorf("gelo victim example %s/%d: positive slot %d is corpus text %d, expected %d (sampler draw order changed)",
			split, index, slot, ex.PositiveIdx[slot], replaced)
	}
	id := s.c.TextID(replaced)
	ex.Positives[slot] = VictimTextID
	ex.PositiveIdx[slot] = -1
	for i, t := range ex.HText {
		if t == id {
			ex.HText[i] = VictimTextID
		}
	}
	for i, t := range ex.RowText {
		if t == id && !ex.RowShield[i] { // donors are never positives, but be explicit
			ex.RowText[i] = VictimTextID
		}
	}
	return ex, slot, nil
}

// victimCorpus is a corpus with text idx's rows replaced by a victim's rows (n, D).
type victimCorpus struct {
	data.Corpus
	idx  int
	rows []float32 // (n, D)
	n    int
}

// NumTokens is the victim's row count for the replaced text.
func (v *victimCorpus) NumTokens(i int) int {
	if i == v.idx {
		return v.n
	}
	return v.Corpus.NumTokens(i)
}

// Rows copies the victim's rows for the replaced text.
func (v *victimCorpus) Rows(i, start, n int, dst []float32) error {
	if i != v.idx {
		return v.Corpus.Rows(i, start, n, dst)
	}
	d := v.Corpus.D()
	if start < 0 || n < 0 || start+n > v.n {
		return fmt.Errorf("victim rows [%d, %d) outside [0, %d)", start, start+n, v.n)
	}
	if len(dst) < n*d {
		return fmt.Errorf("victim rows: dst has %d values, want %d", len(dst), n*d)
	}
	copy(dst[:n*d], v.rows[start*d:(start+n)*d])
	return nil
}

// TextEmbedding refuses the victim (it has no candidate embedding); other texts pass through.
func (v *victimCorpus) TextEmbedding(i int, dst []float32) error {
	if i == v.idx {
		return fmt.Errorf("the victim text has no text embedding")
	}
	return v.Corpus.TextEmbedding(i, dst)
}
