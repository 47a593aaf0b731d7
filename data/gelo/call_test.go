package gelo

import (
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data"
)

// The blocks of one forward pass: the same example under Call 1 and 2 holds the same texts,
// windows and clean rows, but fresh shields, a fresh A and its own observed rows; the same Call
// twice is bit-identical.
func TestCallsShareTextsNotMixing(t *testing.T) {
	c := testCorpus(t, 60, 8, 40, 16, 3)
	cfg := DefaultConfig()
	cfg.ObsRows = 0.9
	cfg.ShieldKind = ShieldManifold
	cfg.Call = 1
	a := example(t, newSampler(t, c, cfg), data.Train, 5)
	again := example(t, newSampler(t, c, cfg), data.Train, 5)
	cfg.Call = 2
	b := example(t, newSampler(t, c, cfg), data.Train, 5)
	if !slices.Equal(a.Positives, b.Positives) || !slices.Equal(a.HPos, b.HPos) || !slices.Equal(a.H, b.H) {
		t.Fatal("two calls of one example hold different clean rows")
	}
	if slices.Equal(a.A, b.A) || slices.Equal(a.S, b.S) || slices.Equal(a.ObsRows, b.ObsRows) {
		t.Fatal("two calls share A, the shields or the observed rows")
	}
	if !slices.Equal(a.A, again.A) || !slices.Equal(a.S, again.S) || !slices.Equal(a.UObs, again.UObs) {
		t.Fatal("the same call is not reproducible")
	}
	cfg.Call = 0
	z := example(t, newSampler(t, c, cfg), data.Train, 5)
	if slices.Equal(z.A, a.A) {
		t.Fatal("call 0 draws what call 1 draws")
	}
}
