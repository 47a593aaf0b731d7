// Package membershiptest draws synthetic GELO observations for the tests of membership scores.
package membershiptest

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// World is a synthetic GELO observation: X (n, d) rows made of a large component in a common
// k0-dimensional subspace plus an individual isotropic part of relative size eps (hidden states
// are anisotropic: a few directions carry most energy), m gaussian shields of norm scale times
// X's rms row norm, A orthogonal (kappa 1) or with singular values log-spaced in [1, kappa],
// U rounded to bits mantissa bits (0: float64 kept).
type World struct {
	N, D, K0, M int
	Eps, Scale  float64
	Kappa       float64
	Bits        int
}

// Drawn is one draw of a World: X, the observed U and the common subspace (its rows).
type Drawn struct {
	X, U   *mat.Dense
	Common *mat.Dense // (k0, d) orthonormal rows
}

// Draw draws X, shields and A, and returns X and U = A [X; S] rounded.
func (w World) Draw(rng *rand.Rand) Drawn {
	common := orthonormalRows(rng, w.K0, w.D)
	x := w.Rows(rng, common, w.N)
	rms := math.Sqrt(mat.Norm(x, 2) * mat.Norm(x, 2) / float64(w.N))
	z := mat.NewDense(w.N+w.M, w.D, nil)
	z.Slice(0, w.N, 0, w.D).(*mat.Dense).Copy(x)
	for i := w.N; i < w.N+w.M; i++ {
		for j := 0; j < w.D; j++ {
			z.Set(i, j, rng.NormFloat64()*w.Scale*rms/math.Sqrt(float64(w.D)))
		}
	}
	nz := w.N + w.M
	q1 := orthonormalRows(rng, nz, nz)
	a := q1
	if w.Kappa > 1 {
		q2 := orthonormalRows(rng, nz, nz)
		s := mat.NewDiagDense(nz, nil)
		for i := 0; i < nz; i++ {
			s.SetDiag(i, math.Pow(w.Kappa, float64(i)/float64(nz-1)))
		}
		var t mat.Dense
		t.Mul(q1, s)
		a = new(mat.Dense)
		a.Mul(&t, q2.T())
	}
	u := new(mat.Dense)
	u.Mul(a, z)
	if w.Bits > 0 {
		raw := u.RawMatrix().Data
		for i, v := range raw {
			if v != 0 {
				e := math.Floor(math.Log2(math.Abs(v)))
				q := math.Ldexp(1, int(e)-w.Bits+1)
				raw[i] = math.Round(v/q) * q
			}
		}
	}
	return Drawn{X: x, U: u, Common: common}
}

// Rows draws t rows of the world's distribution.
func (w World) Rows(rng *rand.Rand, common *mat.Dense, t int) *mat.Dense {
	x := mat.NewDense(t, w.D, nil)
	for i := 0; i < t; i++ {
		row := x.RawRowView(i)
		for c := 0; c < w.K0; c++ {
			g := rng.NormFloat64() * math.Exp(-float64(c)/4)
			for j := range row {
				row[j] += g * common.At(c, j)
			}
		}
		for j := range row {
			row[j] += rng.NormFloat64() * w.Eps / math.Sqrt(float64(w.D))
		}
	}
	return x
}

// orthonormalRows is r orthonormal rows of width d (r <= d).
func orthonormalRows(rng *rand.Rand, r, d int) *mat.Dense {
	g := mat.NewDense(d, r, nil)
	for i := range g.RawMatrix().Data {
		g.RawMatrix().Data[i] = rng.NormFloat64()
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	out := mat.NewDense(r, d, nil)
	out.Copy(q.Slice(0, d, 0, r).(*mat.Dense).T())
	return out
}
