package decode

import (
	"context"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/gelo"
)

// Run refuses the combinations it cannot honour before any forward pass, each with an error that
// names what is wrong.
func TestOptionsRefused(t *testing.T) {
	m := newToy(20, 8, 3, 1)
	texts := [][]int{{1, 2, 3}}
	cfg := gelo.DefaultConfig()
	for _, c := range []struct {
		opt  Options
		want string
	}{
		{Options{Batches: 1, RankBag: 8}, "needs Rank"},
		{Options{Batches: 1, Rank: true, RankBag: -1}, "rank bag -1"},
		{Options{Batches: 1, Beam: -2}, "beam -2"},
		{Options{Batches: 1, MaxSteps: -1}, "max steps -1"},
		{Options{Batches: 1, Branch: -1}, "branch -1"},
		{Options{Batches: 1, ClaimLead: -0.5}, "claim lead -0.5"},
		{Options{Batches: 1, OrderTopK: 0.3}, "0.3"},
		{Options{Batches: 1, Blocks: []int{0}}, "one block >= 1"},
		{Options{Batches: 1, Blocks: []int{1}, BagOnly: true}, "the bag needs block 0"},
		{Options{Batches: 1, Blocks: []int{0, 3}}, "block 3 of a model with 3 blocks"},
		{Options{Batches: 0}, "batches 0"},
		{Options{Batches: 1, TextIDs: []int64{1, 2}}, "2 text ids for 1 texts"},
	} {
		c.opt.Sampler = cfg
		_, err := Run(context.Background(), m, texts, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want one with %q", c.opt, err, c.want)
		}
	}
}
