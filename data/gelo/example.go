package gelo

import "github.com/gelo-research/geloattack/data"

// Example is one obfuscated set (SPEC §3) together with the secrets that made it. Models must only
// ever see UObs (through a Batch): everything else is ground truth for losses and metrics, and A
// and Perm are for diagnostics only.
type Example struct {
	// Index is the example's position in its split's stream; Split is that split.
	Index int64
	Split data.Split
	// N is the number of rows of X = [H; S] (and of U); NClean of H; K of S; NObs of UObs; D the width.
	N, NClean, K, NObs, D int

	// UObs: (NObs, D) row-major, the observed rows of U = A X, in ObsRows order, rounded to
	// ObserveDtype. Inside a Batch it aliases the batch's U.
	UObs []float32
	// ObsRows: (NObs), ascending indices of the rows of U that are observed.
	ObsRows []int

	// H: (NClean, D) the clean rows in the order drawn (positive by positive, position order),
	// centered when the config says so.
	H []float32
	// HText: (NClean) the text id of each row of H; HPos: (NClean) its token position in that text.
	HText []int64
	HPos  []int
	// S: (K, D) the shield rows in the order drawn.
	S []float32
	// CenterMean: (D) the per-feature mean subtracted from H (and manifold shields); nil when not centering.
	CenterMean []float32

	// Perm: (N), X row i is [H; S] row Perm[i] (rows >= NClean of [H; S] are shields).
	Perm []int
	// RowText: (N) per row of X, the text id of a clean row, the donor text id of a manifold shield,
	// -1 for a synthetic shield. RowShield: (N) whether the row of X is a shield.
	RowText   []int64
	RowShield []bool
	// A: (N, N) row-major, the secret mixing matrix: diagnostics only, never a model input.
	A []float32

	// Positives: the positive text ids; PositiveIdx: their corpus indices (same order).
	Positives   []int64
	PositiveIdx []int

	// The per-example draws: number of positives, tokens per text, shield kind, shield fraction
	// (0 when shield_rows > 0 fixes K), shield scale, and kappa (cond(A); 1 for orthogonal).
	NumPositives  int
	TokensPerText int
	ShieldKind    ShieldKind
	ShieldFrac    float64
	ShieldScale   float64
	Kappa         float64
	// M is the mean row norm of H; shields are scaled relative to it.
	M float64
}

// X reconstructs X = [H; S] with rows permuted by Perm: (N, D) row-major, freshly allocated.
func (e *Example) X() []float32 {
	d := e.D
	x := make([]float32, e.N*d)
	for i, src := range e.Perm {
		if src < e.NClean {
			copy(x[i*d:(i+1)*d], e.H[src*d:(src+1)*d])
		} else {
			src -= e.NClean
			copy(x[i*d:(i+1)*d], e.S[src*d:(src+1)*d])
		}
	}
	return x
}
