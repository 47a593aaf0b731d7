// Package membership tests candidate rows for membership in what a GELO observer sees: the rows
// U_obs of U = A [X; S] (possibly rounded, possibly with rows dropped). It is the training-free
// core shared by content recovery (`geloattack recover`) and prompt decoding.
//
// Three measures, each lower = more likely a row of X, each a per-row number:
//
//   - Residual: the fraction of the row's energy outside rowspace(U_obs) at the numerical rank
//     (baselines.RowSpace). Exact below full rank (rank(U_obs) < d): a row of X is contained up to
//     rounding, a row that is not is not. Once n + shields >= d the row space is all of R^d and the
//     residual says nothing.
//   - Leverage: l(x) = x^T G^+ x with G = U_obs^T U_obs. With every row observed,
//     G = Z^T A^T A Z (Z = [X; S]), and for a row z of Z, l(z) <= 1/sigma_min(A)^2 whatever the
//     shields (z^T (Z^T M Z)^-1 z = e^T M^-1/2 P M^-1/2 e with P a projection). GELO's A has
//     singular values in [1, kappa] (orthogonal: all 1), so a row of X has leverage <= 1, while a
//     row outside X picks up 1/lambda for every direction where only shields put energy: weak
//     shields make wrong rows' leverage large. kappa shrinks wrong rows' leverage by up to kappa^2
//     and leaves the bound of true rows at 1. With rows dropped the bound does not hold (G loses
//     terms), so Leverage then ranks but never certifies.
//   - TopK: the fraction of the row's energy outside the top-k right singular directions of U_obs.
//     Hidden states are anisotropic: X's energy sits in few directions, isotropic shields spread
//     theirs over all d, so past full rank the top directions still belong mostly to X. The
//     attacker does not know n, so k is chosen from U's spectrum: every k of Ks() is scored and a
//     caller keeps the k whose best candidate leads the runner-up most (no truth needed).
//
// Absolute tests (what every row of X is guaranteed to pass, so that failing one is proof that a
// row is not in X): below full rank, a residual at most ResidualBound(); at full rank with every
// row observed, a leverage at most the row's own RowLeverageBound(energy) (Scores.LeverageBound).
// Both allow for Options.Recompute, the relative error between the attacker's recomputed row and
// the row the deployer mixed (RecomputeError gives a default): a recomputed row is never
// bit-equal to the deployer's once the BLAS kernel, the batch composition or the precision
// differs. Passing a test is necessary for membership, not sufficient: past full rank rows that
// are not in X pass the leverage test too (strong shields, near-duplicates of a row of X), so a
// pass is no proof. TopK has no absolute test of its own.
package membership

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/engine/blas"
)

// Measure names one of the per-row membership measures.
type Measure int

const (
	// Residual is the energy fraction outside rowspace(U_obs) at the numerical rank.
	Residual Measure = iota
	// Leverage is x^T (U_obs^T U_obs)^+ x.
	Leverage
	// TopK is the energy fraction outside the top-k right singular directions of U_obs.
	TopK
)

// Measures lists every measure in the order of the constants.
var Measures = []Measure{Residual, Leverage, TopK}

// String names the measure as reports spell it.
func (m Measure) String() string {
	switch m {
	case Residual:
		return "residual"
	case Leverage:
		return "leverage"
	case TopK:
		return "topk"
	}
	return fmt.Sprintf("measure(%d)", int(m))
}

// Options says what the observer knows of the protocol (Kerckhoffs: the settings, not A or S).
type Options struct {
	// UnitRoundoff is the observed dtype's unit round-off (2^-24 fp32, 2^-11 fp16, 2^-8 bf16).
	UnitRoundoff float64
	// AllObserved says every row of U reaches the observer (obs_rows 1), so the leverage bound
	// holds.
	AllObserved bool
	// SigmaMinA is the protocol's smallest singular value of A (GELO's construction: 1); 0 means 1.
	SigmaMinA float64
	// RankTol is the relative singular-value cut-off of the numerical rank (RankTol(U, u) for
	// the observed precision).
	RankTol float64
	// Recompute is rho, a bound on ||x_att - x_dep|| / ||x_dep||: the relative 2-norm error
	// between the attacker's recomputed row x_att and the row x_dep the deployer mixed into U.
	// ResidualBound and RowLeverageBound widen by it. 0 keeps the bounds of bit-equal rows, which
	// only holds when both sides ran the same kernels on the same batches (RecomputeError and
	// StoredRecompute give a default from the deployer's precision).
	Recompute float64
}

// Space is U_obs prepared for scoring: its row space at the numerical rank and its right singular
// directions.
type Space struct {
	n, d, rank int
	uEff       float64
	opt        Options
	rs         *baselines.RowSpace
	v          *mat.Dense // (d, r): right singular vectors, by decreasing singular value
	sig2       []float64  // (r): squared singular values, decreasing
	ks         []int
	// sigMin is the smallest singular value of U_obs at full rank (0 below it), which bounds how
	// far a recomputation error can move a leverage: l = x^T G^-1 x with ||G^-1/2|| = 1/sigMin.
	sigMin float64
	// eig are the Gram matrix's eigenvalues, decreasing (the squared singular values of U_obs,
	// dropped ones included); sigDrop is the largest singular value below the numerical rank
	// (0 when none was dropped), what a row of X can have lost to the rank cut.
	eig     []float64
	sigDrop float64
}

// ResidualSafety multiplies the effective unit round-off in ResidualBound. A contained row's
// residual norm is the rounding's component outside the row space, about the unit round-off
// times a factor of order one (measured: 0.1-0.3 u for the secret's rows on the real MiniLM store
// in bf16 and fp32, 0.6-0.7 u on the synthetic worlds of the tests), so 10 u leaves more than a
// decade. It is a measured premise, not a theorem, and it does not cover directions of [X; S]
// that sank under the rounding floor (near-duplicate rows such as [CLS] in bf16, or a kappa that
// lifts sigma_max(U) and with it the cut-off): true rows may then stick out by more. Space.Deficient
// says when that can have happened (rank below the rows of U_obs); callers must not read a failed
// residual test as proof of absence then.
const ResidualSafety = 10

// LeverageSlack is the relative slack on the leverage bound for rounding.
const LeverageSlack = 0.25

// New prepares uObs (n_obs, d).
func New(uObs *mat.Dense, opt Options) (*Space, error) {
	n, d := uObs.Dims()
	if n == 0 || d == 0 {
		return nil, fmt.Errorf("membership: empty U (%d x %d)", n, d)
	}
	if !(opt.UnitRoundoff > 0 && opt.UnitRoundoff < 1) {
		return nil, fmt.Errorf("membership: unit round-off %v outside (0, 1)", opt.UnitRoundoff)
	}
	if opt.SigmaMinA == 0 {
		opt.SigmaMinA = 1
	}
	if !(opt.SigmaMinA > 0) || math.IsInf(opt.SigmaMinA, 0) {
		return nil, fmt.Errorf("membership: sigma_min(A) %v, want > 0", opt.SigmaMinA)
	}
	if !(opt.RankTol > 0 && opt.RankTol < 1) {
		return nil, fmt.Errorf("membership: rank tolerance %v outside (0, 1)", opt.RankTol)
	}
	if !(opt.Recompute >= 0 && opt.Recompute < 1) {
		// rho >= 1 allows x_att = 0 for any x_dep: no bound is left to test against.
		return nil, fmt.Errorf("membership: recomputation error %v outside [0, 1)", opt.Recompute)
	}
	s := &Space{n: n, d: d, opt: opt, uEff: max(opt.UnitRoundoff, 0x1p-24*math.Sqrt(float64(n)))}
	// Single-threaded LAPACK and DGEMM: their sums split by OpenBLAS's thread count otherwise, and
	// a row that sits at the rank tolerance or a tie in a ranking would follow GOMAXPROCS.
	var err error
	blas.Default().Serial(func() { err = s.spectrum(uObs) })
	if err != nil {
		return nil, err
	}
	s.ks = chooseKs(s.sig2)
	s.rank = len(s.sig2)
	if s.rank >= d {
		s.sigMin = math.Sqrt(s.sig2[s.rank-1])
	}
	if s.rank < d {
		// The residual needs the row space to round-off (RowSpace refines contained rows in
		// float64); at full rank it is all of R^d and the basis, an n x n eigenproblem for
		// n >= d rows, would buy nothing.
		var rs *baselines.RowSpace
		blas.Default().Serial(func() { rs, err = baselines.NewRowSpace(uObs, opt.RankTol) })
		if err != nil {
			return nil, fmt.Errorf("membership: %w", err)
		}
		s.rs, s.rank = rs, rs.Rank()
	}
	if s.rank < len(s.eig) {
		s.sigDrop = math.Sqrt(max(0, s.eig[s.rank]))
	}
	return s, nil
}

// spectrum fills v and sig2 from the smaller Gram matrix of uObs, keeping the directions above
// the rank tolerance. The Gram product, the eigendecomposition and the products with U run on
// engine/blas (OpenBLAS's DSYRK, LAPACK dsyevd and DGEMM when loaded): at d = 4096 past full
// rank gonum's pure-Go U^T U and EigenSym took minutes.
func (s *Space) spectrum(u *mat.Dense) error {
	n, d := u.Dims()
	ur := u.RawMatrix()
	small := n < d
	m := d // Gram size
	if small {
		m = n
	}
	g := make([]float64, m*m) // (m, m): U U^T when small, else U^T U
	blas.Gram(!small, m, n+d-m, ur.Data, ur.Stride, g, m)
	vals := make([]float64, m)
	if err := blas.EigSym(m, g, m, vals); err != nil { // vals ascending, vectors in g's columns
		return fmt.Errorf("membership: eigendecomposition of the Gram matrix of U (%d x %d): %w", n, d, err)
	}
	s.eig = make([]float64, m)
	for i, v := range vals {
		s.eig[m-1-i] = v
	}
	top := vals[m-1]
	if !(top > 0) {
		return fmt.Errorf("membership: U is zero")
	}
	cut := s.opt.RankTol * s.opt.RankTol * top
	var keep []int
	for j := m - 1; j >= 0; j-- {
		if vals[j] > cut {
			keep = append(keep, j)
		}
	}
	r := len(keep)
	s.sig2 = make([]float64, r)
	s.v = mat.NewDense(d, r, nil)
	vr := s.v.RawMatrix()
	if small {
		// v = U^T e / sigma: right singular vectors from left ones.
		e := make([]float64, n*r) // (n, r): kept eigenvectors, scaled by 1/sigma
		for c, j := range keep {
			s.sig2[c] = vals[j]
			inv := 1 / math.Sqrt(vals[j])
			for i := 0; i < n; i++ {
				e[i*r+c] = g[i*m+j] * inv
			}
		}
		blas.Dgemm(true, false, d, r, n, 1, ur.Data, ur.Stride, e, r, 0, vr.Data, vr.Stride)
		return nil
	}
	for c, j := range keep {
		s.sig2[c] = vals[j]
		for i := 0; i < d; i++ {
			vr.Data[i*vr.Stride+c] = g[i*m+j]
		}
	}
	return nil
}

// TopKFractions are the fractions of the retained rank that Ks always holds (besides the gap's k).
func TopKFractions() []float64 { return []float64{0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 0.9375} }

// chooseKs is the set of k scored by TopK, from the spectrum alone: the k after the largest drop
// of log singular value (the edge between the data's directions and the shields' bulk, when
// there is one), and a grid of fractions of the retained rank.
func chooseKs(sig2 []float64) []int {
	r := len(sig2)
	set := map[int]bool{}
	if r >= 2 {
		best, at := -1.0, 1
		for i := 0; i+1 < r; i++ {
			g := math.Log(sig2[i] / sig2[i+1])
			if g > best {
				best, at = g, i+1
			}
		}
		set[at] = true
	}
	for _, f := range TopKFractions() {
		if k := int(math.Round(f * float64(r))); k >= 1 && k < r {
			set[k] = true
		}
	}
	if len(set) == 0 {
		set[r] = true
	}
	ks := make([]int, 0, len(set))
	for k := range set {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// D is the row width.
func (s *Space) D() int { return s.d }

// Rank is the numerical rank of U_obs.
func (s *Space) Rank() int { return s.rank }

// FullRank says rowspace(U_obs) is all of R^d at the numerical rank: Residual is then void.
func (s *Space) FullRank() bool { return s.rank >= s.d }

// Deficient says the numerical rank is below both d and the number of observed rows: some
// direction of rowspace(U_obs) sank under the rounding floor and was dropped, so a row of X may
// lie outside the retained row space by more than rounding (ResidualSafety's premise fails).
func (s *Space) Deficient() bool { return s.rank < s.d && s.rank < s.n }

// AllObserved says every row of U reaches the observer. Only then does a failed residual test
// mean a row is not in X: with rows dropped, rowspace(U_obs) is a subspace of rowspace([X; S])
// that need not hold X's rows (a contained row is still evidence, an uncontained one is not).
func (s *Space) AllObserved() bool { return s.opt.AllObserved }

// Ks are the k that TopK scores, increasing.
func (s *Space) Ks() []int { return s.ks }

// ResidualBound is the largest residual fraction of a recomputed row of X below full rank:
//
//	((ResidualSafety u_eff + rho) / (1 - rho))^2
//
// u_eff the unit round-off or, in fp32, the accumulation of the float32 product A X, rho
// Options.Recompute. Why: let P be the projection off rowspace(U_obs). A row the deployer mixed
// is contained up to rounding, ||P x_dep|| <= ResidualSafety u_eff ||x_dep|| (the premise; see
// ResidualSafety for what it rests on). The attacker scores x_att = x_dep + e with
// ||e|| <= rho ||x_dep||, and ||P e|| <= ||e||, so
//
//	||P x_att|| <= (ResidualSafety u_eff + rho) ||x_dep||,  ||x_att|| >= (1 - rho) ||x_dep||,
//
// and the fraction ||P x_att||^2 / ||x_att||^2 is at most the bound. rho = 0 is the bound of
// bit-equal rows, (ResidualSafety u_eff)^2.
func (s *Space) ResidualBound() float64 {
	b := (ResidualSafety*s.uEff + s.opt.Recompute) / (1 - s.opt.Recompute)
	return b * b
}

// LeverageBound is the largest leverage of a row of X that the attacker computed bit-equal to
// the deployer's, 1/sigma_min(A)^2 with slack for rounding; 0 when the bound does not hold (rows
// dropped, or below full rank where the pseudo-inverse ignores what lies outside the row space).
// With Options.Recompute > 0 compare each row with its own RowLeverageBound instead (Score fills
// Scores.LeverageBound).
func (s *Space) LeverageBound() float64 {
	if !s.opt.AllObserved || !s.FullRank() {
		return 0
	}
	return (1 + LeverageSlack) / (s.opt.SigmaMinA * s.opt.SigmaMinA)
}

// RowLeverageBound is the largest leverage of a recomputed row of X of squared norm energy, past
// full rank with every row observed (0 where LeverageBound is 0):
//
//	(sqrt(LeverageBound()) + rho ||x_att|| / ((1 - rho) sigma_min(U_obs)))^2
//
// Why: at full rank l(x) = ||G^-1/2 x||^2 with G = U_obs^T U_obs, and ||G^-1/2|| = 1/sigma_min(U_obs).
// For x_att = x_dep + e, the triangle inequality gives sqrt(l(x_att)) <= sqrt(l(x_dep)) +
// ||e|| / sigma_min(U_obs), with l(x_dep) <= LeverageBound() and ||e|| <= rho ||x_dep|| <=
// rho ||x_att|| / (1 - rho). The bound depends on the row's own norm: a long row moves further.
func (s *Space) RowLeverageBound(energy float64) float64 {
	b := s.LeverageBound()
	if b == 0 || s.opt.Recompute == 0 {
		return b
	}
	r := math.Sqrt(b) + s.opt.Recompute*math.Sqrt(energy)/((1-s.opt.Recompute)*s.sigMin)
	return r * r
}

// SigmaMin is the smallest singular value of U_obs at full rank; 0 below full rank, where the
// smallest retained one says nothing about directions outside the row space.
func (s *Space) SigmaMin() float64 { return s.sigMin }

// Recompute is the recomputation error rho the bounds allow for (Options.Recompute).
func (s *Space) Recompute() float64 { return s.opt.Recompute }

// Scores are per-row measures of t rows.
type Scores struct {
	// Residual and Leverage are per row (t).
	Residual, Leverage []float64
	// TopK[j] is per row, outside the top Ks()[j] directions.
	TopK [][]float64
	// Energy is each row's squared norm.
	Energy []float64
	// LeverageBound is each row's RowLeverageBound (t): a row whose Leverage exceeds its own
	// bound is not a row of X. nil where no leverage bound holds (below full rank, rows dropped).
	LeverageBound []float64
}

// Score measures rows (t, d).
func (s *Space) Score(rows *mat.Dense) (*Scores, error) { return s.score(rows, true, nil) }

// ScoreSpectral is Score without the residual (Residual is nil), for callers that have it already
// (content scores the residual of every row with its own aggregates): the residual's float64
// refinement of nearly contained rows is the costly part below full rank.
func (s *Space) ScoreSpectral(rows *mat.Dense) (*Scores, error) { return s.score(rows, false, nil) }

// ScoreSpectralPrepared is ScoreSpectral of rows prepared once (checked finite, energies summed)
// for many spaces: content scores its candidates' rows against one space per victim.
func (s *Space) ScoreSpectralPrepared(p *baselines.PreparedRows) (*Scores, error) {
	return s.score(p.Rows(), false, p)
}

// score is Score (residual) or ScoreSpectral of rows, prepared as prep when not nil.
func (s *Space) score(rows *mat.Dense, residual bool, prep *baselines.PreparedRows) (*Scores, error) {
	t, d := rows.Dims()
	if d != s.d {
		return nil, fmt.Errorf("membership: rows of width %d against U of width %d", d, s.d)
	}
	if prep == nil {
		if err := checkFinite(rows); err != nil {
			return nil, err
		}
	}
	var frac, energy []float64
	if prep != nil && !residual {
		frac, energy = make([]float64, t), append([]float64(nil), prep.Energies()...)
	} else if s.rs != nil && residual {
		var err error
		if frac, energy, err = s.rs.Residuals(rows); err != nil {
			return nil, fmt.Errorf("membership: %w", err)
		}
	} else {
		// Full rank (every row contained: its residual is the projection's round-off), or no
		// residual asked for.
		frac, energy = make([]float64, t), make([]float64, t)
		for i := range energy {
			for _, x := range rows.RawRowView(i) {
				energy[i] += x * x
			}
		}
	}
	out := &Scores{Residual: frac, Energy: energy, Leverage: make([]float64, t), TopK: make([][]float64, len(s.ks))}
	for j := range out.TopK {
		out.TopK[j] = make([]float64, t)
	}
	if s.LeverageBound() > 0 {
		out.LeverageBound = make([]float64, t)
	}
	r := len(s.sig2)
	c := make([]float64, t*r) // (t, r): coordinates along the right singular directions
	rr, vr := rows.RawMatrix(), s.v.RawMatrix()
	blas.Default().Serial(func() { blas.Dgemm(false, false, t, r, d, 1, rr.Data, rr.Stride, vr.Data, vr.Stride, 0, c, r) })
	for i := 0; i < t; i++ {
		ci := c[i*r : (i+1)*r]
		lev, in := 0.0, 0.0
		kj := 0
		for j := 0; j < r; j++ {
			lev += ci[j] * ci[j] / s.sig2[j]
			in += ci[j] * ci[j]
			for kj < len(s.ks) && s.ks[kj] == j+1 {
				out.TopK[kj][i] = outside(in, energy[i])
				kj++
			}
		}
		out.Leverage[i] = lev
		if out.LeverageBound != nil {
			out.LeverageBound[i] = s.RowLeverageBound(energy[i])
		}
		if s.rs == nil {
			frac[i] = outside(in, energy[i])
		}
	}
	if !residual {
		out.Residual = nil
	}
	return out, nil
}

// outside is the energy fraction outside a subspace holding in of e, in [0, 1] (1 for a zero row).
func outside(in, e float64) float64 {
	if e == 0 {
		return 1
	}
	return max(0, min(1, 1-in/e))
}

// RowSpace is the row space of U_obs at the numerical rank (what Residual measures against); nil
// at full rank, where it is all of R^d.
func (s *Space) RowSpace() *baselines.RowSpace { return s.rs }

// Lead returns the index of the lowest of scores and how far the second lowest lies above it
// (+Inf for one score): what an attacker sees of a ranking without knowing the truth.
func Lead(scores []float64) (best int, lead float64) {
	second := math.Inf(1)
	for i, v := range scores {
		if v < scores[best] {
			second = scores[best]
			best = i
		} else if i != best && v < second {
			second = v
		}
	}
	return best, second - scores[best]
}

// checkFinite refuses rows holding NaN or Inf.
func checkFinite(rows *mat.Dense) error {
	t, _ := rows.Dims()
	for i := 0; i < t; i++ {
		for j, x := range rows.RawRowView(i) {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("membership: row %d, column %d: %v", i, j, x)
			}
		}
	}
	return nil
}

// Unit round-offs of the observed element types.
const (
	roundFP32 = 0x1p-24
	roundBF16 = 0x1p-8
	roundFP16 = 0x1p-11
)

// UnitRoundoff returns the unit round-off of an observe dtype: "none"/"" (float32), "bf16", "fp16".
func UnitRoundoff(dtype string) (float64, error) {
	switch dtype {
	case "", "none", "fp32":
		return roundFP32, nil
	case "bf16":
		return roundBF16, nil
	case "fp16":
		return roundFP16, nil
	}
	return 0, fmt.Errorf("membership: observe dtype %q: want none, bf16 or fp16", dtype)
}

// RankSafety multiplies the estimated rounding-noise norm in RankTol.
const RankSafety = 4

// RankTol returns the relative singular-value cut-off for the numerical rank of uObs (n, d) stored
// with unit round-off u: singular values below it are indistinguishable from the rounding noise.
// Rounding each entry to relative precision u adds a noise matrix E of entries ~ u/sqrt(3) |U_ij|
// (uniform relative error), whose spectral norm is about (u/sqrt(3)) rms(U) (sqrt(n) + sqrt(d));
// the float32 product A X itself adds ~ 2^-24 sqrt(n) relative. The cut-off is RankSafety times
// that norm over sigma_max(U), clamped to [1e-12, 0.5].
func RankTol(uObs *mat.Dense, u float64) float64 {
	n, d := uObs.Dims()
	uEff := max(u, roundFP32*math.Sqrt(float64(n)))
	fro := mat.Norm(uObs, 2)
	rms := fro / math.Sqrt(float64(n*d))
	noise := uEff / math.Sqrt(3) * rms * (math.Sqrt(float64(n)) + math.Sqrt(float64(d)))
	smax := sigmaMax(uObs)
	if !(smax > 0) {
		return 0.5
	}
	return min(0.5, max(1e-12, RankSafety*noise/smax))
}

// sigmaMax estimates the largest singular value of u (n, d) by power iteration on u^T u from a
// fixed start (deterministic), to a few parts in 1e4, which is all a tolerance needs.
func sigmaMax(u *mat.Dense) float64 {
	n, d := u.Dims()
	v := mat.NewVecDense(d, nil)
	for j := 0; j < d; j++ {
		v.SetVec(j, 1/math.Sqrt(float64(d))+1e-3*float64(j%7))
	}
	w := mat.NewVecDense(n, nil)
	prev := 0.0
	for it := 0; it < 100; it++ {
		w.MulVec(u, v)
		v.MulVec(u.T(), w)
		nv := mat.Norm(v, 2)
		if nv == 0 {
			return 0
		}
		v.ScaleVec(1/nv, v)
		s := math.Sqrt(nv)
		if math.Abs(s-prev) < 1e-5*s {
			return s
		}
		prev = s
	}
	return prev
}
