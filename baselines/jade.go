package baselines

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// JADEOptions configures JADE.
type JADEOptions struct {
	// Components is the number of sources to extract (0: as many as U has independent rows).
	Components int
	// FullMax is the largest number of components for which the full set of m(m+1)/2 cumulant
	// matrices is built and jointly diagonalised once (classic JADE; O(m^4) memory, O(m^4 T)
	// time). Above it, only the m slices Q(e_i e_i^T) of the current estimate are built and
	// jointly diagonalised, the estimate is rotated and the slices rebuilt, round after round
	// (Cardoso's SHIBBS form of JADE: O(m^3) memory, O(m^3 T) per round). Both forms reach the
	// same estimate where tested (n = 64 Laplace sources, T = 4096: mean |cos| 0.956 full, 0.950
	// slices with the defaults). 0 means 32; -1 always uses slices.
	FullMax int
	// MaxSweeps bounds the Jacobi sweeps of the full form's joint diagonalisation (0: 100).
	MaxSweeps int
	// SweepsPerRound bounds the Jacobi sweeps on one set of slices before they are rebuilt (0: 10).
	SweepsPerRound int
	// MaxRounds bounds the rebuild-and-rotate rounds of the slice form (0: 30).
	MaxRounds int
	// RoundTol stops the slice form once a round's largest rotation (|sin| of its angle) in its
	// first sweep is below RoundTol / sqrt(T), the statistical resolution of T samples: later rounds
	// would polish noise (0: 1; -1: run until a round makes no rotation above the Jacobi threshold
	// 0.01/sqrt(T)).
	RoundTol float64
}

// JADE separates u (n mixtures, T samples) by joint approximate diagonalisation of fourth-order
// cumulant matrices (Cardoso & Souloumiac 1993) of the PCA-whitened data, with Jacobi rotations.
// It needs sources with non-zero excess kurtosis (at most one Gaussian), and T large against m:
// on Laplace sources with T = 4096 it recovers m = 64 (mean |cos| 0.96) but not m = 128 (0.4,
// in both forms), where the estimated cumulants are dominated by sampling noise.
func JADE(ctx context.Context, u *mat.Dense, opts JADEOptions) (Separation, error) {
	if opts.FullMax == 0 {
		opts.FullMax = 32
	}
	if opts.MaxSweeps == 0 {
		opts.MaxSweeps = 100
	}
	if opts.SweepsPerRound == 0 {
		opts.SweepsPerRound = 10
	}
	if opts.MaxRounds == 0 {
		opts.MaxRounds = 30
	}
	if opts.RoundTol == 0 {
		opts.RoundTol = 1
	}
	if opts.MaxSweeps < 0 || opts.SweepsPerRound < 0 || opts.MaxRounds < 0 || opts.FullMax < -1 {
		return Separation{}, fmt.Errorf("baselines: JADE options %+v: want non-negative limits", opts)
	}
	wh, err := whiten(u, opts.Components)
	if err != nil {
		return Separation{}, err
	}
	m, t := wh.z.Dims()
	thresh := 1 / (100 * math.Sqrt(float64(t))) // rotations below the statistical noise are skipped
	if m <= opts.FullMax {
		set := fullCumulants(toDense32(wh.z))
		jd, err := jointDiagonalize(ctx, set, thresh, opts.MaxSweeps)
		if err != nil {
			return Separation{}, err
		}
		return finish(u, wh, jd.v.T(), jd.sweeps, jd.converged), nil
	}
	rot := mat.NewDense(m, m, nil) // current estimate is rot * z
	for i := 0; i < m; i++ {
		rot.Set(i, i, 1)
	}
	z32 := toDense32(wh.z)
	y32 := toDense32(wh.z)
	r32 := newDense32(m, m)
	for round := 1; round <= opts.MaxRounds; round++ {
		if err := ctx.Err(); err != nil {
			return Separation{}, err
		}
		jd, err := jointDiagonalize(ctx, sliceCumulants(y32), thresh, opts.SweepsPerRound)
		if err != nil {
			return Separation{}, err
		}
		if jd.rotations == 0 {
			return finish(u, wh, rot, round, true), nil
		}
		done := opts.RoundTol > 0 && jd.firstMax < opts.RoundTol/math.Sqrt(float64(t))
		var next mat.Dense
		next.Mul(jd.v.T(), rot)
		rot.Copy(&next)
		if done {
			return finish(u, wh, rot, round, true), nil
		}
		r32.set(rot)
		mulNN(y32, r32, z32) // recompute from z rather than rotating y, so errors do not pile up
	}
	return finish(u, wh, rot, opts.MaxRounds, false), nil
}

// momenter computes weighted second moments E[z_i z_j w_t] = (z diag(w) z^T) / T of one z.
type momenter struct {
	z, zw, out dense32 // z, zw: (m, T); out: (m, m)
}

func newMomenter(z dense32) *momenter {
	return &momenter{z: z, zw: newDense32(z.r, z.c), out: newDense32(z.r, z.r)}
}

// moment returns E[z_i z_j w_t] over the samples t, symmetrised, as an (m, m) float64 matrix.
func (mo *momenter) moment(w []float32) *mat.Dense {
	t := mo.z.c
	for i := 0; i < mo.z.r; i++ {
		src, dst := mo.z.data[i*t:(i+1)*t], mo.zw.data[i*t:(i+1)*t]
		for j, v := range src {
			dst[j] = v * w[j]
		}
	}
	mulNT(mo.out, mo.zw, mo.z)
	out := mo.out.toDense64(1 / float64(t))
	m := mo.z.r
	for i := 0; i < m; i++ {
		for j := i + 1; j < m; j++ {
			v := 0.5 * (out.At(i, j) + out.At(j, i))
			out.Set(i, j, v)
			out.Set(j, i, v)
		}
	}
	return out
}

// sliceCumulants returns the m cumulant slices Q(e_p e_p^T) of whitened z (m, T):
// Q_p[i][j] = Cum(z_i, z_j, z_p, z_p) = E[z_i z_j z_p^2] - delta_ij - 2 delta_ip delta_jp.
func sliceCumulants(z dense32) *symSet {
	pairs := make([][2]int, z.r)
	for p := range pairs {
		pairs[p] = [2]int{p, p}
	}
	return cumulantSet(z, pairs)
}

// fullCumulants returns the m(m+1)/2 cumulant matrices Q(M) of whitened z (m, T) for the basis
// M = e_p e_p^T and M = (e_p e_q^T + e_q e_p^T)/sqrt(2), p < q, of symmetric matrices: together they
// hold the whole fourth-order cumulant tensor, which is what classic JADE diagonalises.
func fullCumulants(z dense32) *symSet {
	var pairs [][2]int
	for p := 0; p < z.r; p++ {
		for q := p; q < z.r; q++ {
			pairs = append(pairs, [2]int{p, q})
		}
	}
	return cumulantSet(z, pairs)
}

// cumulantBlock is the number of (i, j) rows per product in cumulantSet: 1024 x T float32 is 16 MB
// at T = 4096.
const cumulantBlock = 1024

// cumulantSet returns the cumulant matrices Q(M_k) of whitened z (m, T) for the basis matrices
// M_k = e_p e_p^T (p = q) or (e_p e_q^T + e_q e_p^T)/sqrt(2) (p < q), (p, q) = pairs[k]:
// Q_k[i][j] = Cum(z_i, z_j, z_p, z_q) (times sqrt(2) when p < q), where for white data
// Cum(i,j,p,q) = E[z_i z_j z_p z_q] - d_ij d_pq - d_ip d_jq - d_iq d_jp. The fourth moments of all
// (i <= j) against all pairs come from products of pairwise-product rows, (pairs(i,j), T) times
// (T, K), blocked over (i, j): one large GEMM instead of one small one per matrix.
func cumulantSet(z dense32, pairs [][2]int) *symSet {
	m, t := z.r, z.c
	kk := len(pairs)
	set := newSymSet(m, kk)
	row := func(i int) []float32 { return z.data[i*t : (i+1)*t] }
	right := newDense32(kk, t) // row k: z_p * z_q
	for k, pq := range pairs {
		dst, zp, zq := right.data[k*t:(k+1)*t], row(pq[0]), row(pq[1])
		for s := range dst {
			dst[s] = zp[s] * zq[s]
		}
	}
	var ij [][2]int
	for i := 0; i < m; i++ {
		for j := i; j < m; j++ {
			ij = append(ij, [2]int{i, j})
		}
	}
	left := newDense32(min(cumulantBlock, len(ij)), t)
	out := newDense32(left.r, kk)
	inv := 1 / float64(t)
	for start := 0; start < len(ij); start += cumulantBlock {
		b := min(cumulantBlock, len(ij)-start)
		l := dense32{r: b, c: t, data: left.data[:b*t]}
		for r := 0; r < b; r++ {
			dst, zi, zj := l.data[r*t:(r+1)*t], row(ij[start+r][0]), row(ij[start+r][1])
			for s := range dst {
				dst[s] = zi[s] * zj[s]
			}
		}
		o := dense32{r: b, c: kk, data: out.data[:b*kk]}
		mulNT(o, l, right) // (b, K): sum_t z_i z_j z_p z_q
		for r := 0; r < b; r++ {
			i, j := ij[start+r][0], ij[start+r][1]
			cij, cji := set.cell(i, j), set.cell(j, i)
			for k, pq := range pairs {
				p, q := pq[0], pq[1]
				v := float64(o.data[r*kk+k])*inv - delta(i, j)*delta(p, q) - delta(i, p)*delta(j, q) - delta(i, q)*delta(j, p)
				if p != q {
					v *= math.Sqrt2
				}
				cij[k] = float32(v)
				cji[k] = float32(v)
			}
		}
	}
	return set
}

func delta(i, j int) float64 {
	if i == j {
		return 1
	}
	return 0
}
