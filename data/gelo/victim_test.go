package gelo

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data"
)

// TestExampleWithVictimKeepsEveryOtherDraw checks that a victim example is the ordinary example
// with one positive's rows swapped for the victim's: the same other positives, shields, mixing and
// observation, the victim's rows present under VictimTextID, and ExampleWith itself unchanged.
func TestExampleWithVictimKeepsEveryOtherDraw(t *testing.T) {
	const d = 16
	c := testCorpus(t, 60, 5, 30, d, 1)
	for _, cfg := range []Config{
		func() Config { c := DefaultConfig(); c.Positives = Fixed(3); c.TokensPerText = Fixed(8); return c }(),
		func() Config {
			c := DefaultConfig()
			c.Positives = Range{Min: 2, Max: 5, Rand: RandUniform}
			c.TokensPerText = Fixed(64)
			c.ShieldKind = ShieldManifold
			c.ObsRows = 0.8
			c.ObserveDtype = ObserveBF16
			return c
		}(),
	} {
		s := newSampler(t, c, cfg)
		rng := rand.New(rand.NewPCG(5, 6))
		victim := make([]float32, 11*d) // (11, d)
		for i := range victim {
			victim[i] = float32(rng.NormFloat64())
		}
		for idx := int64(0); idx < 6; idx++ {
			before := example(t, s, data.Val, idx)
			ex, slot, err := s.ExampleWithVictim(new(Workspace), data.Val, idx, victim)
			if err != nil {
				t.Fatal(err)
			}
			after := example(t, s, data.Val, idx)
			if !slices.Equal(before.UObs, after.UObs) {
				t.Fatal("ExampleWith changed after a victim example")
			}
			if ex.Positives[slot] != VictimTextID || ex.PositiveIdx[slot] != -1 {
				t.Fatalf("slot %d: positive %d idx %d", slot, ex.Positives[slot], ex.PositiveIdx[slot])
			}
			for j, id := range before.Positives {
				if j != slot && ex.Positives[j] != id {
					t.Fatalf("example %d positive %d: %d, ordinary example has %d", idx, j, ex.Positives[j], id)
				}
			}
			if ex.NumPositives != before.NumPositives || ex.Kappa != before.Kappa || ex.ShieldScale != before.ShieldScale {
				t.Fatalf("example %d: per-example draws moved", idx)
			}
			// The victim's rows are in H, contiguous, a window of the victim.
			var rows []int
			for i, id := range ex.HText {
				if id == VictimTextID {
					rows = append(rows, i)
				}
			}
			want := min(11, ex.TokensPerText)
			if len(rows) != want {
				t.Fatalf("example %d: %d victim rows, want %d", idx, len(rows), want)
			}
			off := ex.HPos[rows[0]]
			for k, i := range rows {
				if !slices.Equal(ex.H[i*d:(i+1)*d], victim[(off+k)*d:(off+k+1)*d]) {
					t.Fatalf("example %d: victim row %d differs from the victim's row %d", idx, k, off+k)
				}
			}
			for i, id := range ex.RowText {
				if ex.RowShield[i] && id == VictimTextID {
					t.Fatalf("example %d: a shield row is labelled as the victim", idx)
				}
			}
		}
	}
	if _, _, err := newSampler(t, c, DefaultConfig()).ExampleWithVictim(new(Workspace), data.Val, 0, make([]float32, d+1)); err == nil {
		t.Fatal("victim of a ragged width accepted")
	}
}
