package gelo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/gelo-research/geloattack/data"
)

// Batch is B examples padded to one set size N (the largest NObs among them).
type Batch struct {
	// Index is the batch's position in its split's stream: it holds examples Index*B .. Index*B+B-1.
	Index int64
	// B is the number of examples, N the padded set size, D the row width.
	B, N, D int
	// U: (B, N, D) row-major; example b's observed rows come first, padding rows are zero.
	U []float32
	// Mask: (B, N), true for a real row, false for padding.
	Mask []bool
	// Examples holds the examples in order; Examples[b].UObs aliases U's rows of example b (nil
	// in a batch of a MixOnDevice pipeline).
	Examples []*Example

	// X, A and NX are set instead of U by a MixOnDevice pipeline, for the model's device to form
	// U = A X (engine.Tape.MixRows), rounded to Observe. NX is the padded row count of X.
	// X: (B, NX, D), example b's rows of X = [H; S] in their shuffled order (Example.X), padded
	// rows zero. A: (B, N, NX), example b's observed rows of its mixing matrix (ObsRows order,
	// so U's rows come out as a host batch's), padded rows and columns zero.
	X, A    []float32
	NX      int
	Observe ObserveDtype
}

// NewBatch pads examples into one Batch whose set size N is the largest example's. Each example's
// UObs is copied into U and then made to alias it, so that the batch holds one copy of the
// observations.
func NewBatch(index int64, examples []*Example) (*Batch, error) {
	return newBatch(index, examples, 1)
}

// PadN is the set size of a batch whose largest example has n observed rows, padded up to a
// multiple of bucket (bucket < 2 pads nothing).
func PadN(n, bucket int) int {
	if bucket < 2 {
		return n
	}
	return (n + bucket - 1) / bucket * bucket
}

// newBatch is NewBatch with N padded up to a multiple of bucket.
func newBatch(index int64, examples []*Example, bucket int) (*Batch, error) {
	if len(examples) == 0 {
		return nil, errors.New("gelo batch: no examples")
	}
	d, n := examples[0].D, 0
	for _, ex := range examples {
		if ex.D != d {
			return nil, fmt.Errorf("gelo batch %d: example %d has d=%d, example %d has d=%d",
				index, ex.Index, ex.D, examples[0].Index, d)
		}
		n = max(n, ex.NObs)
	}
	n = PadN(n, bucket)
	b := &Batch{Index: index, B: len(examples), N: n, D: d, Examples: examples}
	b.U = make([]float32, b.B*n*d) // U: (B, N, D)
	b.Mask = make([]bool, b.B*n)   // Mask: (B, N)
	for i, ex := range examples {
		block := b.U[i*n*d : i*n*d+ex.NObs*d]
		copy(block, ex.UObs)
		ex.UObs = block
		for r := 0; r < ex.NObs; r++ {
			b.Mask[i*n+r] = true
		}
	}
	return b, nil
}

// newMixBatch is newBatch for MixOnDevice: X and A instead of U (examples without UObs), with
// X's rows padded up to a multiple of bucket as N is.
func newMixBatch(index int64, examples []*Example, bucket int, observe ObserveDtype) (*Batch, error) {
	if len(examples) == 0 {
		return nil, errors.New("gelo batch: no examples")
	}
	d, n, nx := examples[0].D, 0, 0
	for _, ex := range examples {
		if ex.D != d {
			return nil, fmt.Errorf("gelo batch %d: example %d has d=%d, example %d has d=%d",
				index, ex.Index, ex.D, examples[0].Index, d)
		}
		if len(ex.ObsRows) != ex.NObs || len(ex.A) != ex.N*ex.N || len(ex.Perm) != ex.N {
			return nil, fmt.Errorf("gelo batch %d: example %d has %d observed rows for NObs %d, %d mixing values and %d rows of X for N %d",
				index, ex.Index, len(ex.ObsRows), ex.NObs, len(ex.A), len(ex.Perm), ex.N)
		}
		n, nx = max(n, ex.NObs), max(nx, ex.N)
	}
	n, nx = PadN(n, bucket), PadN(nx, bucket)
	b := &Batch{Index: index, B: len(examples), N: n, D: d, NX: nx, Observe: observe, Examples: examples}
	b.X = make([]float32, b.B*nx*d) // X: (B, NX, D)
	b.A = make([]float32, b.B*n*nx) // A: (B, N, NX)
	b.Mask = make([]bool, b.B*n)    // Mask: (B, N)
	for i, ex := range examples {
		x := b.X[i*nx*d : (i+1)*nx*d]
		for r, src := range ex.Perm { // as Example.X, straight into the batch
			if src < ex.NClean {
				copy(x[r*d:(r+1)*d], ex.H[src*d:(src+1)*d])
			} else {
				copy(x[r*d:(r+1)*d], ex.S[(src-ex.NClean)*d:(src-ex.NClean+1)*d])
			}
		}
		a := b.A[i*n*nx : (i+1)*n*nx]
		for r, row := range ex.ObsRows {
			copy(a[r*nx:r*nx+ex.N], ex.A[row*ex.N:(row+1)*ex.N])
			b.Mask[i*n+r] = true
		}
	}
	return b, nil
}

// PipelineOption changes how a Pipeline batches its examples.
type PipelineOption func(*Pipeline)

// PadTo pads every batch's set size N up to a multiple of bucket rows (with masked zero rows), so
// that ranged settings, whose N changes from batch to batch, give few distinct shapes: the
// model's activation arena and gradient pool then stop growing once each bucket has been seen,
// and GEMM shapes stay steady. bucket < 2 pads only to the batch's largest example (the default).
func PadTo(bucket int) PipelineOption {
	return func(p *Pipeline) { p.bucket = bucket }
}

// MixOnDevice makes the pipeline's batches carry X and A instead of U (Batch.X, Batch.A), so
// that the model's device forms U = A X: the workers skip each example's GEMM (the largest part
// of generating a paper-size example), and a GPU run's step uploads X and A. Its examples have
// no UObs. The batches are otherwise those of a pipeline without it (same examples, N, Mask).
func MixOnDevice() PipelineOption {
	return func(p *Pipeline) { p.deviceMix = true }
}

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("gelo pipeline: closed")

// Pipeline generates the batches of one split on worker goroutines, ahead of the consumer, and
// hands them out in order. Next is for one consumer goroutine; Close may be called from any.
type Pipeline struct {
	split     data.Split
	batchSize int
	bucket    int  // N is padded to a multiple of it (PadTo)
	deviceMix bool // batches carry X and A instead of U (MixOnDevice)
	first     int64
	end       int64 // one past the last batch; -1 for an endless stream

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{}  // one token per batch in flight, capacity prefetch
	ready  chan *inFlight // batches in order, as the dispatcher starts them
	closed atomic.Bool

	next int64 // consumer side: the batch Next returns next
	err  error // consumer side: sticky error
}

// inFlight is one batch being generated.
type inFlight struct {
	index    int64
	examples []*Example
	left     atomic.Int32 // examples not yet generated
	mu       sync.Mutex
	err      error
	batch    *Batch
	done     chan struct{} // closed when batch or err is set
}

// task is one example of one batch.
type task struct {
	b   *inFlight
	pos int
}

// NewPipeline starts an endless pipeline over split: batch j holds examples j*batchSize ..
// j*batchSize+batchSize-1 of the split's stream, and Next returns batches firstBatch,
// firstBatch+1, ..., so that a run resumed at firstBatch = steps done sees the batches an
// uninterrupted run would. workers goroutines generate examples; at most prefetch batches are in
// flight (generated or being generated, not yet returned). Values below 1 mean 1. Invalid
// arguments surface as the error of the first Next. Cancel ctx or call Close to stop it.
func NewPipeline(ctx context.Context, s *Sampler, split data.Split, batchSize, workers, prefetch int, firstBatch int64, opts ...PipelineOption) *Pipeline {
	return newPipeline(ctx, s, split, batchSize, workers, prefetch, firstBatch, -1, opts)
}

// NewFinitePipeline is NewPipeline for evaluation: it produces numBatches batches starting at
// firstBatch, after which Next returns io.EOF.
func NewFinitePipeline(ctx context.Context, s *Sampler, split data.Split, batchSize, workers, prefetch int, firstBatch, numBatches int64, opts ...PipelineOption) *Pipeline {
	if numBatches < 0 {
		p := &Pipeline{err: fmt.Errorf("gelo pipeline: numBatches %d, want >= 0", numBatches)}
		p.ctx, p.cancel = context.WithCancel(ctx)
		return p
	}
	return newPipeline(ctx, s, split, batchSize, workers, prefetch, firstBatch, numBatches, opts)
}

func newPipeline(ctx context.Context, s *Sampler, split data.Split, batchSize, workers, prefetch int, firstBatch, numBatches int64, opts []PipelineOption) *Pipeline {
	workers, prefetch = max(workers, 1), max(prefetch, 1)
	p := &Pipeline{split: split, batchSize: batchSize, first: firstBatch, next: firstBatch, end: -1}
	for _, o := range opts {
		o(p)
	}
	p.ctx, p.cancel = context.WithCancel(ctx)
	switch {
	case s == nil:
		p.err = errors.New("gelo pipeline: nil sampler")
	case s.Texts(split) == nil:
		p.err = fmt.Errorf("gelo pipeline: unknown split %v", split)
	case batchSize < 1:
		p.err = fmt.Errorf("gelo pipeline: batch size %d, want >= 1", batchSize)
	case firstBatch < 0:
		p.err = fmt.Errorf("gelo pipeline: first batch %d, want >= 0", firstBatch)
	}
	if p.err != nil {
		return p
	}
	if numBatches >= 0 {
		p.end = firstBatch + numBatches
	}
	p.slots = make(chan struct{}, prefetch)
	p.ready = make(chan *inFlight, prefetch)
	tasks := make(chan task, batchSize)
	p.wg.Add(1 + workers)
	go p.dispatch(tasks)
	for w := 0; w < workers; w++ {
		go p.work(s, tasks)
	}
	return p
}

// dispatch starts batches in order, one slot each, and queues their examples for the workers.
func (p *Pipeline) dispatch(tasks chan<- task) {
	defer p.wg.Done()
	defer close(tasks)
	defer close(p.ready)
	for j := p.first; p.end < 0 || j < p.end; j++ {
		select {
		case p.slots <- struct{}{}:
		case <-p.ctx.Done():
			return
		}
		b := &inFlight{index: j, examples: make([]*Example, p.batchSize), done: make(chan struct{})}
		b.left.Store(int32(p.batchSize))
		p.ready <- b // never blocks: ready holds at most as many batches as slots
		for pos := 0; pos < p.batchSize; pos++ {
			select {
			case tasks <- task{b: b, pos: pos}:
			case <-p.ctx.Done():
				return
			}
		}
	}
}

// work generates examples until the tasks run out or the pipeline stops. The worker that
// finishes a batch's last example pads it.
func (p *Pipeline) work(s *Sampler, tasks <-chan task) {
	defer p.wg.Done()
	ws := new(Workspace)
	for {
		var t task
		var ok bool
		select {
		case t, ok = <-tasks:
			if !ok {
				return
			}
		case <-p.ctx.Done():
			return
		}
		b := t.b
		index := b.index*int64(p.batchSize) + int64(t.pos)
		ex, err := s.exampleWith(ws, p.split, index, !p.deviceMix)
		if err != nil {
			b.mu.Lock()
			if b.err == nil {
				b.err = fmt.Errorf("gelo pipeline: batch %d: %w", b.index, err)
			}
			b.mu.Unlock()
		}
		b.examples[t.pos] = ex
		if b.left.Add(-1) == 0 {
			if b.err == nil && p.deviceMix { // every writer of b.err has finished: the counter orders them before us
				b.batch, b.err = newMixBatch(b.index, b.examples, p.bucket, s.Config().ObserveDtype)
			} else if b.err == nil {
				b.batch, b.err = newBatch(b.index, b.examples, p.bucket)
			}
			close(b.done)
		}
	}
}

// Next returns the next batch in order. It blocks until the batch is ready, returns io.EOF after
// the last batch of a finite pipeline, ErrClosed after Close, the context's error when ctx is
// cancelled, and the first generation error it meets (after which every call returns it).
func (p *Pipeline) Next() (*Batch, error) {
	if p.err != nil {
		return nil, p.err
	}
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if p.end >= 0 && p.next >= p.end {
		return nil, io.EOF
	}
	var b *inFlight
	select {
	case b = <-p.ready:
	case <-p.ctx.Done():
		return nil, p.stopErr()
	}
	if b == nil { // ready closed: the dispatcher stopped early, which only cancellation causes
		return nil, p.stopErr()
	}
	select {
	case <-b.done:
	case <-p.ctx.Done():
		return nil, p.stopErr()
	}
	<-p.slots
	if b.err != nil {
		p.err = b.err
		p.cancel() // nothing after a failed batch is wanted
		return nil, p.err
	}
	p.next++
	return b.batch, nil
}

// stopErr is the error Next reports once the pipeline's context is done.
func (p *Pipeline) stopErr() error {
	if p.closed.Load() {
		return ErrClosed
	}
	p.err = fmt.Errorf("gelo pipeline: %w", context.Cause(p.ctx))
	return p.err
}

// Close stops the workers and waits for every goroutine the pipeline started. It is idempotent.
func (p *Pipeline) Close() {
	p.closed.Store(true)
	p.cancel()
	p.wg.Wait()
}
