package content

import (
	"context"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestKeptNextRowsAreTheTextsOwn: the next-token rows an embedder keeps are, bit for bit, those a
// fresh embedder computes for the text: past layer 0 per text (a second text gets its own rows),
// and at layer 0, where the rows are shared by every text, another text's kept rows are this one's.
func TestKeptNextRowsAreTheTextsOwn(t *testing.T) {
	ctx := context.Background()
	texts := []string{"my PIN is 1234, thanks", "we ate at noon"}
	for _, layer := range []int{0, 1} {
		meta := decoderMeta("float32", false)
		meta.Layer = layer
		kept := testDecoder(t, meta)
		var rows []*mat.Dense
		for _, text := range append(texts, texts[0]) { // the first text again: from what was kept
			r, void, err := kept.NextRows(ctx, text)
			if err != nil || void != "" {
				t.Fatalf("layer %d, %q: %v %q", layer, text, err, void)
			}
			rows = append(rows, r)
		}
		for i, text := range texts {
			fresh, _, err := testDecoder(t, meta).NextRows(ctx, text)
			if err != nil {
				t.Fatal(err)
			}
			if !mat.Equal(rows[i], fresh) {
				t.Errorf("layer %d, %q: the kept embedder's rows differ from a fresh one's", layer, text)
			}
		}
		if !mat.Equal(rows[2], rows[0]) {
			t.Errorf("layer %d: %q asked for again gives other rows", layer, texts[0])
		}
		if same := mat.Equal(rows[0], rows[1]); same != (layer == 0) {
			t.Errorf("layer %d: two texts' next-token rows equal: %v, want %v (only layer 0's rows read no prefix)", layer, same, layer == 0)
		}
		if layer > 0 && len(kept.nextKept) != 2 {
			t.Errorf("layer %d: %d texts kept, want 2", layer, len(kept.nextKept))
		}
	}
}

// TestKeptRowsBudgetIsShared: embedders sharing a KeptRows keep together at most its bytes (a
// budget of one text's rows keeps the first text asked for, whichever embedder asks, and no
// other), the rows of a text not kept are still its own, and a budget of 0 keeps nothing.
func TestKeptRowsBudgetIsShared(t *testing.T) {
	ctx := context.Background()
	meta := decoderMeta("float32", false)
	meta.Layer = 1
	probe := testDecoder(t, meta)
	first, _, err := probe.NextRows(ctx, "we ate at noon")
	if err != nil {
		t.Fatal(err)
	}
	one := probe.nextKept["we ate at noon"].bytes()
	for _, budget := range []int64{0, one, 2*one - 1} {
		shared := NewKeptRows(budget)
		a, b := testDecoder(t, meta), testDecoder(t, meta)
		a.ShareKeptRows(shared)
		b.ShareKeptRows(shared)
		ra, _, errA := a.NextRows(ctx, "we ate at noon")
		rb, _, errB := b.NextRows(ctx, "my PIN is 1234, thanks")
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if !mat.Equal(ra, first) {
			t.Errorf("budget %d: rows of a kept text differ from a fresh embedder's", budget)
		}
		fresh, _, err := testDecoder(t, meta).NextRows(ctx, "my PIN is 1234, thanks")
		if err != nil {
			t.Fatal(err)
		}
		if !mat.Equal(rb, fresh) {
			t.Errorf("budget %d: rows of a text past the budget differ from a fresh embedder's", budget)
		}
		wantA := budget >= one
		if got := len(a.nextKept) == 1; got != wantA {
			t.Errorf("budget %d (one text %d bytes): first embedder kept its text %v, want %v", budget, one, got, wantA)
		}
		if len(b.nextKept) != 0 {
			t.Errorf("budget %d: the second embedder kept %d texts past the shared budget", budget, len(b.nextKept))
		}
	}
}
