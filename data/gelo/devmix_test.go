package gelo

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/internal/numfmt"
)

// TestMixOnDeviceBatchesFormTheHostU: a MixOnDevice pipeline's batches are the host pipeline's
// (same examples, N, Mask) with X and A in place of U, and A X (float64 here, as a device forms
// it in any order) is the host's U within gamma_n of each sum's magnitude, rounded to the
// observe dtype as the host rounds it (within one unit of it beyond that). Odd shapes: d 13,
// ranged set sizes with a bucket of 5, observed fraction 0.9, batches of 1 and 3.
func TestMixOnDeviceBatchesFormTheHostU(t *testing.T) {
	const d = 13
	c := testCorpus(t, 40, 6, 20, d, 11)
	for _, observe := range []ObserveDtype{ObserveNone, ObserveBF16, ObserveFP16} {
		for _, bs := range []int{1, 3} {
			cfg := pipelineConfig()
			cfg.ObserveDtype = observe
			s := newSampler(t, c, cfg)
			host := NewFinitePipeline(context.Background(), s, data.Train, bs, 2, 2, 0, 4, PadTo(5))
			dev := NewFinitePipeline(context.Background(), s, data.Train, bs, 2, 2, 0, 4, PadTo(5), MixOnDevice())
			for j := 0; j < 4; j++ {
				hb, err := host.Next()
				if err != nil {
					t.Fatal(err)
				}
				db, err := dev.Next()
				if err != nil {
					t.Fatal(err)
				}
				checkMixBatch(t, hb, db, observe)
			}
			host.Close()
			dev.Close()
		}
	}
}

func checkMixBatch(t *testing.T, hb, db *Batch, observe ObserveDtype) {
	t.Helper()
	if db.U != nil || db.B != hb.B || db.N != hb.N || db.D != hb.D || db.Observe != observe || !slices.Equal(db.Mask, hb.Mask) {
		t.Fatalf("batch %d: device batch B %d N %d D %d observe %q (U set: %v), host B %d N %d D %d",
			hb.Index, db.B, db.N, db.D, db.Observe, db.U != nil, hb.B, hb.N, hb.D)
	}
	B, n, nx, d := db.B, db.N, db.NX, db.D
	if nx%5 != 0 || len(db.X) != B*nx*d || len(db.A) != B*n*nx {
		t.Fatalf("batch %d: NX %d (bucket 5), %d values of X, %d of A", hb.Index, nx, len(db.X), len(db.A))
	}
	unit := map[ObserveDtype]float64{ObserveNone: 0, ObserveBF16: 0x1p-8, ObserveFP16: 0x1p-11}[observe]
	round := map[ObserveDtype]func(float32) float32{ObserveNone: func(v float32) float32 { return v },
		ObserveBF16: numfmt.RoundBF16, ObserveFP16: numfmt.RoundF16}[observe]
	for b := range B {
		he, de := hb.Examples[b], db.Examples[b]
		if de.UObs != nil || de.Index != he.Index || !slices.Equal(de.ObsRows, he.ObsRows) || !slices.Equal(de.A, he.A) {
			t.Fatalf("batch %d example %d: not the host's example (UObs set: %v)", hb.Index, b, de.UObs != nil)
		}
		if !slices.Equal(db.X[b*nx*d:b*nx*d+de.N*d], de.X()) || slices.ContainsFunc(db.X[b*nx*d+de.N*d:(b+1)*nx*d], func(v float32) bool { return v != 0 }) {
			t.Fatalf("batch %d example %d: X is not the example's rows then zeros", hb.Index, b)
		}
		for i := range n {
			for l := range d {
				var u, mag float64
				for k := range nx {
					p := float64(db.A[(b*n+i)*nx+k]) * float64(db.X[(b*nx+k)*d+l])
					u, mag = u+p, mag+math.Abs(p)
				}
				want := hb.U[(b*n+i)*d+l]
				sumErr := fptol.Gamma(nx, fptol.Float32) * mag
				tol := sumErr + unit*(math.Abs(u)+sumErr) + 0x1p-25
				if observe == ObserveNone {
					tol = sumErr
				}
				if diff := math.Abs(float64(want) - u); !(diff <= tol) || round(want) != want {
					t.Fatalf("batch %d example %d row %d col %d: host U %g, A X %g: off by %g > %g (or not in %s)",
						hb.Index, b, i, l, want, u, diff, tol, observe)
				}
			}
		}
	}
}
