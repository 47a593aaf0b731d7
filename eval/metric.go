package eval

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Metric is a mean over examples with its standard error and the mean chance level of the same
// examples, the figure it must be compared with.
type Metric struct {
	// Mean is the average value.
	Mean float64 `json:"mean"`
	// StdErr is the standard error of Mean (sample standard deviation / sqrt(N)); 0 when N < 2.
	StdErr float64 `json:"stderr"`
	// Chance is the average chance level of the same examples.
	Chance float64 `json:"chance"`
	// N is the number of values averaged.
	N int `json:"n"`
}

// String formats the metric as "mean ± stderr (chance c, n N)".
func (m Metric) String() string {
	return fmt.Sprintf("%.4f ± %.4f (chance %.4f, n %d)", m.Mean, m.StdErr, m.Chance, m.N)
}

// Accumulator collects (value, chance) pairs and summarises them as a Metric. The zero value is
// ready to use. Sums are kept with Welford's update so that many small values stay accurate.
type Accumulator struct {
	n      int
	mean   float64
	m2     float64
	chance float64
}

// Add records one value with its chance level.
func (a *Accumulator) Add(value, chance float64) {
	a.n++
	d := value - a.mean
	a.mean += d / float64(a.n)
	a.m2 += d * (value - a.mean)
	a.chance += (chance - a.chance) / float64(a.n)
}

// Merge adds everything b has recorded to a.
func (a *Accumulator) Merge(b Accumulator) {
	if b.n == 0 {
		return
	}
	if a.n == 0 {
		*a = b
		return
	}
	n := a.n + b.n
	d := b.mean - a.mean
	a.m2 += b.m2 + d*d*float64(a.n)*float64(b.n)/float64(n)
	a.mean += d * float64(b.n) / float64(n)
	a.chance += (b.chance - a.chance) * float64(b.n) / float64(n)
	a.n = n
}

// Metric returns the summary of everything added so far.
func (a *Accumulator) Metric() Metric {
	m := Metric{Mean: a.mean, Chance: a.chance, N: a.n}
	if a.n > 1 {
		m.StdErr = math.Sqrt(a.m2 / float64(a.n-1) / float64(a.n))
	}
	return m
}

// Percentile returns the q-th quantile (q in [0, 1]) of xs by linear interpolation between order
// statistics at position q*(len-1), the convention of numpy's default. It returns NaN for no data.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	if lo < 0 {
		return s[0]
	}
	f := pos - float64(lo)
	return s[lo] + f*(s[lo+1]-s[lo])
}

// FromFloat32 wraps float32 row-major data of shape (rows, cols) as a float64 matrix. The
// conversion is exact, so rows that were bit-identical in float32 stay bit-identical.
func FromFloat32(rows, cols int, data []float32) (*mat.Dense, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("eval: shape (%d, %d) is not positive", rows, cols)
	}
	if len(data) != rows*cols {
		return nil, fmt.Errorf("eval: %d values for shape (%d, %d), want %d", len(data), rows, cols, rows*cols)
	}
	out := make([]float64, len(data))
	for i, v := range data {
		out[i] = float64(v)
	}
	return mat.NewDense(rows, cols, out), nil
}

// rowNorms returns the Euclidean norm of every row of x.
func rowNorms(x *mat.Dense) []float64 {
	r, _ := x.Dims()
	out := make([]float64, r)
	for i := range out {
		out[i] = math.Sqrt(sumSq(x.RawRowView(i)))
	}
	return out
}

func sumSq(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return s
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// cosine returns cos(a, b) given both norms, and 0 when either vector is zero: a zero row points
// nowhere, so it neither matches nor anti-matches anything.
func cosine(a, b []float64, na, nb float64) float64 {
	if na == 0 || nb == 0 {
		return 0
	}
	c := dot(a, b) / (na * nb)
	return max(-1, min(1, c))
}

// CosineMatrix returns C (rows of a, rows of b) with C[i][j] = cos(a_i, b_j); zero rows give 0.
// a: (n, d), b: (m, d).
func CosineMatrix(a, b *mat.Dense) (*mat.Dense, error) {
	n, d := a.Dims()
	m, d2 := b.Dims()
	if d != d2 {
		return nil, fmt.Errorf("eval: cosine of rows of width %d and %d", d, d2)
	}
	var c mat.Dense
	c.Mul(a, b.T()) // (n, m)
	na, nb := rowNorms(a), rowNorms(b)
	for i := 0; i < n; i++ {
		row := c.RawRowView(i)
		for j := 0; j < m; j++ {
			if na[i] == 0 || nb[j] == 0 {
				row[j] = 0
			} else {
				row[j] = max(-1, min(1, row[j]/(na[i]*nb[j])))
			}
		}
	}
	return &c, nil
}

// checkFinite reports the first NaN or infinite entry of x, naming what x is.
func checkFinite(what string, x mat.Matrix) error {
	r, c := x.Dims()
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			if v := x.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("eval: %s[%d][%d] = %v is not finite", what, i, j, v)
			}
		}
	}
	return nil
}
