package decode

import (
	"encoding/json"
	"math"
	"testing"
)

// The layout results.jsonl has always held: a result's fields in their order, then its figures
// that may be non-finite in floatFields' order (null where not finite), then the side object.
func TestResultJSONLayout(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Text{Tokens: []int{1, 2}, Excess: math.Inf(-1), Lead: 1.5, Claimed: true, Match: 0},
			`{"tokens":[1,2],"claimed":true,"match":0,"excess":null,"lead":1.5,"nonfinite":{"excess":"-Inf"}}`},
		{Text{Tokens: []int{3}, Excess: -2, Lead: 0.25, Match: -1, Open: true},
			`{"tokens":[3],"claimed":false,"open":true,"match":-1,"excess":-2,"lead":0.25}`},
		{Summary{Batches: 1, Planned: 2, Texts: 4, Exact: math.NaN(), TokenAcc: 0.5, WorstBagMargin: math.Inf(1), BagMarginTopK: 1e-9, BagRankRecallTopK: math.NaN(), D: 8},
			`{"batches":1,"planned_batches":2,"texts":4,"claims":0,"claims_right":0,"overclaimed_batches":0,"forwards":0,"bag_precision":0,"bag_recall":0,"bag_rank_recall":0,"worst_bag_rank":0,"rank":null,"d":8,` +
				`"exact":null,"token_accuracy":0.5,"worst_bag_margin":null,"bag_margin_topk":1e-9,"bag_rank_recall_topk":null,"nonfinite":{"bag_rank_recall_topk":"NaN","exact":"NaN","worst_bag_margin":"+Inf"}}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%T encodes as\n%s\nwant\n%s", c.v, b, c.want)
		}
	}
}
