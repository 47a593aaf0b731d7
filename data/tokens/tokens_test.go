package tokens

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/corpus"
)

// wordEncoder gives each space-separated word its length as id (ids 1..9), a stand-in tokenizer.
type wordEncoder struct{}

func (wordEncoder) Encode(text string, _ bool) ([]int, error) {
	var ids []int
	for _, w := range strings.Fields(text) {
		ids = append(ids, min(len(w), 9))
	}
	return ids, nil
}
func (wordEncoder) VocabSize() int { return 10 }

// TestBuildSplitsByTextID: every text lands whole, BOS first, on the side data.SplitOf gives its
// id, in source order; the counts add up.
func TestBuildSplitsByTextID(t *testing.T) {
	var texts []corpus.Text
	var want [2][]int32
	for id := int64(1); id <= 200; id++ {
		txt := strings.Repeat("ab ", int(id%5)+1) + "abcdefg"
		texts = append(texts, corpus.Text{ID: id, Text: txt})
		ids, _ := wordEncoder{}.Encode(txt, false)
		sp := data.SplitOf(id, 0.2)
		want[sp] = append(want[sp], 0)
		for _, x := range ids {
			want[sp] = append(want[sp], int32(x))
		}
	}
	s, err := Build(context.Background(), texts, wordEncoder{}, 0, 4, 0.2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range []data.Split{data.Train, data.Val} {
		if !slices.Equal(s.Split(sp), want[sp]) {
			t.Errorf("%s stream differs from the texts of its split in order", sp)
		}
	}
	if s.Texts[data.Train]+s.Texts[data.Val] != 200 || s.Texts[data.Val] == 0 {
		t.Errorf("texts per split %v", s.Texts)
	}
}

// TestTrainBatchesWalkEpochs: the windows of consecutive steps cover every train window once
// per epoch, step s's windows depend on (seed, s) alone (a resumed run draws the same ones), and
// another seed gives another order.
func TestTrainBatchesWalkEpochs(t *testing.T) {
	train := make([]int32, 4*37+1) // 37 windows of 4+1
	for i := range train {
		train[i] = int32(i)
	}
	s, err := FromTokens(train, train[:9], 200, 4)
	if err != nil {
		t.Fatal(err)
	}
	if s.Windows(data.Train) != 37 {
		t.Fatalf("%d windows, want 37", s.Windows(data.Train))
	}
	const B = 5
	var firsts []int32
	for step := int64(0); step < 37*3/B; step++ {
		b := s.TrainBatch(nil, 9, step, B)
		again := s.TrainBatch(nil, 9, step, B)
		if !slices.Equal(b, again) {
			t.Fatalf("step %d: two draws differ", step)
		}
		for j := 0; j < B; j++ {
			w := b[j*5 : j*5+5]
			if w[0]%4 != 0 || !slices.Equal(w, train[w[0]:w[0]+5]) {
				t.Fatalf("step %d window %d %v is not a window of the stream", step, j, w)
			}
			firsts = append(firsts, w[0])
		}
	}
	for e := 0; e+37 <= len(firsts); e += 37 {
		ep := slices.Clone(firsts[e : e+37])
		slices.Sort(ep)
		for k := range ep {
			if ep[k] != int32(4*k) {
				t.Fatalf("epoch %d does not use every window once: %v", e/37, ep)
			}
		}
	}
	if slices.Equal(s.TrainBatch(nil, 9, 0, B), s.TrainBatch(nil, 10, 0, B)) {
		t.Error("seeds 9 and 10 draw the same first batch")
	}
}

// TestRefusals: a split shorter than a window, and ids outside the vocabulary, are refused.
func TestRefusals(t *testing.T) {
	if _, err := FromTokens([]int32{1, 2, 3}, []int32{1, 2, 3, 4, 5}, 10, 4); err == nil {
		t.Error("a train split of 3 tokens accepted for windows of 4+1")
	}
	if _, err := FromTokens([]int32{1, 2, 3, 4, 12}, []int32{1, 2, 3, 4, 5}, 10, 4); err == nil {
		t.Error("id 12 accepted in a vocabulary of 10")
	}
	if _, err := Build(context.Background(), []corpus.Text{{ID: 1, Text: "a b"}}, wordEncoder{}, 0, 4, 0.5, 1); err == nil {
		t.Error("a source too short for one window per split accepted")
	}
}

// TestEvalWindowsSpread: evaluation windows are distinct, in range and spread over the split.
func TestEvalWindowsSpread(t *testing.T) {
	val := make([]int32, 2*100+1)
	s, err := FromTokens(val, val, 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	w := s.EvalWindows(data.Val, 10)
	if len(w) != 10 || w[0] != 0 || w[9] != 90 {
		t.Errorf("10 of 100 windows: %v", w)
	}
	if got := s.EvalWindows(data.Val, 1000); len(got) != 100 {
		t.Errorf("1000 of 100 windows gave %d", len(got))
	}
}
