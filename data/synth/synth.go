// Package synth generates synthetic stores of LLM-like hidden states: the embedded default corpus
// of geloattack, and a fixture for tests.
//
// The generative model has two parts. A fixed "model", chosen by Config.ModelSeed and shared by
// every corpus generated with it (as an open LLM is shared by every text an attacker runs it on):
// an anisotropic variance profile over coordinates (a power law tuned to a target participation
// ratio, spread over coordinates by a fixed permutation), a common mean direction, a few
// high-magnitude outlier coordinates, a Zipf vocabulary of token vectors, frozen rows for BOS and
// the most frequent tokens, and a fixed random non-linear text-embedding map. And the texts,
// chosen by Config.Seed: each text draws a latent direction z and its length and token ids, and
// row t is
//
//	u_t = base + sqrt(w_text) z + sqrt(w_token) v[token_t] + sqrt(w_noise) eps_t,
//	h_t = rho_t u_t / ||u_t||,   rho_t = NormMean (1 + NormCV g_t),
//
// with z, v and eps drawn N(0, diag(lambda)), sum(lambda) = 1, base = sqrt(w_mean) mu +
// sqrt(w_outlier) o. Rows of frozen tokens (BOS at position 0, and the most frequent vocabulary
// ids up to FrozenMass of the token mass) do not depend on the text: they are bit-identical
// wherever they occur, like the BOS state of a causal LM. The text-level candidate embedding is
// e = normalize(W2 tanh(1.5 W1 x)), x = normalize(mean_t h_t/||h_t|| - base), W1: (H, d) and
// W2: (e, H) fixed Gaussian matrices: a function of the text's rows alone, dominated by z, so it
// is learnable from a handful of rows and distinct for distinct texts.
package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/synth/synthcfg"
	"github.com/gelo-research/geloattack/internal/numfmt"
)

// Config describes a synthetic corpus (data/synth/synthcfg, the schema leaf run configs read).
type Config = synthcfg.Config

// Weights split a row's energy (synthcfg.Weights).
type Weights = synthcfg.Weights

// DefaultConfig is the embedded default corpus: 2000 texts of 32..96 rows at d = 256, e = 128.
func DefaultConfig() Config { return synthcfg.DefaultConfig() }

// Rules is every numeric field of Config with its bounds (synthcfg.Rules).
var Rules = synthcfg.Rules

// Token ids: 0 is padding (never produced), 1 is BOS, vocabulary rank k is id k+2.
const (
	bosID    = 1
	firstTok = 2
)

// Random stream ids: every stream is (seed, id), so adding a stream never shifts another.
const (
	streamProfile = 1 + iota
	streamMean
	streamOutliers
	streamVocab
	streamFrozen
	streamEmbed
	streamCalibrate
	streamText = 1 << 32 // + text index
)

// model is the fixed part: everything that does not depend on Config.Seed.
type model struct {
	cfg    Config
	sd     []float32 // sd: (d) per-coordinate standard deviation, sum sd^2 = 1
	base   []float32 // base: (d) sqrt(w_mean) mu + sqrt(w_outlier) o
	vocab  []float32 // vocab: (Vocab+1, d), row 0 is BOS's vector, row 1+k is rank k's
	frozen int       // ranks 0..frozen-1 are frozen
	// frozenRows: (frozen+1, d), row 0 BOS, already rounded to the dtype.
	frozenRows []float32
	w1         []float32 // w1: (hidden, d)
	w2         []float32 // w2: (e, hidden)
	hidden     int
	wText      float32 // sqrt of the normalised weights
	wToken     float32
	wNoise     float32
}

func normalWeights(w Weights) Weights {
	s := w.Mean + w.Outlier + w.Text + w.Token + w.Noise
	return Weights{Mean: w.Mean / s, Outlier: w.Outlier / s, Text: w.Text / s, Token: w.Token / s, Noise: w.Noise / s}
}

func newModel(cfg Config) *model {
	d := cfg.D
	w := normalWeights(cfg.Weights)
	m := &model{cfg: cfg, wText: float32(math.Sqrt(w.Text)), wToken: float32(math.Sqrt(w.Token)), wNoise: float32(math.Sqrt(w.Noise))}

	m.base = make([]float32, d)
	mu := unitGaussian(rand.New(rand.NewPCG(cfg.ModelSeed, streamMean)), d, nil)
	orng := rand.New(rand.NewPCG(cfg.ModelSeed, streamOutliers))
	o := make([]float64, d)
	var on float64
	for _, j := range orng.Perm(d)[:cfg.Outliers] {
		v := 0.7 + 0.6*orng.Float64()
		if orng.IntN(2) == 0 {
			v = -v
		}
		o[j] = v
		on += v * v
	}
	for j := range m.base {
		b := math.Sqrt(w.Mean) * mu[j]
		if on > 0 {
			b += math.Sqrt(w.Outlier) * o[j] / math.Sqrt(on)
		}
		m.base[j] = float32(b)
	}

	// Variance profile: a power law, calibrated so that the rows after norm fixing have the
	// target participation ratio, on permuted coordinates so that no ordering of features
	// carries meaning.
	perm := rand.New(rand.NewPCG(cfg.ModelSeed, streamProfile)).Perm(d)
	lam := m.calibratedProfile(perm, w.Text+w.Token+w.Noise)
	m.sd = make([]float32, d)
	for j := range m.sd {
		m.sd[j] = float32(math.Sqrt(lam[perm[j]]))
	}

	vrng := rand.New(rand.NewPCG(cfg.ModelSeed, streamVocab))
	m.vocab = make([]float32, (cfg.Vocab+1)*d)
	for k := 0; k <= cfg.Vocab; k++ {
		row := m.vocab[k*d : (k+1)*d]
		for j := range row {
			row[j] = m.sd[j] * float32(vrng.NormFloat64())
		}
	}

	m.frozen = frozenRanks(cfg)
	frng := rand.New(rand.NewPCG(cfg.ModelSeed, streamFrozen))
	m.frozenRows = make([]float32, (m.frozen+1)*d)
	u := make([]float32, d)
	for k := 0; k <= m.frozen; k++ {
		// A frozen row is an ordinary row whose latent and noise are fixed per token.
		v := m.vocab[k*d : (k+1)*d]
		for j := range u {
			z := m.wText * m.sd[j] * float32(frng.NormFloat64())
			u[j] = m.base[j] + z + m.wToken*v[j] + m.wNoise*m.sd[j]*float32(frng.NormFloat64())
		}
		rho := cfg.NormMean * (1 + cfg.NormCV*frng.NormFloat64())
		m.finishRow(m.frozenRows[k*d:(k+1)*d], u, rho)
	}

	// The embedding map depends on the model seed only, like a fixed second embedding model.
	m.hidden = min(max(2*cfg.E, 64), maxHidden)
	erng := rand.New(rand.NewPCG(cfg.ModelSeed, streamEmbed))
	m.w1 = make([]float32, m.hidden*d)
	for i := range m.w1 {
		m.w1[i] = float32(erng.NormFloat64())
	}
	m.w2 = make([]float32, cfg.E*m.hidden)
	for i := range m.w2 {
		m.w2[i] = float32(erng.NormFloat64() / math.Sqrt(float64(m.hidden)))
	}
	return m
}

// finishRow writes rho u/||u||, rounded to the dtype, into dst.
func (m *model) finishRow(dst, u []float32, rho float64) {
	var n2 float64
	for _, v := range u {
		n2 += float64(v) * float64(v)
	}
	s := float32(rho / math.Sqrt(n2))
	for j, v := range u {
		dst[j] = s * v
	}
	if m.cfg.DType == store.Float16 {
		numfmt.RoundF16s(dst)
	}
}

func unitGaussian(rng *rand.Rand, d int, sd []float32) []float64 {
	v := make([]float64, d)
	var n2 float64
	for j := range v {
		v[j] = rng.NormFloat64()
		if sd != nil {
			v[j] *= float64(sd[j])
		}
		n2 += v[j] * v[j]
	}
	for j := range v {
		v[j] /= math.Sqrt(n2)
	}
	return v
}

// powerLawProfile returns lambda_k ∝ k^-alpha, k = 1..d, summing to 1, with alpha chosen by
// bisection so that (sum lambda)^2 / sum lambda^2 = pr (pr = d gives the flat profile).
func powerLawProfile(d int, pr float64) []float64 {
	prOf := func(alpha float64) float64 {
		var s1, s2 float64
		for k := 1; k <= d; k++ {
			l := math.Pow(float64(k), -alpha)
			s1 += l
			s2 += l * l
		}
		return s1 * s1 / s2
	}
	lo, hi := 0.0, 16.0
	for it := 0; it < 100 && pr < float64(d); it++ {
		mid := (lo + hi) / 2
		if prOf(mid) > pr {
			lo = mid
		} else {
			hi = mid
		}
	}
	alpha := (lo + hi) / 2
	if pr >= float64(d) {
		alpha = 0
	}
	lam := make([]float64, d)
	var s float64
	for k := range lam {
		lam[k] = math.Pow(float64(k+1), -alpha)
		s += lam[k]
	}
	for k := range lam {
		lam[k] /= s
	}
	return lam
}

// calibrationRows is the Monte-Carlo sample that calibrates the profile.
const calibrationRows = 1024

// calibratedProfile returns the power-law profile whose rows, once their norm is fixed, have
// participation ratio cfg.PR. Fixing the norm shrinks rows that are long because their heavy
// coordinates are large, which flattens the spectrum (by about 20% in PR at d = 256), so the
// profile's own PR is adjusted by a few fixed-point steps on a seeded Monte-Carlo sample of rows
// rho (base + sqrt(wRandom) sd*g) / ||...||. Their covariance is diagonal up to the rank-one base
// direction, so its diagonal gives the PR; each diagonal entry is estimated as the exact
// Var(u_j) = wRandom lambda_j times the sampled ratio Var(h_j)/Var(u_j), a control variate that
// cancels most of the sampling noise of the few heavy coordinates. perm maps coordinates to
// profile ranks.
func (m *model) calibratedProfile(perm []int, wRandom float64) []float64 {
	d, target := m.cfg.D, m.cfg.PR
	g := make([]float32, calibrationRows*d) // the same draws every step, so the map is smooth
	rho := make([]float64, calibrationRows)
	rng := rand.New(rand.NewPCG(m.cfg.ModelSeed, streamCalibrate))
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	for i := range rho {
		rho[i] = 1 + m.cfg.NormCV*rng.NormFloat64()
	}
	design := target
	lam := powerLawProfile(d, design)
	// Per-coordinate sums of h, h^2, and of the random part u and u^2.
	sum, sum2, usum, usum2 := make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d)
	u := make([]float64, d)
	for step := 0; step < 8 && target < float64(d); step++ {
		clear(sum)
		clear(sum2)
		clear(usum)
		clear(usum2)
		for r := 0; r < calibrationRows; r++ {
			var n2 float64
			for j := range u {
				u[j] = math.Sqrt(wRandom*lam[perm[j]]) * float64(g[r*d+j])
				v := float64(m.base[j]) + u[j]
				n2 += v * v
			}
			inv := rho[r] / math.Sqrt(n2)
			for j, x := range u {
				h := (float64(m.base[j]) + x) * inv
				sum[j] += h
				sum2[j] += h * h
				usum[j] += x
				usum2[j] += x * x
			}
		}
		var s1, s2 float64
		for j := range sum {
			hm, um := sum[j]/calibrationRows, usum[j]/calibrationRows
			vu := usum2[j]/calibrationRows - um*um
			v := wRandom * lam[perm[j]]
			if vu > 0 {
				v *= (sum2[j]/calibrationRows - hm*hm) / vu
			}
			s1 += v
			s2 += v * v
		}
		got := s1 * s1 / s2
		if math.Abs(got-target) < 0.005*target {
			break
		}
		design = min(max(design*target/got, 1), float64(d))
		lam = powerLawProfile(d, design)
	}
	return lam
}

// frozenRanks is the number of leading vocabulary ranks whose total probability stays within
// FrozenMass.
func frozenRanks(cfg Config) int {
	var z float64
	for k := 0; k < cfg.Vocab; k++ {
		z += math.Pow(cfg.ZipfV+float64(k), -cfg.ZipfS)
	}
	var mass float64
	for k := 0; k < cfg.Vocab; k++ {
		mass += math.Pow(cfg.ZipfV+float64(k), -cfg.ZipfS) / z
		if mass > cfg.FrozenMass {
			return k
		}
	}
	return cfg.Vocab
}

// maxHidden caps the embedding map's hidden width: the map costs hidden x d per text.
const maxHidden = 256

// dot is a float32 dot product with four accumulators, which lets the loop pipeline.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(a); j += 4 {
		s0 += a[j] * b[j]
		s1 += a[j+1] * b[j+1]
		s2 += a[j+2] * b[j+2]
		s3 += a[j+3] * b[j+3]
	}
	for ; j < len(a); j++ {
		s0 += a[j] * b[j]
	}
	return (s0 + s1) + (s2 + s3)
}

// text is one generated text.
type text struct {
	tokens []int32
	rows   []float32 // rows: (n, d)
	emb    []float32 // emb: (e)
}

// generate fills t with text i. scratch holds d floats.
func (m *model) generate(i int, t *text, u []float32) {
	cfg := m.cfg
	d := cfg.D
	rng := rand.New(rand.NewPCG(cfg.Seed, streamText+uint64(i)))
	n := cfg.MinTokens + rng.IntN(cfg.MaxTokens-cfg.MinTokens+1)
	z := make([]float32, d) // z: (d), the text's latent direction
	for j := range z {
		z[j] = m.wText * m.sd[j] * float32(rng.NormFloat64())
	}
	zipf := rand.NewZipf(rng, cfg.ZipfS, cfg.ZipfV, uint64(cfg.Vocab-1))
	t.tokens = t.tokens[:0]
	t.rows = growTo(t.rows, n*d)
	for r := 0; r < n; r++ {
		dst := t.rows[r*d : (r+1)*d]
		rank := -1 // BOS
		if r > 0 {
			rank = int(zipf.Uint64())
		}
		if rank < 0 {
			t.tokens = append(t.tokens, bosID)
		} else {
			t.tokens = append(t.tokens, int32(firstTok+rank))
		}
		if rank < m.frozen {
			copy(dst, m.frozenRows[(rank+1)*d:(rank+2)*d])
			continue
		}
		v := m.vocab[(rank+1)*d : (rank+2)*d]
		for j := range u {
			u[j] = m.base[j] + z[j] + m.wToken*v[j] + m.wNoise*m.sd[j]*float32(rng.NormFloat64())
		}
		m.finishRow(dst, u, cfg.NormMean*(1+cfg.NormCV*rng.NormFloat64()))
	}
	t.emb = m.embed(t.rows[:n*d], t.emb, u)
}

// embed is the fixed text-embedding map applied to rows: (n, d); u is d floats of scratch.
func (m *model) embed(rows, dst, u []float32) []float32 {
	d, e, h := m.cfg.D, m.cfg.E, m.hidden
	n := len(rows) / d
	x := make([]float64, d)
	for r := 0; r < n; r++ {
		row := rows[r*d : (r+1)*d]
		var n2 float64
		for _, v := range row {
			n2 += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(n2)
		for j, v := range row {
			x[j] += float64(v) * inv
		}
	}
	var xn float64
	for j := range x {
		x[j] = x[j]/float64(n) - float64(m.base[j])
		xn += x[j] * x[j]
	}
	if xn > 0 {
		xn = 1 / math.Sqrt(xn)
	}
	for j := range u {
		u[j] = float32(x[j] * xn)
	}
	hid := make([]float64, h)
	for k := range hid {
		hid[k] = math.Tanh(1.5 * float64(dot(m.w1[k*d:(k+1)*d], u)))
	}
	dst = growTo(dst, e)
	var on float64
	out := make([]float64, e)
	for k := range out {
		var s float64
		for j, w := range m.w2[k*h : (k+1)*h] {
			s += float64(w) * hid[j]
		}
		out[k] = s
		on += s * s
	}
	on = 1 / math.Sqrt(on)
	for k := range out {
		dst[k] = float32(out[k] * on)
	}
	return dst
}

func growTo(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// chunkTexts is how many texts are generated in parallel before being handed on in order.
const chunkTexts = 64

// each generates the texts in parallel chunks and calls fn for each in index order. Chunk k+1 is
// generated while fn consumes chunk k. The texts passed to fn are reused after fn returns.
func each(ctx context.Context, cfg Config, fn func(i int, t *text) error) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	m := newModel(cfg)
	workers := max(runtime.GOMAXPROCS(0), 1)
	var bufs [2][]text
	for k := range bufs {
		bufs[k] = make([]text, chunkTexts)
	}
	scratch := make([][]float32, workers)
	for w := range scratch {
		scratch[w] = make([]float32, cfg.D)
	}
	// fill generates chunk [lo, hi) into buf and closes done.
	fill := func(buf []text, lo, hi int, done chan struct{}) {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := lo + w; i < hi && ctx.Err() == nil; i += workers {
					m.generate(i, &buf[i-lo], scratch[w])
				}
			}(w)
		}
		wg.Wait()
		close(done)
	}
	done := make(chan struct{})
	go fill(bufs[0], 0, min(chunkTexts, cfg.Texts), done)
	for k, lo := 0, 0; lo < cfg.Texts; k, lo = k+1, lo+chunkTexts {
		<-done
		hi := min(lo+chunkTexts, cfg.Texts)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		var next chan struct{}
		if hi < cfg.Texts {
			next = make(chan struct{})
			go fill(bufs[(k+1)%2], hi, min(hi+chunkTexts, cfg.Texts), next)
		}
		buf := bufs[k%2]
		for i := lo; i < hi; i++ {
			if err := fn(i, &buf[i-lo]); err != nil {
				if next != nil {
					<-next // let the running chunk finish before its buffers go away
				}
				return err
			}
		}
		done = next
	}
	return nil
}

// Generate builds the corpus in memory. Text i has text_id i.
func Generate(cfg Config) (*data.MemCorpus, error) {
	return GenerateContext(context.Background(), cfg)
}

// GenerateContext is Generate stopping with ctx's error (wrapped) when ctx is cancelled.
func GenerateContext(ctx context.Context, cfg Config) (*data.MemCorpus, error) {
	cfg = cfg.WithDefaults()
	c := data.NewMemCorpus(cfg.D, cfg.E)
	err := each(ctx, cfg, func(i int, t *text) error {
		return c.Add(int64(i), t.rows, t.emb)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// WriteStore writes the corpus as a store in dir, with the same values Generate returns, plus the
// token ids (1 = BOS, vocabulary rank k = k+2) and no text strings.
func WriteStore(ctx context.Context, cfg Config, dir string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	w, err := store.Create(dir, store.Meta{
		Model: "synthetic", D: cfg.D, E: cfg.E, DType: cfg.DType, Norm: store.NormRaw, Source: cfg.String(),
	})
	if err != nil {
		return err
	}
	err = each(ctx, cfg, func(i int, t *text) error {
		return w.AddText(int64(i), "", false, t.tokens, t.rows, t.emb)
	})
	if err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}
