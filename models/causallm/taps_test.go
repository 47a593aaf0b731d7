package causallm_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// hostReads counts the CPU backend's transfers to the host (cpu.Backend.HostReads).
type hostReads interface{ HostReads() int64 }

// A declared tap is called at exactly its points, with the bits an undeclared tap sees there, on
// the host and on a device-like backend; on the latter a pass moves to the host only the declared
// points' rows (the residual stays on the backend between blocks), and TapOnly's restore brings
// back every point. Logits and a cache's later rows do not depend on the declaration.
func TestTapOnlySeesItsPoints(t *testing.T) {
	for name, c := range decoderFamilies() {
		t.Run(name, func(t *testing.T) {
			m := randomWeights(t, c, 17)
			for _, blocks := range []int{c.Layers, 2} {
				w := m
				if blocks < c.Layers {
					w, _ = storedBF16(t, m, blocks)
				}
				cpuBE := newCPU(t, 2)
				for _, be := range []engine.Backend{cpuBE, deviceLike{cpuBE}} {
					checkTapOnly(t, c, w, be, cpuBE.(hostReads))
				}
			}
		})
	}
}

func checkTapOnly(t *testing.T, c llama.Config, w *llama.Model, be engine.Backend, reads hostReads) {
	t.Helper()
	dc, err := causallm.NewDecoder(be, w)
	if err != nil {
		t.Fatal(err)
	}
	_, device := be.(deviceLike)
	blocks := w.Blocks()
	ctx := context.Background()
	seqs := [][]int32{tokens(8, c.VocabSize, 7), tokens(9, c.VocabSize, 11)}
	var logits, want []float32
	if blocks == c.Layers {
		logits, want = make([]float32, 18*c.VocabSize), make([]float32, 18*c.VocabSize)
	}
	all := taps{}
	if err := dc.Forward(ctx, seqs, all.tap, want); err != nil {
		t.Fatal(err)
	}
	if len(all) != 2*blocks+1 {
		t.Fatalf("undeclared tap saw %d points, want every one (%d)", len(all), 2*blocks+1)
	}
	pts := []causallm.TapPoint{{Point: llama.AttnInput, Layer: 1}, {Point: llama.Residual, Layer: 1}, {Point: llama.Residual, Layer: blocks}}
	restore := dc.TapOnly(pts...)
	for _, withLogits := range []bool{false, true} {
		if withLogits && logits == nil {
			continue
		}
		var lg []float32
		if withLogits {
			lg = logits
		}
		got := taps{}
		before := reads.HostReads()
		if err := dc.Forward(ctx, seqs, got.tap, lg); err != nil {
			t.Fatal(err)
		}
		moved := reads.HostReads() - before
		keys := slices.Collect(maps.Keys(got))
		if len(got) != len(pts) {
			t.Errorf("declared %v, the tap saw %v", pts, keys)
		}
		for _, p := range pts {
			k := [2]int{int(p.Point), p.Layer}
			if x, ok := got[k]; !ok || !slices.Equal(x, all[k]) {
				t.Errorf("%s %d: seen %v, rows equal to the undeclared tap's: %v", p.Point, p.Layer, ok, slices.Equal(x, all[k]))
			}
		}
		if withLogits && !slices.Equal(lg, want) {
			t.Error("logits differ when the tap is declared")
		}
		wantMoved := int64(0) // a host-memory backend hands the tap its own memory
		if device {
			wantMoved = int64(len(pts))
		}
		if withLogits {
			wantMoved++
		}
		if moved != wantMoved {
			t.Errorf("device %v, logits %v: %d transfers to the host, want %d (the declared points' rows, the logits)", device, withLogits, moved, wantMoved)
		}
	}
	restore()
	again := taps{}
	if err := dc.Forward(ctx, seqs, again.tap, nil); err != nil {
		t.Fatal(err)
	}
	if len(again) != len(all) {
		t.Errorf("after restore the tap saw %d points, want %d", len(again), len(all))
	}

	// A cache filled under a declaration that skips the final norm gives the later rows a cache
	// filled with every point tapped gives.
	next := func(declared bool) taps {
		cache, err := dc.NewCache(20)
		if err != nil {
			t.Fatal(err)
		}
		if declared {
			defer dc.TapOnly(causallm.TapPoint{Point: llama.AttnInput, Layer: 0})()
		}
		if err := dc.ForwardNext(ctx, cache, seqs[1][:6], taps{}.tap, nil); err != nil {
			t.Fatal(err)
		}
		out := taps{}
		if err := dc.ForwardAlternatives(ctx, cache, []int32{3, 5}, out.tap); err != nil {
			t.Fatal(err)
		}
		return out
	}
	plain, declared := next(false), next(true)
	if k := [2]int{int(llama.AttnInput), 0}; len(declared) != 1 || !slices.Equal(declared[k], plain[k]) {
		t.Errorf("alternatives after a declared fill: %d points, rows equal %v", len(declared), slices.Equal(declared[k], plain[k]))
	}

	// A pass of more rows than any before grows the residual buffer (to 30 rows on the host, 36 on
	// a device) and reads as on a fresh decoder.
	longer := append(seqs, tokens(10, c.VocabSize, 12))
	grown, fresh := taps{}, taps{}
	if err := dc.Forward(ctx, longer, grown.tap, nil); err != nil {
		t.Fatal(err)
	}
	dc2, err := causallm.NewDecoder(be, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := dc2.Forward(ctx, longer, fresh.tap, nil); err != nil {
		t.Fatal(err)
	}
	for k, x := range fresh {
		if !slices.Equal(grown[k], x) {
			t.Errorf("%v after the buffer grew: differs from a fresh decoder's", k)
		}
	}
}
