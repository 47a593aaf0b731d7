package baselines

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/splitpool"
	"github.com/gelo-research/geloattack/eval"
	"gonum.org/v1/gonum/mat"
)

// Classical blind source separation over sampled examples, scored beside random rows, and the
// shield-scale table: the drivers behind `baseline -attack fastica|jade|fobi|jd`.

// BSSFunc is a blind source separation method as the tables run it.
type BSSFunc func(ctx context.Context, u *mat.Dense) (Separation, error)

// BSSMethod names a BSSFunc.
type BSSMethod struct {
	// Name is the method's name in reports.
	Name string
	// Run separates U.
	Run BSSFunc
}

// DefaultBSSMethods returns FastICA and JADE with default options (FastICA seeded with seed).
func DefaultBSSMethods(seed uint64) []BSSMethod {
	return []BSSMethod{
		{"fastica", func(ctx context.Context, u *mat.Dense) (Separation, error) {
			return FastICA(ctx, u, FastICAOptions{Seed: seed})
		}},
		{"jade", func(ctx context.Context, u *mat.Dense) (Separation, error) { return JADE(ctx, u, JADEOptions{}) }},
	}
}

// BSSOptions configures classical BSS over sampled examples.
type BSSOptions struct {
	// Split is the split examples come from.
	Split data.Split
	// Examples is the number of examples, indices 0..Examples-1 of the split's stream (0: 2).
	Examples int
	// Seed seeds the random rows of the chance baseline.
	Seed uint64
}

// BSSRow is a BSS method's classical figures over one sampler configuration.
type BSSRow struct {
	// Method names the method; ShieldScale is the configuration's shield scale (0: no shields).
	Method      string  `json:"method"`
	ShieldScale float64 `json:"shield_scale"`
	Split       string  `json:"split"`
	// N and NClean are the mean numbers of rows of X and of H.
	N      float64 `json:"n"`
	NClean float64 `json:"n_clean"`
	// P95AbsCos and MeanAbsCos are the per-example p95 and mean |cos| between the estimated
	// sources and the clean rows H after Hungarian matching, averaged over examples. Their Chance
	// is the same figure for as many random rows of the split (texts other than the example's).
	P95AbsCos  eval.Metric `json:"p95_abs_cos"`
	MeanAbsCos eval.Metric `json:"mean_abs_cos"`
	// GramErr is the Gram error of SPEC §6, ||G_est - G_true||_F / ||G_true||_F over the matched
	// rows as estimated, and GramErrAligned the same after scaling each estimate by its
	// least-squares factor onto its match (the scale and sign BSS cannot identify; a best case,
	// since it uses the truth). Lower is better; Chance is the random rows' figure.
	GramErr        eval.Metric `json:"gram_err"`
	GramErrAligned eval.Metric `json:"gram_err_aligned"`
	// RandomRows is the mean number of random rows drawn per example for the Chance figures: as
	// many as the method estimated.
	RandomRows float64 `json:"random_rows"`
	// Converged counts the examples on which the method converged; Seconds is its mean run time.
	Converged int     `json:"converged"`
	Seconds   float64 `json:"seconds"`
}

// BSSEval runs method on U_obs of each example and scores the estimated sources against the
// example's clean rows H (the attacker's target; shields are not scored).
func BSSEval(ctx context.Context, s *gelo.Sampler, method BSSMethod, opts BSSOptions) (BSSRow, error) {
	if opts.Examples == 0 {
		opts.Examples = 2
	}
	if opts.Examples < 0 {
		return BSSRow{}, fmt.Errorf("baselines: %d BSS examples", opts.Examples)
	}
	cfg := s.Config()
	row := BSSRow{Method: method.Name, Split: opts.Split.String()}
	if !(cfg.ShieldRows == 0 && cfg.ShieldFrac.Max == 0) {
		row.ShieldScale = cfg.ShieldScale.Max
	}
	var acc classicalAcc
	var elapsed time.Duration
	for i := 0; i < opts.Examples; i++ {
		ex, err := s.Example(opts.Split, int64(i))
		if err != nil {
			return BSSRow{}, err
		}
		u, err := eval.FromFloat32(ex.NObs, ex.D, ex.UObs)
		if err != nil {
			return BSSRow{}, err
		}
		h, err := eval.FromFloat32(ex.NClean, ex.D, ex.H)
		if err != nil {
			return BSSRow{}, err
		}
		start := time.Now()
		sep, err := method.Run(ctx, u)
		if err != nil {
			return BSSRow{}, fmt.Errorf("baselines: %s on example %d: %w", method.Name, i, err)
		}
		elapsed += time.Since(start)
		if sep.Converged {
			row.Converged++
		}
		if err := acc.scoreVsRandom(s, opts.Split, ex, sep.Sources, h, opts.Seed, opts.Seed+uint64(i)); err != nil {
			return BSSRow{}, err
		}
		row.N += float64(ex.N) / float64(opts.Examples)
		row.NClean += float64(ex.NClean) / float64(opts.Examples)
	}
	row.P95AbsCos, row.MeanAbsCos = acc.p95.Metric(), acc.mean.Metric()
	row.GramErr, row.GramErrAligned = acc.gram.Metric(), acc.gramAligned.Metric()
	row.RandomRows = acc.meanDraws()
	row.Seconds = elapsed.Seconds() / float64(max(1, opts.Examples))
	return row, nil
}

// classicalAcc accumulates the classical figures (SPEC §6) of an estimate over examples, each
// beside the same figure for random rows.
type classicalAcc struct {
	p95, mean, gram, gramAligned eval.Accumulator
	draws                        int // random rows drawn, over all examples
	// pool is the split's row pool the random rows come from, built on first use (seeded by the
	// options' seed and the split alone, so every example of a run draws from the same pool).
	pool *splitpool.Rows
}

// scoreVsRandom adds est's classical figures against truth (after Hungarian matching) to the
// accumulators, each beside its chance level: the same figure for as many random rows of the split
// (randomRows), drawn with drawSeed. poolSeed seeds the split's row pool.
func (a *classicalAcc) scoreVsRandom(s *gelo.Sampler, split data.Split, ex *gelo.Example, est, truth *mat.Dense, poolSeed, drawSeed uint64) error {
	got, err := eval.ClassicalScore(est, truth)
	if err != nil {
		return err
	}
	m, _ := est.Dims()
	random, err := a.randomRows(s, split, ex, m, poolSeed, drawSeed)
	if err != nil {
		return err
	}
	chance, err := eval.ClassicalScore(random, truth)
	if err != nil {
		return fmt.Errorf("baselines: random rows: %w", err)
	}
	a.p95.Add(got.AbsCosP95, chance.AbsCosP95)
	a.mean.Add(got.AbsCosMean, chance.AbsCosMean)
	a.gram.Add(got.GramErr, chance.GramErr)
	a.gramAligned.Add(got.GramErrAligned, chance.GramErrAligned)
	a.draws += m
	return nil
}

// randomRows draws k rows of the split by splitpool's rule, the one the unmix metric's random rows
// follow: distinct rows of the split's row pool (splitpool.DefaultRows rows, seeded by poolSeed)
// from texts other than the example's, centred like its clean rows. It is the prediction that
// knows the data distribution but nothing of the example. k: rows wanted; out: (k, d).
func (a *classicalAcc) randomRows(s *gelo.Sampler, split data.Split, ex *gelo.Example, k int, poolSeed, drawSeed uint64) (*mat.Dense, error) {
	if a.pool == nil {
		p, err := splitpool.NewRows(s.Corpus(), s.Texts(split), splitpool.DefaultRows, splitpool.RowsSeed(poolSeed, split))
		if err != nil {
			return nil, fmt.Errorf("baselines: row pool of split %s: %w", split, err)
		}
		a.pool = p
	}
	rng := rand.New(rand.NewPCG(drawSeed, 0x63686e6365)) // "chnce"
	out := mat.NewDense(k, a.pool.D(), nil)
	if err := a.pool.Draw(rng, a.pool.Outside(ex.Positives), ex.CenterMean, out); err != nil {
		return nil, fmt.Errorf("baselines: random rows for example %d of split %s: %w", ex.Index, split, err)
	}
	return out, nil
}

// meanDraws is the mean number of random rows drawn per example (0 before any).
func (a *classicalAcc) meanDraws() float64 {
	n := a.p95.Metric().N
	if n == 0 {
		return 0
	}
	return float64(a.draws) / float64(n)
}

// randomRowsNote explains the random-rows column of the classical tables.
const randomRowsNote = "random rows: the figure a random guess of rows reaches; above it = recovery " +
	"(for the Gram errors, lower is better: below it = recovery). They are distinct rows of texts of the split " +
	"other than the example's, centred like its clean rows, as many as the estimates, matched to the clean rows the same way."

// gramNote says what the Gram error rows are.
const gramNote = "Gram error: ||G_est - G_true||_F / ||G_true||_F over the matched rows (SPEC §6); " +
	"rescaled: after scaling each estimate by its least-squares factor onto its match (BSS cannot " +
	"identify scale or sign; it uses the true rows, so it is a best case, not an attack)."

// classicalTable formats the classical figures as a Markdown table: the method's mean ± standard
// error over examples beside the random rows' mean, then the notes that explain the columns.
func classicalTable(method string, draws float64, p95, mean, gram, gramAligned eval.Metric) string {
	examples := "examples"
	if p95.N == 1 {
		examples = "example"
	}
	header := []string{fmt.Sprintf("figure (mean over %d %s)", p95.N, examples), method,
		fmt.Sprintf("random rows (%s draws per example)", strconv.FormatFloat(draws, 'g', 4, 64))}
	rows := [][]string{header}
	for _, f := range []struct {
		name string
		m    eval.Metric
	}{
		{"p95 |cos| after matching", p95}, {"mean |cos| after matching", mean},
		{"Gram error", gram}, {"Gram error, rows rescaled onto matches", gramAligned},
	} {
		rows = append(rows, []string{f.name, fmt.Sprintf("%.4f ± %.4f", f.m.Mean, f.m.StdErr), fmt.Sprintf("%.4f", f.m.Chance)})
	}
	return markdownTable(rows) + randomRowsNote + "\n" + gramNote + "\n"
}

// markdownTable lays out rows (the first is the header) as a Markdown table with padded columns.
func markdownTable(rows [][]string) string {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var sb strings.Builder
	line := func(cells []string) {
		for i, c := range cells {
			fmt.Fprintf(&sb, "| %s%s ", c, strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
		}
		sb.WriteString("|\n")
	}
	line(rows[0])
	rule := make([]string, len(width))
	for i, w := range width {
		rule[i] = strings.Repeat("-", w)
	}
	line(rule)
	for _, r := range rows[1:] {
		line(r)
	}
	return sb.String()
}

// Table formats the row's classical figures beside random rows' (classicalTable) under a line
// naming the method, split and sizes.
func (r BSSRow) Table() string {
	return fmt.Sprintf("%s on %s: n %.0f (%.0f clean), %d/%d converged, %.1f s per example\n",
		r.Method, r.Split, r.N, r.NClean, r.Converged, r.P95AbsCos.N, r.Seconds) +
		classicalTable(r.Method, r.RandomRows, r.P95AbsCos, r.MeanAbsCos, r.GramErr, r.GramErrAligned)
}

// ShieldTableOptions configures ShieldTable.
type ShieldTableOptions struct {
	// BSS says which split and how many examples per cell.
	BSS BSSOptions
	// N is the number of rows of X = [H; S] (0: 256).
	N int
	// Positives is the number of texts per example (0: 4); tokens per text = n_clean / Positives.
	Positives int
	// ShieldRows is the number of shield rows at scales > 0 (0: 24, so n_clean = 232 at N = 256).
	// At scale 0 there are no shields and all N rows are clean.
	ShieldRows int
	// Scales are the shield scales (nil: 0, 1, 10).
	Scales []float64
	// Methods are the BSS methods (nil: DefaultBSSMethods(BSS.Seed)).
	Methods []BSSMethod
}

// ShieldTable measures how shield scale changes what classical BSS recovers: for every method and
// shield scale it runs BSSEval on s's configuration with the row counts and the shield scale
// replaced (shield kind, mixing, observation and the rest are s's).
func ShieldTable(ctx context.Context, s *gelo.Sampler, opts ShieldTableOptions) ([]BSSRow, error) {
	if opts.N == 0 {
		opts.N = 256
	}
	if opts.Positives == 0 {
		opts.Positives = 4
	}
	if opts.ShieldRows == 0 {
		opts.ShieldRows = 24
	}
	if opts.Scales == nil {
		opts.Scales = []float64{0, 1, 10}
	}
	if opts.Methods == nil {
		opts.Methods = DefaultBSSMethods(opts.BSS.Seed)
	}
	var out []BSSRow
	for _, scale := range opts.Scales {
		if scale < 0 || math.IsNaN(scale) || math.IsInf(scale, 0) {
			return nil, fmt.Errorf("baselines: shield scale %v", scale)
		}
		cfg := s.Config()
		clean := opts.N
		cfg.ShieldRows, cfg.ShieldFrac = 0, gelo.Fixed(0)
		if scale > 0 {
			clean = opts.N - opts.ShieldRows
			cfg.ShieldRows = opts.ShieldRows
			cfg.ShieldScale = gelo.Fixed(scale)
		}
		if clean < opts.Positives || clean%opts.Positives != 0 {
			return nil, fmt.Errorf("baselines: %d clean rows do not split evenly over %d positives", clean, opts.Positives)
		}
		cfg.Positives = gelo.Fixed(float64(opts.Positives))
		cfg.TokensPerText = gelo.Fixed(float64(clean / opts.Positives))
		cs, err := gelo.NewSampler(s.Corpus(), cfg)
		if err != nil {
			return nil, fmt.Errorf("baselines: shield table cell scale %v: %w", scale, err)
		}
		for _, m := range opts.Methods {
			row, err := BSSEval(ctx, cs, m, opts.BSS)
			if err != nil {
				return nil, fmt.Errorf("baselines: shield table cell %s, scale %v: %w", m.Name, scale, err)
			}
			row.ShieldScale = scale
			out = append(out, row)
		}
	}
	return out, nil
}
