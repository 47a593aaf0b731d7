package baselines

import (
	"encoding/binary"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// PreparedRows are rows made ready for Residuals once: checked finite, copied to float32 for the
// coarse pass, their energies summed. Rows scored against many row spaces (content recovery's
// candidates, against one U per victim) pay for that once instead of once per row space; the
// residuals are bit for bit those of Residuals on the same rows.
type PreparedRows struct {
	m      *mat.Dense // (t, d); nil when prepared from float32 (PrepareRows32)
	d      int
	m32    dense32   // the same in float32
	energy []float64 // (t): ||r||^2, summed in the row's order
}

// PrepareRows32 prepares rows (t, d) held in float32 (row-major, d values a row; kept, not
// copied: they must not change), without a float64 copy: a float32 row is exactly its float64
// widening, so the residuals are those of PrepareRows on the widened rows, bit for bit, at a
// third of the memory.
func PrepareRows32(data []float32, t, d int) (*PreparedRows, error) {
	if t < 1 || d < 1 || len(data) != t*d {
		return nil, fmt.Errorf("baselines: %d float32 values for %d rows of %d", len(data), t, d)
	}
	p := &PreparedRows{d: d, m32: dense32{r: t, c: d, data: data}, energy: make([]float64, t)}
	for i := range t {
		e := 0.0
		for j, x := range data[i*d : (i+1)*d] {
			v := float64(x)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("baselines: candidate row[%d][%d] = %v is not finite", i, j, v)
			}
			e += v * v
		}
		p.energy[i] = e
	}
	return p, nil
}

// row64 is row i in float64 (buf's memory when the rows are float32's).
func (p *PreparedRows) row64(i int, buf []float64) []float64 {
	if p.m != nil {
		return p.m.RawRowView(i)
	}
	for j, x := range p.m32.data[i*p.d : (i+1)*p.d] {
		buf[j] = float64(x)
	}
	return buf
}

// PrepareRows prepares rows (t, d); it refuses a NaN or infinite entry. rows must not change
// while the preparation is in use.
func PrepareRows(rows *mat.Dense) (*PreparedRows, error) {
	if err := checkFinite("candidate row", rows); err != nil {
		return nil, err
	}
	t, d := rows.Dims()
	p := &PreparedRows{m: rows, d: d, m32: toDense32(rows), energy: make([]float64, t)}
	for i := range t {
		e := 0.0
		for _, x := range rows.RawRowView(i) {
			e += x * x
		}
		p.energy[i] = e
	}
	return p, nil
}

// Rows are the prepared rows (t, d), not to be changed (rows prepared from float32: a new
// float64 copy).
func (p *PreparedRows) Rows() *mat.Dense {
	if p.m != nil {
		return p.m
	}
	out := mat.NewDense(p.m32.r, p.d, nil)
	for i, x := range p.m32.data {
		out.RawMatrix().Data[i] = float64(x)
	}
	return out
}

// Energies are the rows' squared norms (t), not to be changed.
func (p *PreparedRows) Energies() []float64 { return p.energy }

// ResidualsPrepared is Residuals of prepared rows (the energies returned are a copy).
func (s *RowSpace) ResidualsPrepared(p *PreparedRows) (frac, energy []float64, err error) {
	t, d := p.m32.r, p.d
	if d != s.Dim() {
		return nil, nil, fmt.Errorf("baselines: rows of width %d against a row space of width %d", d, s.Dim())
	}
	r := s.Rank()
	proj := newDense32(t, r)
	mulNN(proj, p.m32, s.basis32) // (t, r)
	frac = make([]float64, t)
	energy = append([]float64(nil), p.energy...)
	ref := refiner{s: s, coef: mat.NewVecDense(r, nil), back: mat.NewVecDense(d, nil), done: map[string]float64{}}
	buf := make([]float64, d)
	for i := range t {
		e := energy[i]
		frac[i] = 1
		if e == 0 {
			continue
		}
		pe := 0.0
		for _, x := range proj.data[i*r : (i+1)*r] {
			pe += float64(x) * float64(x)
		}
		f := max(0, min(1, 1-pe/e))
		if f < refineBelow {
			f = ref.frac(p.row64(i, buf), e)
		}
		frac[i] = f
	}
	return frac, energy, nil
}

// refiner recomputes nearly contained rows' residual fractions in float64. A row recurs bit for
// bit among content's candidates (a decoder's rows of a shared prefix, block 0's rows of a
// token): its fraction, a function of its bits alone, is computed once per call.
type refiner struct {
	s          *RowSpace
	coef, back *mat.VecDense // (r), (d): Q^T r and Q Q^T r
	key        []byte
	done       map[string]float64 // row bits -> fraction
}

// frac is ||row - Q Q^T row||^2 / e, e = ||row||^2 > 0.
func (f *refiner) frac(row []float64, e float64) float64 {
	f.key = f.key[:0]
	for _, x := range row {
		f.key = binary.LittleEndian.AppendUint64(f.key, math.Float64bits(x))
	}
	if v, ok := f.done[string(f.key)]; ok {
		return v
	}
	f.coef.MulVec(f.s.basis.T(), mat.NewVecDense(len(row), row)) // Q^T r
	f.back.MulVec(f.s.basis, f.coef)                             // Q Q^T r
	res := 0.0
	for j, x := range row {
		diff := x - f.back.AtVec(j)
		res += diff * diff
	}
	v := min(1, res/e)
	f.done[string(f.key)] = v
	return v
}
