package gelo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo/mixing"
	"github.com/gelo-research/geloattack/internal/sample"
)

// Sampler draws examples from a corpus. It is safe for concurrent use.
type Sampler struct {
	c     data.Corpus
	cfg   Config
	texts [2][]int // corpus indices of the non-empty texts of each split, ascending
}

// NewSampler validates cfg and indexes the splits of c. It fails when a split has too few
// non-empty texts for the largest number of positives (plus one donor for manifold shields).
func NewSampler(c data.Corpus, cfg Config) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c.D() < 1 {
		return nil, fmt.Errorf("gelo sampler: corpus row width d=%d, want >= 1", c.D())
	}
	s := &Sampler{c: c, cfg: cfg}
	for i := 0; i < c.NumTexts(); i++ {
		if c.NumTokens(i) == 0 {
			continue // cannot be a positive or a donor
		}
		sp := data.SplitOf(c.TextID(i), cfg.ValFrac)
		s.texts[sp] = append(s.texts[sp], i)
	}
	need := cfg.MaxTexts()
	why := fmt.Sprintf("positives max %d", need)
	if cfg.ShieldKind == ShieldManifold {
		need++
		why += " plus one manifold donor"
	}
	for _, sp := range []data.Split{data.Train, data.Val} {
		if got := len(s.texts[sp]); got < need {
			return nil, fmt.Errorf("gelo sampler: split %s has %d non-empty texts (val_frac %v), need %d (%s)",
				sp, got, cfg.ValFrac, need, why)
		}
	}
	return s, nil
}

// Config returns the sampler's configuration.
func (s *Sampler) Config() Config { return s.cfg }

// Corpus returns the corpus the sampler draws from.
func (s *Sampler) Corpus() data.Corpus { return s.c }

// Texts returns the corpus indices of the non-empty texts of split, ascending: the pool that
// positives, manifold donors, extra negatives and distractor rows come from. The slice is shared:
// do not modify it. It is nil for an unknown split.
func (s *Sampler) Texts(split data.Split) []int {
	if split != data.Train && split != data.Val {
		return nil
	}
	return s.texts[split]
}

// Workspace is one worker's reusable scratch (float64 QR buffers, X, rows of A). Reusing it across
// examples avoids allocating several n x n and n x d buffers per example. Not safe for concurrent
// use; the zero value is ready.
type Workspace struct {
	mx   mixing.Mixer
	x    []float32 // (n, d)
	aObs []float32 // (nObs, n)
}

// Example draws example index of split with fresh scratch.
func (s *Sampler) Example(split data.Split, index int64) (*Example, error) {
	return s.ExampleWith(new(Workspace), split, index)
}

// ExampleWith draws example index of split, using ws for scratch. The result does not alias ws.
func (s *Sampler) ExampleWith(ws *Workspace, split data.Split, index int64) (*Example, error) {
	return s.exampleWith(ws, split, index, true)
}

// exampleWith is ExampleWith; formU false leaves UObs nil (every other field as with true, U's
// rows included in ObsRows) for a batch whose U = A X the model's device forms (MixOnDevice): the
// host then skips the example's GEMM.
func (s *Sampler) exampleWith(ws *Workspace, split data.Split, index int64, formU bool) (*Example, error) {
	texts := s.Texts(split)
	if texts == nil {
		return nil, fmt.Errorf("gelo example: unknown split %v", split)
	}
	if index < 0 {
		return nil, fmt.Errorf("gelo example: %s index %d, want >= 0", split, index)
	}
	cfg := s.cfg
	d := s.c.D()
	ex := &Example{Index: index, Split: split, D: d, ShieldKind: cfg.ShieldKind}
	wrap := func(err error) error { return fmt.Errorf("gelo example %s/%d: %w", split, index, err) }

	// Per-example parameters: always all five draws in this order, whatever the config, so that
	// e.g. switching the mix kind changes no other parameter.
	pr := stream(cfg.Seed, split, index, stageParams)
	ex.NumPositives = cfg.Positives.drawInt(pr)
	ex.TokensPerText = cfg.TokensPerText.drawInt(pr)
	ex.ShieldFrac = cfg.ShieldFrac.draw(pr)
	ex.ShieldScale = cfg.ShieldScale.draw(pr)
	ex.Kappa = cfg.MixCond.draw(pr)
	if cfg.Mix == MixOrthogonal {
		ex.Kappa = 1
	}

	if err := s.drawClean(ex, texts); err != nil {
		return nil, wrap(err)
	}
	ex.K = cfg.shieldCount(ex.ShieldFrac, ex.NClean)
	if cfg.ShieldRows > 0 {
		ex.ShieldFrac = 0 // drawn only to keep the stream aligned; shield_frac may be unvalidated
	}
	donors, err := s.drawShields(ex, texts)
	if err != nil {
		return nil, wrap(err)
	}
	n := ex.NClean + ex.K
	ex.N = n

	// X = [H; S] with rows shuffled. x: (n, d)
	ex.Perm = stream(cfg.Seed, split, index, stagePerm).Perm(n)
	ex.RowText = make([]int64, n)
	ex.RowShield = make([]bool, n)
	ws.x = grow(ws.x, n*d)
	x := ws.x
	for i, src := range ex.Perm {
		if src < ex.NClean {
			copy(x[i*d:(i+1)*d], ex.H[src*d:(src+1)*d])
			ex.RowText[i] = ex.HText[src]
		} else {
			copy(x[i*d:(i+1)*d], ex.S[(src-ex.NClean)*d:(src-ex.NClean+1)*d])
			ex.RowShield[i] = true
			ex.RowText[i] = -1
			if donors != nil {
				ex.RowText[i] = donors[src-ex.NClean]
			}
		}
	}

	// A: (n, n), fresh per example.
	ex.A = make([]float32, n*n)
	mr := stream(cfg.callSeed(), split, index, stageMix)
	if cfg.Mix == MixNonOrthogonal {
		ws.mx.Conditioned(mr, n, ex.Kappa, ex.A)
	} else {
		ws.mx.Orthogonal(mr, n, ex.A)
	}

	// Observed rows of U = A X: only those rows of A are multiplied.
	ex.NObs = max(1, min(n, ceilCount(cfg.ObsRows*float64(n))))
	if ex.NObs == n {
		ex.ObsRows = make([]int, n)
		for i := range ex.ObsRows {
			ex.ObsRows[i] = i
		}
	} else {
		ex.ObsRows = sample.Distinct(stream(cfg.callSeed(), split, index, stageObserve), n, ex.NObs)
		slices.Sort(ex.ObsRows)
	}
	if !formU {
		return ex, nil
	}
	aObs := ex.A
	if ex.NObs < n {
		ws.aObs = grow(ws.aObs, ex.NObs*n)
		aObs = ws.aObs // aObs: (nObs, n)
		for r, i := range ex.ObsRows {
			copy(aObs[r*n:(r+1)*n], ex.A[i*n:(i+1)*n])
		}
	}
	ex.UObs = make([]float32, ex.NObs*d)
	matmul(ex.NObs, d, n, aObs, x, ex.UObs) // (nObs, n) x (n, d)
	roundSlice(ex.UObs, cfg.ObserveDtype)
	return ex, nil
}

// drawClean picks the positives and their rows: ex.H, HText, HPos, CenterMean, M.
func (s *Sampler) drawClean(ex *Example, texts []int) error {
	cfg := s.cfg
	d := s.c.D()
	tr := stream(cfg.Seed, ex.Split, ex.Index, stageTexts)
	picks := sample.Distinct(tr, len(texts), ex.NumPositives)
	ex.PositiveIdx = make([]int, len(picks))
	ex.Positives = make([]int64, len(picks))
	take := make([]int, len(picks))
	for j, p := range picks {
		ci := texts[p]
		ex.PositiveIdx[j] = ci
		ex.Positives[j] = s.c.TextID(ci)
		take[j] = min(ex.TokensPerText, s.c.NumTokens(ci))
		ex.NClean += take[j]
	}
	ex.H = make([]float32, ex.NClean*d) // H: (NClean, d)
	ex.HText = make([]int64, ex.NClean)
	ex.HPos = make([]int, ex.NClean)
	r := 0
	for j, ci := range ex.PositiveIdx {
		L, t := s.c.NumTokens(ci), take[j]
		if cfg.TokenSampling == TokenWindow {
			off := tr.IntN(L - t + 1)
			if err := s.c.Rows(ci, off, t, ex.H[r*d:(r+t)*d]); err != nil {
				return fmt.Errorf("positive text %d rows [%d, %d): %w", ex.Positives[j], off, off+t, err)
			}
			for i := 0; i < t; i++ {
				ex.HText[r+i], ex.HPos[r+i] = ex.Positives[j], off+i
			}
		} else {
			pos := sample.Distinct(tr, L, t)
			slices.Sort(pos)
			for i, p := range pos {
				if err := s.c.Rows(ci, p, 1, ex.H[(r+i)*d:(r+i+1)*d]); err != nil {
					return fmt.Errorf("positive text %d row %d: %w", ex.Positives[j], p, err)
				}
				ex.HText[r+i], ex.HPos[r+i] = ex.Positives[j], p
			}
		}
		r += t
	}
	if cfg.Center {
		ex.CenterMean = rowMean(ex.H, d)
		for i := 0; i < ex.NClean; i++ {
			row := ex.H[i*d : (i+1)*d]
			for f, mu := range ex.CenterMean {
				row[f] -= mu
			}
		}
	}
	var sum float64
	for i := 0; i < ex.NClean; i++ {
		sum += norm(ex.H[i*d : (i+1)*d])
	}
	ex.M = sum / float64(ex.NClean)
	return nil
}

// maxDonorTries bounds the redraws of a manifold shield row whose norm is zero.
const maxDonorTries = 64

// drawShields draws ex.K shield rows into ex.S and returns the donor text id of each manifold
// shield row (nil for synthetic shields).
func (s *Sampler) drawShields(ex *Example, texts []int) ([]int64, error) {
	cfg := s.cfg
	d := s.c.D()
	k := ex.K
	ex.S = make([]float32, k*d) // S: (K, d)
	sr := stream(cfg.callSeed(), ex.Split, ex.Index, stageShields)
	target := ex.ShieldScale * ex.M // wanted row norm
	sigma := target / math.Sqrt(float64(d))
	switch cfg.ShieldKind {
	case ShieldGaussian:
		for i := range ex.S {
			ex.S[i] = float32(sigma * sr.NormFloat64())
		}
	case ShieldStudentT:
		// Var t(df) = df/(df-2): rescale to variance sigma^2, so E||row||^2 = (scale*m)^2.
		c := sigma * math.Sqrt((cfg.StudentTDF-2)/cfg.StudentTDF)
		for i := range ex.S {
			ex.S[i] = float32(c * studentT(sr, cfg.StudentTDF))
		}
	case ShieldManifold:
		donors := make([]int64, k)
		for j := 0; j < k; j++ {
			row := ex.S[j*d : (j+1)*d]
			for try := 0; ; try++ {
				if try == maxDonorTries {
					return nil, fmt.Errorf("manifold shield %d: %d donor rows in a row had norm 0", j, maxDonorTries)
				}
				ci := donorText(sr, texts, ex.PositiveIdx)
				p := sr.IntN(s.c.NumTokens(ci))
				if err := s.c.Rows(ci, p, 1, row); err != nil {
					return nil, fmt.Errorf("manifold donor text %d row %d: %w", s.c.TextID(ci), p, err)
				}
				for f, mu := range ex.CenterMean {
					row[f] -= mu
				}
				nr := norm(row)
				if nr == 0 {
					continue
				}
				f := float32(target / nr)
				for i := range row {
					row[i] *= f
				}
				donors[j] = s.c.TextID(ci)
				break
			}
		}
		return donors, nil
	}
	return nil, nil
}

// donorText draws a text of the split uniformly among those that are not positives (rejection:
// positives are few, and NewSampler ensured a split holds more texts than positives).
func donorText(rng *rand.Rand, texts, positives []int) int {
	for {
		ci := texts[rng.IntN(len(texts))]
		if !slices.Contains(positives, ci) {
			return ci
		}
	}
}

// rowMean is the per-feature mean of the rows of x: (rows, d), accumulated in float64.
func rowMean(x []float32, d int) []float32 {
	acc := make([]float64, d)
	rows := len(x) / d
	for i := 0; i < rows; i++ {
		for f, v := range x[i*d : (i+1)*d] {
			acc[f] += float64(v)
		}
	}
	mean := make([]float32, d)
	for f, v := range acc {
		mean[f] = float32(v / float64(rows))
	}
	return mean
}

// norm is the Euclidean norm of x, accumulated in float64.
func norm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// grow returns buf resized to n, reusing its storage when large enough.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}
