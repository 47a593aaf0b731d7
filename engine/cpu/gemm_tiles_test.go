package cpu

import "testing"

// TestGemmTiles: the tile counts of known shapes (the paper step's weight gradients keep two
// tiles, its 4112-row products get four, the language model's vocabulary products sixteen along
// the vocabulary), the side cut (C's longer), and bounds that cover each side exactly once, in
// order, on multiples of 16 where the tiles are wide.
func TestGemmTiles(t *testing.T) {
	cases := []struct {
		m, n, k int
		tiles   int
		byCols  bool
	}{
		{63, 64, 64, 1, false},          // under 16 * minParallel multiply-adds
		{384, 384, 4112, 2, false},      // paper: a 384 x 384 weight's gradient
		{384, 1536, 4112, 2, true},      // paper: the down projection's gradient
		{1536, 384, 4112, 2, false},     // paper: the gate/up gradient
		{4112, 1536, 384, 4, false},     // paper: the gate/up forward
		{512, 32000, 384, 16, true},     // language model: logits of one chunk
		{32000, 384, 512, 16, false},    // language model: the vocabulary's gradient
		{512, 384, 32000, 2, false},     // language model: the hidden rows' gradient
		{1100, 128, 128, 2, false},      // quickstart-sized
		{100000, 3, 3000, 16, false},    // at most 16
		{2, 1 << 20, 1 << 20, 16, true}, // long side only
	}
	for _, c := range cases {
		tiles, byCols := gemmTiles(c.m, c.n, c.k, minParallel)
		if tiles != c.tiles || (tiles > 1 && byCols != c.byCols) {
			t.Errorf("gemmTiles(%d, %d, %d) = %d tiles, by columns %v; want %d, %v", c.m, c.n, c.k, tiles, byCols, c.tiles, c.byCols)
		}
	}
	for _, n := range []int{2, 17, 384, 1031, 4112, 32000} {
		for _, tiles := range []int{1, 2, 4, 8, 16} {
			if tiles > n {
				continue
			}
			next := 0
			for j := range tiles {
				lo, hi := tileBounds(n, tiles, j)
				if lo != next || hi <= lo {
					t.Fatalf("n %d, %d tiles: tile %d is [%d, %d), want it to start at %d and be non-empty", n, tiles, j, lo, hi, next)
				}
				if n/tiles >= 64 && lo%16 != 0 {
					t.Errorf("n %d, %d tiles: tile %d starts at %d, not a multiple of 16", n, tiles, j, lo)
				}
				next = hi
			}
			if next != n {
				t.Errorf("n %d, %d tiles: the tiles end at %d", n, tiles, next)
			}
		}
	}
}
