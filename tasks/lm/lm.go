// Package lm is the language-modelling task: next-token cross-entropy of the trainable decoder
// (models/causallm) over a packed token stream (data/tokens), and its evaluation beside the
// add-one unigram and bigram baselines on the same validation tokens. The training loop (package
// train, TrainLM) runs it.
package lm

import (
	"context"
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/tokens"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/models/causallm"
)

// Task trains a decoder on a token stream.
type Task struct {
	model  *causallm.Model
	stream *tokens.Stream
	seed   uint64
	batch  int
	// evalWins are each split's fixed evaluation windows; base their n-gram perplexities.
	evalWins [2][]int
	base     [2][2]float64
	buf      []int32
}

// New binds model to stream: each step takes batch windows (tokens.Stream.TrainBatch with seed),
// and each evaluation scores evalBatches*batch fixed windows per split.
func New(model *causallm.Model, stream *tokens.Stream, seed uint64, batch, evalBatches int) (*Task, error) {
	if stream.Seq != model.Config().Seq {
		return nil, fmt.Errorf("lm: stream windows of %d tokens, model sequences of %d", stream.Seq, model.Config().Seq)
	}
	if stream.Vocab != model.Vocab() {
		return nil, fmt.Errorf("lm: stream vocabulary %d, model vocabulary %d", stream.Vocab, model.Vocab())
	}
	t := &Task{model: model, stream: stream, seed: seed, batch: batch}
	var pairs [2][2][]int32 // per split: the previous and the target token of every scored position
	for _, sp := range []data.Split{data.Train, data.Val} {
		t.evalWins[sp] = stream.EvalWindows(sp, evalBatches*batch)
		for _, w := range t.evalWins[sp] {
			win := stream.Window(nil, sp, w)
			pairs[sp][0] = append(pairs[sp][0], win[:len(win)-1]...)
			pairs[sp][1] = append(pairs[sp][1], win[1:]...)
		}
	}
	// One pass over the train stream counts what both splits' baselines need.
	g := countNgrams(stream.Split(data.Train), stream.Vocab, pairs[:])
	for sp := range pairs {
		t.base[sp][0], t.base[sp][1] = g.ppl(pairs[sp][0], pairs[sp][1])
	}
	return t, nil
}

// Params is the model's parameter buffer.
func (t *Task) Params() *engine.Params { return t.model.Params() }

// Model is the decoder being trained.
func (t *Task) Model() *causallm.Model { return t.model }

// Step runs forward and backward of optimizer step `step`'s windows and returns the mean loss and
// the number of target tokens.
func (t *Task) Step(step int64) (float64, int64, error) {
	t.buf = t.stream.TrainBatch(t.buf[:0], t.seed, step, t.batch)
	l, err := t.model.ForwardBackward(t.buf, t.batch)
	return l, int64(t.batch * t.stream.Seq), err
}

// Evaluate scores the fixed windows of both splits: lm_loss, ppl (chance: the vocabulary size)
// and the unigram and bigram baselines' perplexities on the same tokens.
func (t *Task) Evaluate(ctx context.Context) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for _, sp := range []data.Split{data.Train, data.Val} {
		wins := t.evalWins[sp]
		var sum float64
		for i := 0; i < len(wins); i += t.batch {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			j := min(len(wins), i+t.batch)
			t.buf = t.buf[:0]
			for _, w := range wins[i:j] {
				t.buf = t.stream.Window(t.buf, sp, w)
			}
			l, err := t.model.Loss(t.buf, j-i)
			if err != nil {
				return nil, fmt.Errorf("lm: evaluate %s: %w", sp, err)
			}
			sum += l * float64(j-i)
		}
		loss := sum / float64(len(wins))
		out[sp.String()] = map[string]float64{
			eval.KeyLMLoss: loss, eval.KeyPerplexity: math.Exp(loss),
			eval.KeyPerplexity + eval.ChanceSuffix: float64(t.stream.Vocab),
			eval.KeyUnigramPPL:                     t.base[sp][0], eval.KeyBigramPPL: t.base[sp][1],
			"tokens": float64(len(wins) * t.stream.Seq),
		}
	}
	return out, nil
}
