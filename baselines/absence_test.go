package baselines

import "testing"

// ProvenAbsent: a text is absent only when no sample the sampler could take from it passes:
// under window sampling no run of take passing rows, under random sampling fewer than take
// passing rows. Rows outside the sample may fail without proving anything.
func TestProvenAbsent(t *testing.T) {
	y, n := true, false
	cases := []struct {
		pass   []bool
		take   int
		window bool
		absent bool
	}{
		{[]bool{n, y, y, y, n}, 3, true, false},  // the middle window passes: present possible
		{[]bool{y, y, n, y, y}, 3, true, true},   // 4 pass, but no 3 in a row
		{[]bool{y, y, n, y, y}, 3, false, false}, // random sampling: any 3 of the 4
		{[]bool{y, n, n, n, y}, 3, false, true},  // random: only 2 pass
		{[]bool{n, n, n}, 3, true, true},         // nothing passes
		{[]bool{y, y, y}, 3, true, false},        // the whole text passes
		{[]bool{y, n}, 1, true, false},           // a one-row sample passes
		{[]bool{n, n}, 0, true, false},           // nothing sampled: no proof
		{[]bool{y, y}, 3, true, false},           // more rows than the text: no proof
		{[]bool{n, y, y, n, y, y, y, n}, 3, true, false},
	}
	for i, c := range cases {
		if got := ProvenAbsent(c.pass, c.take, c.window); got != c.absent {
			t.Errorf("case %d: ProvenAbsent(%v, %d, window %v) = %v, want %v", i, c.pass, c.take, c.window, got, c.absent)
		}
	}
}
