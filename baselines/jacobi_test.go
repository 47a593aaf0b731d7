package baselines

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestRotateMatchesDenseProduct: the symmetric shortcut in rotate equals G^T M G computed densely.
func TestRotateMatchesDenseProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	const m, k = 7, 3
	set := newSymSet(m, k)
	dense := make([]*mat.Dense, k)
	for kk := 0; kk < k; kk++ {
		a := mat.NewDense(m, m, nil)
		for i := 0; i < m; i++ {
			for j := i; j < m; j++ {
				v := rng.NormFloat64()
				a.Set(i, j, v)
				a.Set(j, i, v)
			}
		}
		set.setMatrix(kk, a)
		dense[kk] = a
	}
	p, q, theta := 2, 5, 0.7
	c, s := math.Cos(theta), math.Sin(theta)
	set.rotate(p, q, c, s, 1)
	g := mat.NewDense(m, m, nil)
	for i := 0; i < m; i++ {
		g.Set(i, i, 1)
	}
	g.Set(p, p, c)
	g.Set(q, q, c)
	g.Set(p, q, -s)
	g.Set(q, p, s)
	for kk := 0; kk < k; kk++ {
		var tmp, want mat.Dense
		tmp.Mul(g.T(), dense[kk])
		want.Mul(&tmp, g)
		for i := 0; i < m; i++ {
			for j := 0; j < m; j++ {
				if got := float64(set.cell(i, j)[kk]); math.Abs(got-want.At(i, j)) > 1e-5 {
					t.Fatalf("matrix %d entry (%d,%d): %v, want %v", kk, i, j, got, want.At(i, j))
				}
			}
		}
	}
}

// TestJointDiagonalizeRecoversCommonBasis: matrices V D_k V^T with a common orthogonal V and
// distinct diagonals are exactly diagonalised, and V is recovered up to order and sign.
func TestJointDiagonalizeRecoversCommonBasis(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const m, k = 6, 4
	var qr mat.QR
	g := mat.NewDense(m, m, nil)
	for i := 0; i < m; i++ {
		for j := 0; j < m; j++ {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	qr.Factorize(g)
	var v mat.Dense
	qr.QTo(&v)
	set := newSymSet(m, k)
	for kk := 0; kk < k; kk++ {
		d := mat.NewDiagDense(m, nil)
		for i := 0; i < m; i++ {
			d.SetDiag(i, rng.NormFloat64())
		}
		var tmp, a mat.Dense
		tmp.Mul(&v, d)
		a.Mul(&tmp, v.T())
		set.setMatrix(kk, &a)
	}
	jd, err := jointDiagonalize(context.Background(), set, 1e-7, 50)
	if err != nil {
		t.Fatal(err)
	}
	if !jd.converged {
		t.Fatalf("no convergence after %d sweeps", jd.sweeps)
	}
	off := 0.0
	for i := 0; i < m; i++ {
		for j := 0; j < m; j++ {
			if i != j {
				for _, x := range set.cell(i, j) {
					off = max(off, math.Abs(float64(x)))
				}
			}
		}
	}
	if off > 1e-5 {
		t.Errorf("largest off-diagonal entry after joint diagonalisation %v", off)
	}
	var p mat.Dense
	p.Mul(jd.v.T(), &v) // a signed permutation when V is recovered
	for i := 0; i < m; i++ {
		big := 0.0
		for j := 0; j < m; j++ {
			big = max(big, math.Abs(p.At(i, j)))
		}
		if big < 1-1e-5 {
			t.Errorf("row %d of V_hat^T V is not a signed unit vector: max %v", i, big)
		}
	}
}
