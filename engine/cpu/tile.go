package cpu

import "math"

// tileRows and tileCols are tileGemm's register block: six rows of C by sixteen columns, twelve
// AVX2 accumulators.
const (
	tileRows = 6
	tileCols = 16
)

// roundUp is n rounded up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// tileGemm computes C (m x n, row stride ldc) = alpha * A B, or C += alpha * A B with acc, for
// the small products of attention, without BLAS's packing of both operands and its zeroing pass
// over C. A(r, p) is a[r*ars + p*aps] (a row-major matrix, or with ars = 1 a transposed one),
// B (k x n) is row-major with stride ldb; n must be a multiple of tileCols. Each element is one
// FMA chain over p = 0..k-1 from zero, times alpha, then (acc) added to C with one rounding:
// the order OpenBLAS's kernels sum a product with k within one block (tileGemmGo is the same
// computation in Go). A must be readable on rows up to m rounded up to tileRows (those rows'
// results are dropped); tmp holds at least tileRows*n elements for the last partial block.
func tileGemm(m, n, k int, alpha float32, a []float32, ars, aps int, b []float32, ldb int, acc bool, c []float32, ldc int, tmp []float32) {
	if m == 0 || n == 0 {
		return
	}
	// Bounds, checked here so that the assembly never reads or writes outside the slices.
	lastA := (roundUp(m, tileRows)-1)*ars + max(k-1, 0)*aps
	if n%tileCols != 0 || len(a) <= lastA || (k > 0 && len(b) < (k-1)*ldb+n) || len(c) < (m-1)*ldc+n || len(tmp) < tileRows*n {
		panic("cpu: tileGemm: operands too short for their shapes")
	}
	block := tile6x16AVX2
	if hasAVX512 {
		block = tile6x16AVX512
	}
	full := m / tileRows * tileRows
	for i := 0; i < full; i += tileRows {
		block(&c[i*ldc], ldc, &a[i*ars], ars, aps, &b[0], ldb, k, n/tileCols, alpha, acc)
	}
	if full == m {
		return
	}
	block(&tmp[0], n, &a[full*ars], ars, aps, &b[0], ldb, k, n/tileCols, alpha, false)
	for r := range m - full {
		dst, src := c[(full+r)*ldc:(full+r)*ldc+n], tmp[r*n:(r+1)*n]
		if acc {
			for j, v := range src {
				dst[j] += v
			}
		} else {
			copy(dst, src)
		}
	}
}

// tileGemmGo is tileGemm written out in Go (slow; the tests' reference): the same FMA chains
// in the same order, so the same bits.
func tileGemmGo(m, n, k int, alpha float32, a []float32, ars, aps int, b []float32, ldb int, acc bool, c []float32, ldc int) {
	for i := range m {
		for j := range n {
			var s float32
			for p := range k {
				s = fma32(a[i*ars+p*aps], b[p*ldb+j], s)
			}
			s *= alpha
			if acc {
				s += c[i*ldc+j]
			}
			c[i*ldc+j] = s
		}
	}
}

// fma32 is a*b + c rounded once to float32. The product is exact in float64; the sum is rounded
// to odd there (nearest, then the last bit forced to 1 when inexact), which makes the final
// rounding to float32 the correct one (float64 keeps more than 24+1 bits).
func fma32(a, b, c float32) float32 {
	p, q := float64(a)*float64(b), float64(c)
	s := p + q
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	bv := s - p
	err := (p - (s - bv)) + (q - bv) // s + err = p + q exactly (TwoSum)
	if bits := math.Float64bits(s); err != 0 && bits&1 == 0 {
		if (err > 0) == (s > 0) {
			bits++ // away from zero, towards the exact sum
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}
