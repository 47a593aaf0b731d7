package llama

import (
	"context"
	"testing"
)

// The byte counts the resource pre-flight uses hold what the model, a cache and a workspace
// really allocate, after plain, cached and alternative passes at full length: weights and caches
// exactly, the workspace within twice its real size.
func TestBytesBoundAllocations(t *testing.T) {
	c := testConfig()
	m := randomModel(t, c, 1)
	weights := 0
	for _, tn := range c.Tensors(c.Layers) {
		weights += len(storage(t, m, tn.Part, tn.Block))
	}
	if got := c.WeightBytes(); got != 4*int64(weights) {
		t.Errorf("WeightBytes %d, the model holds %d", got, 4*weights)
	}
	for blocks := 1; blocks <= c.Layers; blocks++ {
		n := 0
		for _, tn := range c.Tensors(blocks) {
			n += tn.Elems()
		}
		if got := c.LoadedParams(blocks); got != int64(n) {
			t.Errorf("LoadedParams(%d) %d, its tensors hold %d", blocks, got, n)
		}
	}
	const maxLen, tokens, workers = 16, 32, 3
	cache, err := m.NewCache(maxLen)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.CacheBytes(maxLen), int64(8*len(cache.k)*len(cache.k[0])); got != want {
		t.Errorf("CacheBytes %d, the cache holds %d", got, want)
	}
	ws, err := m.NewWorkspace(tokens, maxLen, workers)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seq := make([]int32, maxLen)
	for i := range seq {
		seq[i] = int32(i % c.VocabSize)
	}
	if err := m.Forward(ctx, ws, [][]int32{seq, seq}, nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxLen-1; i++ {
		if err := m.ForwardNext(ctx, ws, cache, seq[i:i+1], nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.ForwardAlternatives(ctx, ws, cache, seq, nil); err != nil {
		t.Fatal(err)
	}
	held := len(ws.x) + len(ws.xn) + len(ws.qkv) + len(ws.att) + len(ws.tmp) + len(ws.gu) + len(ws.act) + len(ws.pos) +
		len(ws.cos) + len(ws.sin) + len(ws.altK) + len(ws.altV) + len(ws.conv)
	for _, s := range ws.scores {
		held += cap(s)
	}
	est := c.WorkspaceBytes(tokens, maxLen, workers, true)
	t.Logf("workspace: holds %d bytes, estimated %d (x%.2f)", 4*held, est, float64(est)/float64(4*held))
	if est < 4*int64(held) || est > 8*int64(held) {
		t.Errorf("WorkspaceBytes %d, the workspace holds %d: want held <= estimate <= 2 x held", est, 4*held)
	}
}
