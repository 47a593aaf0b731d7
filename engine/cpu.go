package engine

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gelo-research/geloattack/engine/blas"
)

// CPUConfig configures the CPU backend.
type CPUConfig struct {
	// Workers is the number of goroutines kernels run on; 0 means
	// GOMAXPROCS. GEMMs are split across them with BLAS single-threaded:
	// NewCPU sets the library's (process-wide) thread count to 1.
	Workers int
	// BLAS is the GEMM library; nil means blas.Default() (OpenBLAS when it
	// loads, else gonum).
	BLAS *blas.Library
}

// CPU is the CPU backend: Go kernels parallel over rows on a fixed pool of
// workers, GEMM through BLAS. It runs one kernel at a time (kernels called
// from several goroutines are serialised).
type CPU struct {
	lib       *blas.Library
	workers   int
	mu        sync.Mutex // one parallel section at a time: workers and scratch are shared
	pool      *workerPool
	scratch   [][]float32  // per worker
	reduceBuf []float32    // partial sums of parallelReduce, one row per piece
	minWork   int          // work below which kernels stay on one goroutine (tests lower it)
	hostReads atomic.Int64 // see HostReads
}

// NewCPU returns a CPU backend.
func NewCPU(cfg CPUConfig) (*CPU, error) {
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("engine: CPU workers = %d: want >= 0", cfg.Workers)
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
	c := &CPU{lib: lib, workers: w, pool: newWorkerPool(w), scratch: make([][]float32, w), minWork: minParallel}
	// Stop the pool's goroutines once the backend is unreachable.
	runtime.AddCleanup(c, func(p *workerPool) { close(p.tasks) }, c.pool)
	return c, nil
}

// Name describes the backend.
func (c *CPU) Name() string {
	return fmt.Sprintf("cpu (%d workers; %s)", c.workers, c.lib.Name())
}

// Workers is the number of worker goroutines.
func (c *CPU) Workers() int { return c.workers }

// cpuStorage is host memory.
type cpuStorage struct {
	be   *CPU
	data []float32
}

func (s *cpuStorage) Backend() Backend { return s.be }
func (s *cpuStorage) Len() int         { return len(s.data) }

// Alloc returns n zeroed float32 elements of host memory.
func (c *CPU) Alloc(n int) (Storage, error) {
	if n < 0 {
		return nil, fmt.Errorf("engine: cpu: allocate %d elements", n)
	}
	return &cpuStorage{be: c, data: make([]float32, n)}, nil
}

// f32 is the tensor's elements as a Go slice (nil for a nil tensor).
func f32(t *Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.st.(*cpuStorage).data[t.off : t.off+t.size : t.off+t.size]
}

// Upload copies src into t (in parallel: a step's input is tens of MB).
func (c *CPU) Upload(t *Tensor, src []float32) {
	dst := f32(t)
	c.parallelElems(len(dst), func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// Download copies t into dst.
func (c *CPU) Download(dst []float32, t *Tensor) {
	c.hostReads.Add(1)
	copy(dst, f32(t))
}

// DownloadRange copies len(dst) elements of t starting at off.
func (c *CPU) DownloadRange(dst []float32, t *Tensor, off int) {
	c.hostReads.Add(1)
	copy(dst, f32(t)[off:])
}

// HostReads is the number of calls so far that hand device data to the
// host and so wait for it: Download, DownloadRange (Tensor.ToHost, CopyTo,
// Item) and SumSquaresHost. On an asynchronous backend each is a sync that
// stalls the queue, so tests count them here, on the CPU, to keep them off
// a training step's path.
func (c *CPU) HostReads() int64 { return c.hostReads.Load() }

// Fill sets every element of t to v.
func (c *CPU) Fill(t *Tensor, v float32) {
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
func (c *CPU) Axpy(y *Tensor, alpha float32, x *Tensor) {
	ys, xs := f32(y), f32(x)
	c.parallelElems(len(ys), func(lo, hi int) {
		yy, xx := ys[lo:hi], xs[lo:hi]
		for i := range yy {
			yy[i] += alpha * xx[i]
		}
	})
}

// Copy2D copies or accumulates a strided block (see Backend.Copy2D).
func (c *CPU) Copy2D(dst *Tensor, dstOff, dstLd int, src *Tensor, srcOff, srcLd int, rows, cols int, accumulate bool) {
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
func (c *CPU) scratchFor(w, n int) []float32 {
	if len(c.scratch[w]) < n {
		c.scratch[w] = make([]float32, n)
	}
	return c.scratch[w][:n]
}

// minParallel is the work (elements touched) below which a kernel runs on
// one goroutine: handing out work costs about a microsecond.
const minParallel = 1 << 14

// parallelElems runs fn over [0, n) in contiguous chunks, one per worker.
func (c *CPU) parallelElems(n int, fn func(lo, hi int)) {
	c.parallelRows(n, 1, func(_, lo, hi int) { fn(lo, hi) })
}

// parallelRows runs fn(worker, lo, hi) over rows [0, n) split into chunks
// that the workers take in turn (a few per worker, so that a worker delayed
// by other processes does not hold the rest up). A worker may get several
// chunks; rowCost (elements per row) decides whether to split at all.
func (c *CPU) parallelRows(n, rowCost int, fn func(w, lo, hi int)) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := min(c.workers, n)
	if n*rowCost < c.minWork || w == 1 {
		fn(0, 0, n)
		return
	}
	chunks := min(n, 4*w)
	var next atomic.Int64
	c.pool.run(w, func(worker int) {
		for {
			i := int(next.Add(1) - 1)
			if i >= chunks {
				return
			}
			fn(worker, i*n/chunks, (i+1)*n/chunks)
		}
	})
}

// workerPool is a fixed set of goroutines; run executes task(i) for i < n
// with task(0) on the calling goroutine.
type workerPool struct {
	tasks chan poolTask
	wg    sync.WaitGroup
}

type poolTask struct {
	fn func(int)
	i  int
}

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

func (p *workerPool) run(n int, fn func(int)) {
	p.wg.Add(n - 1)
	for i := 1; i < n; i++ {
		p.tasks <- poolTask{fn: fn, i: i}
	}
	fn(0)
	p.wg.Wait()
}
