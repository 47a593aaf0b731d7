// Package tokens is the token stream of language-model training: texts tokenized, split by text id
// into train and val with the stores' rule (data.SplitOf), each split's texts concatenated in
// source order (each opened by the tokenizer's BOS) and cut into windows of T+1 tokens, packed
// without padding (a window may span the end of one text and the start of the next, as
// pretraining streams do). A step's windows are a seeded permutation of the train windows, epoch
// by epoch, so batch s depends on (seed, s) alone and a resumed run draws exactly the same ones.
package tokens

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/corpus"
)

// Encoder turns text into token ids (data/bpe's Tokenizer).
type Encoder interface {
	// Encode returns the ids of text; addSpecial adds the tokenizer's own special tokens.
	Encode(text string, addSpecial bool) ([]int, error)
	// VocabSize is the number of ids.
	VocabSize() int
}

// Stream is the tokenized train and val streams of a text source.
type Stream struct {
	// Vocab is the vocabulary size; every id is below it.
	Vocab int
	// Seq is T: a window holds T+1 tokens (T inputs, T targets shifted by one).
	Seq int
	// Texts and Tokens count each split's texts and tokens, indexed by data.Split.
	Texts, Tokens [2]int
	toks          [2][]int32
}

// Build tokenizes texts on workers goroutines and splits them by id with valFrac. bos >= 0 is
// put before every text (the decoder sees one at position 0 of every prompt); negative: none.
func Build(ctx context.Context, texts []corpus.Text, enc Encoder, bos, seq int, valFrac float64, workers int) (*Stream, error) {
	if seq < 1 {
		return nil, fmt.Errorf("tokens: sequence length %d, want >= 1", seq)
	}
	vocab := enc.VocabSize()
	if bos >= vocab {
		return nil, fmt.Errorf("tokens: BOS id %d outside the vocabulary of %d", bos, vocab)
	}
	ids := make([][]int32, len(texts))
	errs := make([]error, len(texts))
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < max(1, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := int(next)
				next++
				mu.Unlock()
				if i >= len(texts) || ctx.Err() != nil {
					return
				}
				raw, err := enc.Encode(texts[i].Text, false)
				if err != nil {
					errs[i] = fmt.Errorf("tokens: text %d: %w", texts[i].ID, err)
					continue
				}
				out := make([]int32, 0, len(raw)+1)
				if bos >= 0 {
					out = append(out, int32(bos))
				}
				for _, id := range raw {
					if id < 0 || id >= vocab {
						errs[i] = fmt.Errorf("tokens: text %d: id %d outside the vocabulary of %d", texts[i].ID, id, vocab)
						break
					}
					out = append(out, int32(id))
				}
				ids[i] = out
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Stream{Vocab: vocab, Seq: seq}
	for i, t := range texts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		sp := data.SplitOf(t.ID, valFrac)
		s.toks[sp] = append(s.toks[sp], ids[i]...)
		s.Texts[sp]++
	}
	for sp := range s.toks {
		s.Tokens[sp] = len(s.toks[sp])
	}
	for _, sp := range []data.Split{data.Train, data.Val} {
		if s.Windows(sp) < 1 {
			return nil, fmt.Errorf("tokens: the %s split has %d tokens in %d texts, fewer than one window of %d+1", sp, s.Tokens[sp], s.Texts[sp], seq)
		}
	}
	return s, nil
}

// FromTokens is a Stream over given train and val token streams (tests, and callers that
// tokenize themselves).
func FromTokens(train, val []int32, vocab, seq int) (*Stream, error) {
	s := &Stream{Vocab: vocab, Seq: seq, toks: [2][]int32{train, val}, Tokens: [2]int{len(train), len(val)}}
	for sp, ts := range s.toks {
		for i, id := range ts {
			if id < 0 || int(id) >= vocab {
				return nil, fmt.Errorf("tokens: %s token %d is %d, outside the vocabulary of %d", data.Split(sp), i, id, vocab)
			}
		}
		if s.Windows(data.Split(sp)) < 1 {
			return nil, fmt.Errorf("tokens: the %s split has %d tokens, fewer than one window of %d+1", data.Split(sp), len(ts), seq)
		}
	}
	return s, nil
}

// Tokens of a split, in stream order (shared: do not modify).
func (s *Stream) Split(sp data.Split) []int32 { return s.toks[sp] }

// Windows is the number of whole windows of a split: window w is tokens [wT, wT+T].
func (s *Stream) Windows(sp data.Split) int {
	n := len(s.toks[sp])
	if n < s.Seq+1 {
		return 0
	}
	return (n - 1) / s.Seq
}

// Window appends window w of a split (T+1 tokens) to dst.
func (s *Stream) Window(dst []int32, sp data.Split, w int) []int32 {
	T := s.Seq
	return append(dst, s.toks[sp][w*T:w*T+T+1]...)
}

// TrainBatch is the windows of optimizer step `step` (0-based), B of them: (B, T+1) row-major,
// appended to dst. Steps walk a seeded permutation of the train windows, a new permutation each
// epoch, so every window is used once per epoch and step s depends on (seed, s) alone.
func (s *Stream) TrainBatch(dst []int32, seed uint64, step int64, B int) []int32 {
	n := int64(s.Windows(data.Train))
	var perm []int
	epoch := int64(-1)
	for j := int64(0); j < int64(B); j++ {
		k := step*int64(B) + j
		if e := k / n; e != epoch {
			epoch = e
			perm = rand.New(rand.NewPCG(seed, uint64(epoch)^0x6c6d5f6570)).Perm(int(n))
		}
		dst = s.Window(dst, data.Train, perm[k%n])
	}
	return dst
}

// EvalWindows is the fixed evaluation windows of a split: `count` windows spread evenly over the
// split's stream (all windows when it has fewer), the same for every evaluation of a run.
func (s *Stream) EvalWindows(sp data.Split, count int) []int {
	n := s.Windows(sp)
	if count >= n {
		count = n
	}
	out := make([]int, count)
	for i := range out {
		out[i] = int(int64(i) * int64(n) / int64(count))
	}
	return out
}
