package cuda

import (
	"runtime"
	"sync"
	"unsafe"
)

// Large uploads (a batch of U is B*N*d floats, 64 MiB for the paper
// preset) go through two page-locked staging halves: several goroutines
// copy a chunk into one half while the DMA engine reads the previous chunk
// from the other. From pageable memory the driver stages through its own
// buffers with one thread, at about half the speed.
const (
	stageChunk    = 4 << 20 // float32 elements per half (16 MiB)
	stageMinBytes = 1 << 20 // smaller uploads take the driver's pageable path
)

// stager holds the page-locked halves and the events of their last DMA.
type stager struct {
	half  [2]unsafe.Pointer
	event [2]uintptr
	used  [2]bool // an event was recorded for the half
}

// uploadStaged copies src to dst through the page-locked halves; false
// when they cannot be allocated (the caller falls back to the pageable
// path).
func (b *Backend) uploadStaged(dst DevicePtr, src []float32) bool {
	d := b.dev
	st := b.stage
	if st == nil {
		st = &stager{}
		for i := range st.half {
			if d.Drv.cuMemAllocHost(&st.half[i], stageChunk*4) != 0 || d.Drv.cuEventCreate(&st.event[i], 2) != 0 { // CU_EVENT_DISABLE_TIMING
				b.freeStage(st)
				b.stageFailed = true
				return false
			}
		}
		b.stage = st
	}
	workers := min(8, runtime.GOMAXPROCS(0))
	for c, off := 0, 0; off < len(src); c, off = c+1, off+stageChunk {
		n := min(stageChunk, len(src)-off)
		i := c % 2
		if st.used[i] {
			b.fail(d.Drv.Check("cuEventSynchronize", d.Drv.cuEventSynchronize(st.event[i])))
		}
		buf := unsafe.Slice((*float32)(st.half[i]), n)
		parallelCopy(buf, src[off:off+n], workers)
		b.fail(d.Drv.Check("cuMemcpyHtoDAsync", d.Drv.cuMemcpyHtoDA(dst+DevicePtr(4*off), st.half[i], uint64(n)*4, d.stream)))
		b.fail(d.Drv.Check("cuEventRecord", d.Drv.cuEventRecord(st.event[i], d.stream)))
		st.used[i] = true
	}
	return true
}

// parallelCopy is copy(dst, src) split over workers goroutines.
func parallelCopy(dst, src []float32, workers int) {
	per := (len(src) + workers - 1) / workers
	if workers < 2 || per < 1<<16 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	for lo := 0; lo < len(src); lo += per {
		hi := min(lo+per, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

// freeStage releases the staging halves (after their DMAs).
func (b *Backend) freeStage(st *stager) {
	d := b.dev
	for i := range st.half {
		if st.event[i] != 0 {
			d.Drv.cuEventSynchronize(st.event[i])
			d.Drv.cuEventDestroy(st.event[i])
		}
		if st.half[i] != nil {
			d.Drv.cuMemFreeHost(st.half[i])
		}
	}
}
