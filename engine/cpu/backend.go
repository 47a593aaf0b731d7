package cpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/workpool"
)

// Config configures the CPU backend.
type Config struct {
	// Workers is the number of goroutines kernels run on; 0 means
	// GOMAXPROCS. GEMMs are split across them with BLAS single-threaded:
	// New sets the library's (process-wide) thread count to 1.
	Workers int
	// BLAS is the GEMM library; nil means blas.Default() (OpenBLAS when it
	// loads, else gonum).
	BLAS *blas.Library
}

// Backend is the CPU backend: Go kernels parallel over rows on a fixed pool
// of workers, GEMM through BLAS. It runs one kernel at a time (kernels
// called from several goroutines are serialised).
type Backend struct {
	lib       *blas.Library
	workers   int
	mu        sync.Mutex  // one parallel section at a time: workers and scratch are shared
	pool      *workerPool // nil after Close: kernels then run on the caller's goroutine
	cleanup   runtime.Cleanup
	closed    atomic.Bool
	scratch   [][]float32    // per worker
	reduceBuf []float32      // partial sums of parallelReduce, one row per piece
	minWork   int            // work below which kernels stay on one goroutine (tests lower it)
	hostReads atomic.Int64   // see HostReads
	flops     atomic.Int64   // see GemmFLOPs
	blasAttn  atomic.Bool    // see SetBLASAttention
	kernels   map[string]any // by name; see kernelTable
}

// errClosed is Err's answer after Close: the backend still computes (its
// memory is host memory) but serially, so a caller that keeps using it
// learns why its steps are slow instead of waiting on a stopped pool.
var errClosed = errors.New("engine/cpu: backend used after Close")

// New returns a CPU backend; Close stops its workers.
func New(cfg Config) (*Backend, error) {
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("engine/cpu: workers = %d: want >= 0", cfg.Workers)
	}
	w := cfg.Workers
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	lib := cfg.BLAS
	if lib == nil {
		lib = blas.Default()
	}
	// The workers are the parallelism; BLAS threads would compete with them
	// (OpenBLAS's idle threads spin) and make sums depend on the split.
	lib.SetThreads(1)
	c := &Backend{lib: lib, workers: w, pool: newWorkerPool(w), scratch: make([][]float32, w), minWork: minParallel}
	c.kernels = c.kernelTable()
	// A backend dropped without Close still stops its pool's goroutines once
	// it is unreachable.
	c.cleanup = runtime.AddCleanup(c, func(p *workerPool) { p.stop() }, c.pool)
	return c, nil
}

// Close stops the worker goroutines. It is safe to call more than once; a
// kernel called afterwards runs on the caller's goroutine and Err reports
// the use after Close.
func (c *Backend) Close() error {
	c.mu.Lock() // waits for a kernel in flight
	defer c.mu.Unlock()
	if c.pool == nil {
		return nil
	}
	c.cleanup.Stop()
	c.pool.stop()
	c.pool = nil
	c.closed.Store(true)
	return nil
}

// Err reports a use of the backend after Close (engine.Errer), nil before.
func (c *Backend) Err() error {
	if c.closed.Load() {
		return errClosed
	}
	return nil
}

// SetMinWork sets the work (elements touched) below which kernels stay on
// one goroutine; tests set 1 to exercise the parallel paths at small sizes.
func (c *Backend) SetMinWork(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.minWork = n
}

// Name describes the backend.
func (c *Backend) Name() string {
	return fmt.Sprintf("cpu (%d workers; %s)", c.workers, c.lib.Name())
}

// BLAS is the GEMM library the kernels call.
func (c *Backend) BLAS() *blas.Library { return c.lib }

// Workers is the number of worker goroutines.
func (c *Backend) Workers() int { return c.workers }

// storage is host memory.
type storage struct {
	be   *Backend
	data []float32
}

// Backend is the CPU backend that allocated the memory.
func (s *storage) Backend() engine.Backend { return s.be }

// Len is the number of float32 elements.
func (s *storage) Len() int { return len(s.data) }

// Alloc returns n zeroed float32 elements of host memory.
func (c *Backend) Alloc(n int) (engine.Storage, error) {
	if n < 0 {
		return nil, fmt.Errorf("engine/cpu: allocate %d elements", n)
	}
	return &storage{be: c, data: make([]float32, n)}, nil
}

// f32 is the tensor's elements as a Go slice (nil for a nil tensor). The
// Tape has checked that t lives on this backend.
func f32(t *engine.Tensor) []float32 {
	if t == nil {
		return nil
	}
	off, n := t.Offset(), t.Size()
	return t.Storage().(*storage).data[off : off+n : off+n]
}

// Upload copies src into t (in parallel: a step's input is tens of MB).
func (c *Backend) Upload(t *engine.Tensor, src []float32) {
	dst := f32(t)
	c.parallelElems(len(dst), func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// Download copies t into dst.
func (c *Backend) Download(dst []float32, t *engine.Tensor) {
	c.hostReads.Add(1)
	copy(dst, f32(t))
}

// DownloadRange copies len(dst) elements of t starting at off.
func (c *Backend) DownloadRange(dst []float32, t *engine.Tensor, off int) {
	c.hostReads.Add(1)
	copy(dst, f32(t)[off:])
}

// HostReads is the number of calls so far that hand device data to the
// host and so wait for it: Download, DownloadRange (Tensor.ToHost, CopyTo,
// Item) and SumSquaresHost. On an asynchronous backend each is a sync that
// stalls the queue, so tests count them here, on the CPU, to keep them off
// a training step's path.
func (c *Backend) HostReads() int64 { return c.hostReads.Load() }

// Fill sets every element of t to v.
func (c *Backend) Fill(t *engine.Tensor, v float32) {
	x := f32(t)
	c.parallelElems(len(x), func(lo, hi int) {
		s := x[lo:hi]
		if v == 0 {
			clear(s)
			return
		}
		for i := range s {
			s[i] = v
		}
	})
}

// Axpy is y += alpha*x.
func (c *Backend) Axpy(y *engine.Tensor, alpha float32, x *engine.Tensor) {
	ys, xs := f32(y), f32(x)
	c.parallelElems(len(ys), func(lo, hi int) {
		yy, xx := ys[lo:hi], xs[lo:hi]
		for i := range yy {
			yy[i] += alpha * xx[i]
		}
	})
}

// Copy2D copies or accumulates a strided block (see engine.Backend.Copy2D).
func (c *Backend) Copy2D(dst *engine.Tensor, dstOff, dstLd int, src *engine.Tensor, srcOff, srcLd int, rows, cols int, accumulate bool) {
	d, s := f32(dst), f32(src)
	if dstLd == 0 { // sum all rows into one: serial over rows, parallel over columns
		c.parallelElems(cols, func(lo, hi int) {
			out := d[dstOff+lo : dstOff+hi]
			for r := range rows {
				in := s[srcOff+r*srcLd+lo : srcOff+r*srcLd+hi]
				for j := range out {
					out[j] += in[j]
				}
			}
		})
		return
	}
	if rows == 1 { // one long row (a whole tensor): split it
		c.parallelElems(cols, func(lo, hi int) {
			out, in := d[dstOff+lo:dstOff+hi], s[srcOff+lo:srcOff+hi]
			if !accumulate {
				copy(out, in)
				return
			}
			for j := range out {
				out[j] += in[j]
			}
		})
		return
	}
	c.parallelRows(rows, cols, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			out := d[dstOff+r*dstLd : dstOff+r*dstLd+cols]
			in := s[srcOff+r*srcLd : srcOff+r*srcLd+cols]
			if accumulate {
				for j := range out {
					out[j] += in[j]
				}
			} else {
				copy(out, in)
			}
		}
	})
}

// scratchFor returns worker w's scratch space of at least n elements.
func (c *Backend) scratchFor(w, n int) []float32 {
	if len(c.scratch[w]) < n {
		c.scratch[w] = make([]float32, n)
	}
	return c.scratch[w][:n]
}

// minParallel is the work (elements touched) below which a kernel runs on
// one goroutine: handing out work costs about a microsecond.
const minParallel = 1 << 14

// parallelElems runs fn over [0, n) in the contiguous chunks of parallelRows.
func (c *Backend) parallelElems(n int, fn func(lo, hi int)) {
	c.parallelRows(n, 1, func(_, lo, hi int) { fn(lo, hi) })
}

// parallelRows runs fn(worker, lo, hi) over rows [0, n) cut into chunks that the workers take in
// turn, and waits. The chunks depend on n, rowCost (elements per row) and the work threshold
// only, never on the worker count: workpool.ChunkSize's blocks (n/16 rows, at least the
// threshold's worth), or one chunk when the whole is under the threshold. One worker runs the
// same chunks in order, so a kernel whose result depends on its chunk's bounds (a GEMM call per
// chunk, the eight-lane exponential's tail at a chunk's end) gives the same bits on any number of
// workers. Sixteen chunks also let a worker delayed by other processes not hold the rest up.
func (c *Backend) parallelRows(n, rowCost int, fn func(w, lo, hi int)) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	chunk := n
	if n*rowCost >= c.minWork {
		chunk = workpool.ChunkSize(n, (c.minWork+rowCost-1)/max(rowCost, 1))
	}
	chunks := (n + chunk - 1) / chunk
	w := min(c.workers, chunks)
	if w == 1 || c.pool == nil {
		for lo := 0; lo < n; lo += chunk {
			fn(0, lo, min(lo+chunk, n))
		}
		return
	}
	var next atomic.Int64
	c.pool.run(w, func(worker int) {
		for {
			i := int(next.Add(1) - 1)
			if i >= chunks {
				return
			}
			fn(worker, i*chunk, min((i+1)*chunk, n))
		}
	})
}

// workerPool is a fixed set of goroutines; run executes task(i) for i < n
// with task(0) on the calling goroutine.
type workerPool struct {
	tasks chan poolTask
	wg    sync.WaitGroup
}

// poolTask is one call of run's function, for worker i.
type poolTask struct {
	fn func(int)
	i  int
}

// newWorkerPool starts n-1 goroutines (the caller of run is the n-th).
func newWorkerPool(n int) *workerPool {
	p := &workerPool{tasks: make(chan poolTask, n)}
	for range n - 1 {
		go func() {
			for t := range p.tasks {
				t.fn(t.i)
				p.wg.Done()
			}
		}()
	}
	return p
}

// stop ends the goroutines once they finish their tasks; run must not be
// called afterwards.
func (p *workerPool) stop() { close(p.tasks) }

// run calls fn(i) for i < n, fn(0) on the calling goroutine, and returns
// when all are done.
func (p *workerPool) run(n int, fn func(int)) {
	p.wg.Add(n - 1)
	for i := 1; i < n; i++ {
		p.tasks <- poolTask{fn: fn, i: i}
	}
	fn(0)
	p.wg.Wait()
}
