package assess

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/models/llama"
)

// secretSets is what content recovery keeps across batches: per template its candidate values
// (their fills checked against the batch's tokens per text before any work), and, made on first
// use, per scored block the embedder of the deployment's rows there and each template's
// candidates embedded by it.
type secretSets struct {
	d Deployment
	t *Target
	// values are each template's candidates; byText maps a template's filled text to its value.
	values [][]string
	byText []map[string]string
	// embedders are per block; sets per (template, block).
	embedders map[int]*content.Embedder
	sets      map[[2]int]*candidateSet
}

// candidateSet is one template's candidates embedded at one block, with their embedder.
type candidateSet struct {
	emb   *content.Embedder
	cands *content.Candidates
}

// openSecrets reads the candidate sets of d's templates (the name set from corpusDir's WordNet)
// and checks that every filled template is shorter than the batch's tokens per text: a longer
// one would be cut like a prompt, and the row after a claimed text (the end-of-text test) must be
// in U.
func openSecrets(d Deployment, t *Target, corpusDir string) (*secretSets, error) {
	s := &secretSets{d: d, t: t, embedders: map[int]*content.Embedder{}, sets: map[[2]int]*candidateSet{}}
	for i, tmpl := range d.Secrets.Templates {
		key := fmt.Sprintf("assess: secrets.templates[%d] (%s)", i, tmpl.Name)
		var vals []string
		var err error
		switch tmpl.Set {
		case SetPIN:
			vals = content.PINs()
		case SetDate:
			vals, err = content.Dates(DateYears[0], DateYears[1])
		case SetName:
			vals, err = content.Names(corpusDir)
		default:
			err = fmt.Errorf("set %q, want one of %v", tmpl.Set, SecretSets)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		vals = content.Subset(vals, tmpl.Candidates, d.Seed)
		byText := make(map[string]string, len(vals))
		longest, longestText := 0, ""
		for _, v := range vals {
			text := tmpl.template().Fill(v)
			byText[text] = v
			ids, err := t.Tok.Encode(text, true)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", key, text, err)
			}
			if len(ids) > longest {
				longest, longestText = len(ids), text
			}
		}
		if longest >= d.Batch.TokensPerText {
			return nil, fmt.Errorf("%s: %q is %d tokens (BOS included) and batch.tokens_per_text is %d: every filled template must be shorter, so that the row after a claimed secret's text is in U (the end-of-text test); raise batch.tokens_per_text or shorten the pattern",
				key, longestText, longest, d.Batch.TokensPerText)
		}
		s.values = append(s.values, vals)
		s.byText = append(s.byText, byText)
	}
	return s, nil
}

// embedder is the content embedder of the deployment's rows at block l: the attention input of
// block l (what the offloaded q/k/v projection reads), raw, BOS kept, texts cut to the batch's
// tokens per text, as assess's prompts are, described to content.NewDecoderEmbedder as the
// meta.json of a store extract of this model would describe it (a local wrapper: content reads
// a decoder's rows from a store's description).
func (s *secretSets) embedder(l int) (*content.Embedder, error) {
	if e, ok := s.embedders[l]; ok {
		return e, nil
	}
	t := s.t
	meta := store.Meta{D: t.D, E: t.D, Layer: l, DType: store.Float32, Norm: store.NormRaw, SpecialTokens: store.SpecialKept,
		MaxTokens: s.d.Batch.TokensPerText, Model: t.Name,
		Decoder: &store.DecoderMeta{Architecture: t.Architecture, Point: llama.AttnInput.String(), BOS: store.SpecialKept, TokenizerHash: t.TokHash}}
	e, err := content.NewDecoderEmbedder(t.LM, t.Decoder, t.Tok, meta)
	if err != nil {
		return nil, fmt.Errorf("block %d: %w", l, err)
	}
	if t.KeptRows != nil {
		e.ShareKeptRows(t.KeptRows)
	}
	s.embedders[l] = e
	return e, nil
}

// candidates are template ti's candidates embedded at block l, made on first use.
func (s *secretSets) candidates(ctx context.Context, ti, l int) (*candidateSet, error) {
	if c, ok := s.sets[[2]int{ti, l}]; ok {
		return c, nil
	}
	emb, err := s.embedder(l)
	if err != nil {
		return nil, err
	}
	cands, err := content.Embed(ctx, emb, s.d.Secrets.Templates[ti].template(), s.values[ti], nil)
	if err != nil {
		return nil, fmt.Errorf("secrets.templates[%d] at block %d: %w", ti, l, err)
	}
	cands.Keep() // scored against every victim's U at every setting: stacked and converted once
	c := &candidateSet{emb: emb, cands: cands}
	s.sets[[2]int{ti, l}] = c
	return c, nil
}

// victim is victim v's text and secret, given the candidate text content.Run drew for it: that
// text and its value, or for a look-alike one character longer (AbsentLonger) the template filled
// with the value and one more character of its last character's class (drawn by v's seed among
// the characters of the candidates) that makes no candidate.
func (s *secretSets) victim(v *SecretVictim, drawn string) (text, secret string, err error) {
	value, ok := s.byText[v.Template][drawn]
	if !ok {
		return "", "", fmt.Errorf("content drew %q, which is no candidate's text", drawn)
	}
	if v.Absent != AbsentLonger {
		return drawn, value, nil
	}
	rs := []rune(value)
	last := rs[len(rs)-1]
	alpha := content.Alphabet(s.values[v.Template])
	var same, other []rune
	for _, a := range alpha {
		if content.CharClass(a) == content.CharClass(last) {
			same = append(same, a)
		} else {
			other = append(other, a)
		}
	}
	rng := rand.New(rand.NewPCG(v.Seed, 0x10a9))
	rng.Shuffle(len(same), func(i, j int) { same[i], same[j] = same[j], same[i] })
	for _, a := range append(same, other...) {
		longer := value + string(a)
		if text := s.d.Secrets.Templates[v.Template].template().Fill(longer); !s.isCandidate(v.Template, text) {
			return text, longer, nil
		}
	}
	return "", "", fmt.Errorf("every candidate %q followed by one character is a candidate: no look-alike one character longer", value)
}

// isCandidate says text is a filled template of one of template ti's candidates.
func (s *secretSets) isCandidate(ti int, text string) bool {
	_, ok := s.byText[ti][text]
	return ok
}
