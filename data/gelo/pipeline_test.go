package gelo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/data"
)

// pipelineConfig gives examples of varying NObs, so batches need padding.
func pipelineConfig() Config {
	cfg := DefaultConfig()
	cfg.ValFrac = 0.3
	cfg.Positives, cfg.TokensPerText = Uniform(1, 3), Uniform(4, 12)
	cfg.ShieldFrac, cfg.ObsRows = Uniform(0, 0.5), 0.9
	return cfg
}

func TestPipelineBatchesAreTheStreamWhateverTheWorkers(t *testing.T) {
	const d, bs = 8, 5
	c := testCorpus(t, 40, 6, 20, d, 11)
	s := newSampler(t, c, pipelineConfig())
	for _, workers := range []int{1, 3} {
		p := NewPipeline(context.Background(), s, data.Val, bs, workers, 2, 2)
		for j := int64(2); j < 6; j++ {
			b, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			if b.Index != j || b.B != bs || b.D != d || len(b.Examples) != bs {
				t.Fatalf("batch %d: index %d B %d D %d", j, b.Index, b.B, b.D)
			}
			maxObs := 0
			for _, ex := range b.Examples {
				maxObs = max(maxObs, ex.NObs)
			}
			if b.N != maxObs || len(b.U) != bs*b.N*d || len(b.Mask) != bs*b.N {
				t.Fatalf("batch %d: N %d, max NObs %d", j, b.N, maxObs)
			}
			for k, ex := range b.Examples {
				want := example(t, s, data.Val, j*bs+int64(k))
				if !reflect.DeepEqual(ex, want) {
					t.Fatalf("workers %d: batch %d example %d differs from Example(val, %d)", workers, j, k, j*bs+int64(k))
				}
				block := b.U[k*b.N*d : (k+1)*b.N*d]
				if !slices.Equal(block[:ex.NObs*d], want.UObs) {
					t.Fatal("U does not hold the example's observations")
				}
				for _, v := range block[ex.NObs*d:] {
					if v != 0 {
						t.Fatal("padding is not zero")
					}
				}
				for r := 0; r < b.N; r++ {
					if b.Mask[k*b.N+r] != (r < ex.NObs) {
						t.Fatalf("mask of example %d row %d wrong", k, r)
					}
				}
				if &ex.UObs[0] != &block[0] {
					t.Fatal("UObs does not alias the batch")
				}
			}
		}
		p.Close()
	}
}

func TestPipelineResumesAtTheSameBatches(t *testing.T) {
	c := testCorpus(t, 40, 6, 20, 8, 12)
	s := newSampler(t, c, pipelineConfig())
	whole := NewPipeline(context.Background(), s, data.Train, 3, 2, 3, 0)
	defer whole.Close()
	var want []*Batch
	for i := 0; i < 5; i++ {
		b, err := whole.Next()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b)
	}
	resumed := NewPipeline(context.Background(), s, data.Train, 3, 1, 1, 3)
	defer resumed.Close()
	for _, w := range want[3:] {
		b, err := resumed.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(b, w) {
			t.Fatalf("resumed batch %d differs", w.Index)
		}
	}
}

func TestFinitePipelineEnds(t *testing.T) {
	c := testCorpus(t, 40, 6, 20, 8, 13)
	s := newSampler(t, c, pipelineConfig())
	p := NewFinitePipeline(context.Background(), s, data.Val, 4, 2, 2, 7, 3)
	defer p.Close()
	for j := int64(7); j < 10; j++ {
		b, err := p.Next()
		if err != nil || b.Index != j {
			t.Fatalf("batch %d: %v, %v", j, b, err)
		}
	}
	for i := 0; i < 2; i++ {
		if _, err := p.Next(); err != io.EOF {
			t.Fatalf("after the last batch: %v, want io.EOF", err)
		}
	}
	empty := NewFinitePipeline(context.Background(), s, data.Val, 4, 2, 2, 0, 0)
	defer empty.Close()
	if _, err := empty.Next(); err != io.EOF {
		t.Fatalf("zero batches: %v", err)
	}
}

func TestPipelineRejectsBadArguments(t *testing.T) {
	c := testCorpus(t, 40, 6, 20, 8, 14)
	s := newSampler(t, c, pipelineConfig())
	for _, tc := range []struct {
		p    *Pipeline
		want string
	}{
		{NewPipeline(context.Background(), s, data.Train, 0, 1, 1, 0), "batch size 0"},
		{NewPipeline(context.Background(), s, data.Split(7), 2, 1, 1, 0), "unknown split"},
		{NewPipeline(context.Background(), s, data.Train, 2, 1, 1, -1), "first batch -1"},
		{NewPipeline(context.Background(), nil, data.Train, 2, 1, 1, 0), "nil sampler"},
		{NewFinitePipeline(context.Background(), s, data.Train, 2, 1, 1, 0, -2), "numBatches -2"},
	} {
		_, err := tc.p.Next()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one mentioning %q", err, tc.want)
		}
		tc.p.Close()
	}
}

// countingCorpus counts Rows calls and fails them for one text.
type countingCorpus struct {
	*data.MemCorpus
	calls  atomic.Int64
	failID int64
}

func (c *countingCorpus) Rows(i, start, n int, dst []float32) error {
	c.calls.Add(1)
	if c.TextID(i) == c.failID {
		return fmt.Errorf("text %d: disk on fire", c.failID)
	}
	return c.MemCorpus.Rows(i, start, n, dst)
}

func TestPipelinePrefetchIsBounded(t *testing.T) {
	cc := &countingCorpus{MemCorpus: testCorpus(t, 40, 20, 20, 8, 15), failID: -1}
	cfg := pipelineConfig()
	cfg.Positives = Fixed(2) // window tokens: exactly 2 Rows calls per example
	s := newSampler(t, cc, cfg)
	const bs, prefetch = 3, 2
	p := NewPipeline(context.Background(), s, data.Train, bs, 2, prefetch, 0)
	defer p.Close()
	limit := int64(2 * bs * prefetch)
	deadline := time.Now().Add(10 * time.Second)
	for cc.calls.Load() < limit && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // would the workers go on?
	if got := cc.calls.Load(); got != limit {
		t.Fatalf("%d examples generated with nothing consumed, want prefetch*B = %d", got/2, limit/2)
	}
	if _, err := p.Next(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for cc.calls.Load() < limit+2*bs && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if got := cc.calls.Load(); got != limit+2*bs {
		t.Fatalf("after one Next: %d examples generated, want %d", got/2, (limit+2*bs)/2)
	}
}

func TestPipelinePropagatesErrors(t *testing.T) {
	mc := testCorpus(t, 40, 20, 20, 8, 16)
	cfg := pipelineConfig()
	s0 := newSampler(t, mc, cfg)
	cc := &countingCorpus{MemCorpus: mc, failID: mc.TextID(s0.Texts(data.Train)[0])}
	s := newSampler(t, cc, cfg)
	p := NewPipeline(context.Background(), s, data.Train, 4, 2, 2, 0)
	defer p.Close()
	var err error
	for i := 0; i < 200 && err == nil; i++ {
		_, err = p.Next()
	}
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "batch") {
		t.Fatalf("error %v, want the corpus failure with its batch", err)
	}
	if _, again := p.Next(); !errors.Is(again, err) && again.Error() != err.Error() {
		t.Fatalf("error not sticky: %v then %v", err, again)
	}
}

func TestPipelineStopsOnCancelAndCloseWithoutLeaks(t *testing.T) {
	c := testCorpus(t, 40, 6, 20, 8, 17)
	s := newSampler(t, c, pipelineConfig())
	before := runtime.NumGoroutine()

	// Close without consuming anything, with workers blocked on a full pipeline.
	p := NewPipeline(context.Background(), s, data.Train, 4, 3, 2, 0)
	time.Sleep(20 * time.Millisecond)
	p.Close()
	p.Close() // idempotent
	if _, err := p.Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}

	// Cancel the parent context.
	ctx, cancel := context.WithCancel(context.Background())
	q := NewPipeline(ctx, s, data.Train, 4, 3, 2, 0)
	if _, err := q.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	var err error
	for i := 0; i < 10 && err == nil; i++ { // batches already done may still be handed out
		_, err = q.Next()
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel: %v", err)
	}
	q.Close()

	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

func TestPadToRoundsTheSetSizeUpAndMasksTheRest(t *testing.T) {
	for _, tc := range []struct{ n, bucket, want int }{
		{1, 0, 1}, {33, 1, 33}, {1, 32, 32}, {32, 32, 32}, {33, 32, 64}, {100, 64, 128},
	} {
		if got := PadN(tc.n, tc.bucket); got != tc.want {
			t.Errorf("PadN(%d, %d) = %d, want %d", tc.n, tc.bucket, got, tc.want)
		}
	}
	const d, bs, bucket = 8, 3, 16
	c := testCorpus(t, 40, 6, 20, d, 11)
	s := newSampler(t, c, pipelineConfig())
	if got := s.Config().DefaultSetBucket(); got != 32 {
		t.Errorf("default bucket of a ranged config: %d, want 32", got)
	}
	fixed := DefaultConfig()
	fixed.Positives, fixed.TokensPerText, fixed.ShieldFrac = Fixed(3), Fixed(8), Fixed(0.25)
	if got := fixed.DefaultSetBucket(); got != 1 {
		t.Errorf("default bucket of a fixed-size config: %d, want 1", got)
	}
	plain := NewFinitePipeline(context.Background(), s, data.Train, bs, 2, 2, 0, 6)
	padded := NewFinitePipeline(context.Background(), s, data.Train, bs, 2, 2, 0, 6, PadTo(bucket))
	defer plain.Close()
	defer padded.Close()
	for j := 0; j < 6; j++ {
		a, err := plain.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := padded.Next()
		if err != nil {
			t.Fatal(err)
		}
		if b.N%bucket != 0 || b.N < a.N || b.N >= a.N+bucket {
			t.Fatalf("batch %d: N %d unpadded, %d with bucket %d", j, a.N, b.N, bucket)
		}
		for k := 0; k < bs; k++ {
			if !slices.Equal(a.U[k*a.N*d:(k+1)*a.N*d], b.U[k*b.N*d:k*b.N*d+a.N*d]) ||
				!slices.Equal(a.Mask[k*a.N:(k+1)*a.N], b.Mask[k*b.N:k*b.N+a.N]) {
				t.Fatalf("batch %d example %d: padding changed the rows before the old N", j, k)
			}
			for r := a.N; r < b.N; r++ {
				if b.Mask[k*b.N+r] || slices.ContainsFunc(b.U[(k*b.N+r)*d:(k*b.N+r+1)*d], func(v float32) bool { return v != 0 }) {
					t.Fatalf("batch %d example %d: padding row %d is not a masked zero row", j, k, r)
				}
			}
		}
	}
}
