//go:build amd64 && linux

package cpu

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"
)

// guardedSlice returns n float32s whose last element ends exactly where a PROT_NONE page
// begins (end) or whose first element starts exactly where one ends (!end), so that a kernel
// reading or writing one element past either end of the slice faults instead of silently
// touching a neighbour. free unmaps the pages.
func guardedSlice(t *testing.T, n int, end bool) (x []float32, free func()) {
	t.Helper()
	page := syscall.Getpagesize()
	data := roundUp(max(n*4, 1), page)
	mem, err := syscall.Mmap(-1, 0, data+2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", data+2*page, err)
	}
	if err := syscall.Mprotect(mem[:page], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect the leading guard page: %v", err)
	}
	if err := syscall.Mprotect(mem[page+data:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect the trailing guard page: %v", err)
	}
	off := page
	if end {
		off = page + data - n*4
	}
	x = unsafe.Slice((*float32)(unsafe.Pointer(&mem[off])), n)
	return x, func() {
		if err := syscall.Munmap(mem); err != nil {
			t.Errorf("munmap: %v", err)
		}
	}
}

// TestTileGemmStaysInBounds: both register blocks, given operands of exactly the lengths
// tileGemm's bounds check demands, each placed against a PROT_NONE page on one side and then
// the other, read and write nothing outside them (an access past an end faults the test) and
// still give the Go loop's bits: partial row blocks (m 1..7, 13), one to three column blocks,
// k 0, 1 and 7, A row-major or transposed, overwriting and accumulating.
func TestTileGemmStaysInBounds(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA: tileGemm is not used")
	}
	defer func(was bool) { hasAVX512 = was }(hasAVX512)
	kernels := []bool{false}
	if hasAVX512 {
		kernels = append(kernels, true)
	}
	rng := rand.New(rand.NewPCG(41, 7))
	for _, wide := range kernels {
		hasAVX512 = wide
		for _, end := range []bool{true, false} {
			for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 13} {
				for _, n := range []int{16, 32, 48} {
					for _, k := range []int{0, 1, 7} {
						for _, trans := range []bool{false, true} {
							for _, acc := range []bool{false, true} {
								mr := roundUp(m, tileRows)
								ars, aps := k, 1 // A row-major, rows packed tight
								if trans {
									ars, aps = 1, mr
								}
								ldb, ldc := n, n
								alen := (mr-1)*ars + max(k-1, 0)*aps + 1
								blen := max((k-1)*ldb+n, 1)
								clen := (m-1)*ldc + n
								a, fa := guardedSlice(t, alen, end)
								b, fb := guardedSlice(t, blen, end)
								c, fc := guardedSlice(t, clen, end)
								tmp, ft := guardedSlice(t, tileRows*n, end)
								for _, x := range [][]float32{a, b, c, tmp} {
									for i := range x {
										x[i] = float32(rng.NormFloat64())
									}
								}
								want := append([]float32(nil), c...)
								tileGemm(m, n, k, 0.5, a, ars, aps, b, ldb, acc, c, ldc, tmp)
								tileGemmGo(m, n, k, 0.5, a, ars, aps, b, ldb, acc, want, ldc)
								for i := range c {
									if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
										t.Fatalf("AVX-512 %v, guard after %v, m %d n %d k %d trans %v acc %v: c[%d] = %g, want %g",
											wide, end, m, n, k, trans, acc, i, c[i], want[i])
									}
								}
								fa()
								fb()
								fc()
								ft()
							}
						}
					}
				}
			}
		}
	}
}
