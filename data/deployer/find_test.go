package deployer

import (
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/store"
)

// npzText is a text of d-wide rows whose values name it (row r of text id holds id*100 + r), at
// positions first, first+1, ...
func npzText(id int64, d, first int, tokens ...int32) store.NPZRows {
	t := store.NPZRows{ID: id, D: d, Tokens: tokens}
	for r := range tokens {
		t.Positions = append(t.Positions, int32(first+r))
		for range d {
			t.Rows = append(t.Rows, float32(id*100+int64(r)))
		}
	}
	return t
}

// Find looks a text up by its tokens: the lowest id of equal texts (an input with a text per
// victim, a secret drawn twice, as recover -deployer-texts wrote before it deduplicated), whatever
// order the texts come in; another block's texts are not this block's; a text whose BOS rows the
// deployer dropped serves no lookup, and the refusal says so; tokens no text has are refused.
func TestFindLooksTextsUpByTokens(t *testing.T) {
	const d = 2
	r := &Rows{Info: Info{HiddenSize: d, BOS: store.SpecialKept}, byBlock: map[int]map[int64]store.NPZRows{}, byTokens: map[int]map[string]int64{}}
	if err := r.add(3, []store.NPZRows{
		npzText(7, d, 0, 1, 5, 6),
		npzText(2, d, 0, 1, 5, 6), // the same tokens at a lower id, listed later
		npzText(4, d, 0, 1, 5),
		npzText(9, d, 1, 5, 6, 6), // BOS row dropped: positions from 1
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.add(1, []store.NPZRows{npzText(0, d, 0, 1, 8)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tokens []int
		id     int64
	}{{[]int{1, 5, 6}, 2}, {[]int{1, 5}, 4}} {
		id, x, err := r.Find(c.tokens, 3)
		if err != nil || id != c.id || len(x) != len(c.tokens)*d || x[0] != float32(c.id*100) || x[len(x)-1] != float32(c.id*100+int64(len(c.tokens)-1)) {
			t.Errorf("Find(%v): id %d, rows %v, %v; want text %d's rows", c.tokens, id, x, err, c.id)
		}
	}
	for _, c := range []struct {
		tokens []int
		block  int
		want   string
	}{
		{[]int{1, 8}, 3, "none of the run's 4 texts is these 2 tokens"},
		{[]int{5, 6, 6}, 3, "none of the run's 4 texts"},
		{[]int{1, 5, 6}, 2, "block 2 not read"},
		{[]int{1, 5, 6, 7}, 3, "none of the run's 4 texts"},
		{[]int{1 << 40}, 3, "no token id"},
	} {
		if _, _, err := r.Find(c.tokens, c.block); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Find(%v, block %d): %v; want an error saying %q", c.tokens, c.block, err, c.want)
		}
	}
	if id, _, err := r.Find([]int{1, 8}, 1); err != nil || id != 0 {
		t.Errorf("block 1's text: id %d, %v", id, err)
	}
	r.Info.BOS = store.SpecialDropped
	if _, _, err := r.Find([]int{1, 5, 6, 6}, 3); err == nil || !strings.Contains(err.Error(), "without --drop-bos") {
		t.Errorf("a run that dropped BOS rows: %v; want the refusal to say to rerun without --drop-bos", err)
	}
	if got := tokenKey([]int32{1, 256}); !slices.Equal([]byte(got), []byte{1, 0, 0, 0, 0, 1, 0, 0}) || tokenKey([]int32{1, 2}) == tokenKey([]int32{2, 1}) {
		t.Errorf("tokenKey: %v", []byte(got))
	}
}
