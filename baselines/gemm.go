package baselines

import (
	"github.com/gelo-research/geloattack/engine/blas"
	"gonum.org/v1/gonum/mat"
)

// The products over the T samples (m x T by T x m, T = d = 4096) dominate FastICA and JADE at
// n = 256. They run in float32 through engine/blas (OpenBLAS when present, 4-5x gonum's float64
// GEMM here); float32 round-off (~1e-6 relative over 4096 terms) is far below the sampling noise
// (~1/sqrt(T)) of the statistics they estimate. Everything else stays float64.

// dense32 is a row-major float32 matrix: (r, c).
type dense32 struct {
	r, c int
	data []float32
}

func newDense32(r, c int) dense32 { return dense32{r: r, c: c, data: make([]float32, r*c)} }

// toDense32 copies a float64 matrix into float32.
func toDense32(m *mat.Dense) dense32 {
	r, c := m.Dims()
	out := newDense32(r, c)
	for i := 0; i < r; i++ {
		row := out.data[i*c : (i+1)*c]
		for j, v := range m.RawRowView(i) {
			row[j] = float32(v)
		}
	}
	return out
}

// set copies a float64 matrix of the same shape into d.
func (d dense32) set(m *mat.Dense) {
	for i := 0; i < d.r; i++ {
		row := d.data[i*d.c : (i+1)*d.c]
		for j, v := range m.RawRowView(i) {
			row[j] = float32(v)
		}
	}
}

// mulNN sets dst = a b; a: (m, k), b: (k, n), dst: (m, n).
func mulNN(dst, a, b dense32) {
	blas.Sgemm(false, false, a.r, b.c, a.c, 1, a.data, a.c, b.data, b.c, 0, dst.data, dst.c)
}

// mulNT sets dst = a b^T; a: (m, k), b: (n, k), dst: (m, n).
func mulNT(dst, a, b dense32) {
	blas.Sgemm(false, true, a.r, b.r, a.c, 1, a.data, a.c, b.data, b.c, 0, dst.data, dst.c)
}

// toDense64 copies d into a new float64 matrix, scaled by s.
func (d dense32) toDense64(s float64) *mat.Dense {
	out := mat.NewDense(d.r, d.c, nil)
	for i := 0; i < d.r; i++ {
		row := out.RawRowView(i)
		for j, v := range d.data[i*d.c : (i+1)*d.c] {
			row[j] = s * float64(v)
		}
	}
	return out
}
