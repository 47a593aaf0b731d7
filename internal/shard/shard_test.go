package shard

import "testing"

// N shards own every item exactly once, Items counts what Owns says, and Parse reads what String
// writes and refuses the rest.
func TestShardsPartitionItems(t *testing.T) {
	for n := 1; n <= 5; n++ {
		for total := 0; total <= 11; total++ {
			owners := make([]int, total)
			for i := range n {
				s, err := Parse(Shard{Index: i, Count: n}.String())
				if err != nil {
					t.Fatal(err)
				}
				count := 0
				for item := range total {
					if s.Owns(item) {
						owners[item]++
						count++
					}
				}
				if got := s.Items(total); got != count {
					t.Errorf("shard %s of %d items: Items %d, owns %d", s, total, got, count)
				}
			}
			for item, k := range owners {
				if k != 1 {
					t.Errorf("%d shards: item %d owned %d times", n, item, k)
				}
			}
		}
	}
	for _, bad := range []string{"", "1", "2/2", "0/0", "-1/2", "1/2x", "a/b", "1/-1", "1/2/3"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if All().Validate() != nil || (Shard{}).Validate() == nil {
		t.Error("All must be valid and the zero value invalid")
	}
}
