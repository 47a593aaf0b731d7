package synth

import (
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/store"
)

func small(texts, d, e int) Config {
	c := DefaultConfig()
	c.Texts, c.D, c.E = texts, d, e
	return c.WithDefaults()
}

func rowsOf(t *testing.T, c data.Corpus, i int) []float32 {
	t.Helper()
	out := make([]float32, c.NumTokens(i)*c.D())
	if err := c.Rows(i, 0, c.NumTokens(i), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func embOf(t *testing.T, c data.Corpus, i int) []float32 {
	t.Helper()
	out := make([]float32, c.E())
	if err := c.TextEmbedding(i, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestGenerateIsDeterministicAndMatchesWriteStore(t *testing.T) {
	cfg := small(40, 16, 8)
	cfg.Seed = 5
	a, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Seed = 6
	c, err := Generate(other)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "s")
	if err := WriteStore(t.Context(), cfg, dir); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := store.Validate(t.Context(), dir, nil); err != nil {
		t.Fatal(err)
	}
	differs := 0
	for i := 0; i < cfg.Texts; i++ {
		ra := rowsOf(t, a, i)
		if !sameBits(ra, rowsOf(t, b, i)) || !sameBits(embOf(t, a, i), embOf(t, b, i)) {
			t.Fatalf("text %d differs between two runs with one seed", i)
		}
		if !sameBits(ra, rowsOf(t, s, i)) || !sameBits(embOf(t, a, i), embOf(t, s, i)) || s.TextID(i) != a.TextID(i) {
			t.Fatalf("text %d: store and in-memory corpus differ", i)
		}
		if !sameBits(ra, rowsOf(t, c, i)) {
			differs++
		}
		tok := make([]int32, s.NumTokens(i))
		s.TokenIDs(i, 0, len(tok), tok)
		if tok[0] != bosID || slices.Min(tok[1:]) < firstTok {
			t.Fatalf("text %d: token ids %v: want BOS then vocabulary ids", i, tok)
		}
	}
	if differs < cfg.Texts-1 {
		t.Fatalf("another seed changed only %d of %d texts", differs, cfg.Texts)
	}
	if s.Meta().Model != "synthetic" || s.Meta().DType != store.Float16 {
		t.Fatalf("meta = %+v", s.Meta())
	}
}

// TestStatisticsLookLikeAnLLM checks row norms, participation ratio, duplicates and outliers of
// the default corpus shape at d = 256.
func TestStatisticsLookLikeAnLLM(t *testing.T) {
	const d = 256
	cfg := small(600, d, 32)
	c, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in, err := store.ComputeInfo(t.Context(), c, 4096, 0.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The plug-in PR on s rows of a Gaussian with participation ratio p is about 1/(1/p + 1/s).
	// Two effects can only lower it further: sampled rows of one text share its latent, and
	// frozen rows (BOS, frequent tokens) are point masses that add strong directions.
	wantPR := 1 / (1/cfg.PR + 1/float64(in.SampleRows))
	t.Logf("norm %.3f cv %.4f, PR %.1f (profile %.1f, plug-in expectation %.1f), duplicates %.3f",
		in.NormMean, in.NormCV, in.ParticipationRatio, cfg.PR, wantPR, in.DuplicateRate)
	if math.Abs(in.NormMean-24) > 0.5 || in.NormCV < 0.03 || in.NormCV > 0.05 {
		t.Fatalf("norm mean %v cv %v, want 24 and 0.04", in.NormMean, in.NormCV)
	}
	if in.ParticipationRatio < 0.85*wantPR || in.ParticipationRatio > 1.05*wantPR {
		t.Fatalf("PR %v, want %v -15%%/+5%%", in.ParticipationRatio, wantPR)
	}
	if in.DuplicateRate < 0.03 || in.DuplicateRate > 0.15 {
		t.Fatalf("duplicate rate %v, want a few percent (BOS + frozen tokens)", in.DuplicateRate)
	}
	// Outliers: the largest mean |coordinate| dwarfs the median one.
	mag := make([]float64, d)
	for i := 0; i < 50; i++ {
		for j, v := range rowsOf(t, c, i) {
			mag[j%d] += math.Abs(float64(v))
		}
	}
	sort.Float64s(mag)
	if ratio := mag[d-1] / mag[d/2]; ratio < 4 {
		t.Fatalf("largest coordinate only %.1fx the median: no outlier features", ratio)
	}
}

// TestProfileCalibrationHitsTargetPR measures the PR on independent rows (one non-frozen row from
// each of 2048 texts), where the plug-in estimate has the simple Gaussian bias only.
func TestProfileCalibrationHitsTargetPR(t *testing.T) {
	for _, d := range []int{256, 1024} {
		cfg := small(2048, d, 8)
		cfg.MinTokens, cfg.MaxTokens = 3, 3
		m := data.NewMemCorpus(d, 1)
		err := each(t.Context(), cfg, func(i int, x *text) error {
			for r, tok := range x.tokens {
				if tok >= firstTok+int32(frozenRanks(cfg)) {
					return m.Add(int64(i), x.rows[r*d:(r+1)*d], []float32{1})
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		in, err := store.ComputeInfo(t.Context(), m, m.NumTexts(), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := 1 / (1/cfg.PR + 1/float64(in.SampleRows))
		t.Logf("d=%d: PR %.1f on %d independent rows, target %.1f, plug-in expectation %.1f", d, in.ParticipationRatio, in.SampleRows, cfg.PR, want)
		if math.Abs(in.ParticipationRatio-want) > 0.07*want {
			t.Fatalf("d=%d: PR %v, want %v ± 7%%", d, in.ParticipationRatio, want)
		}
	}
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// TestTextsAreDistinguishableFromAFewRows applies the embedding map to 8-row windows: the result
// must retrieve the window's own text among all texts, so the embedding is a learnable function of
// a handful of rows, and distinct texts have distinct embeddings.
func TestTextsAreDistinguishableFromAFewRows(t *testing.T) {
	cfg := small(200, 64, 32)
	c, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(cfg)
	embs := make([][]float32, cfg.Texts)
	for i := range embs {
		embs[i] = embOf(t, c, i)
	}
	var maxCos float64
	for i := range embs {
		for j := 0; j < i; j++ {
			maxCos = max(maxCos, math.Abs(cosine(embs[i], embs[j])))
		}
	}
	if maxCos > 0.9 {
		t.Fatalf("two distinct texts have embeddings with |cos| %v", maxCos)
	}
	hits := 0
	u := make([]float32, cfg.D)
	for i := range embs {
		rows := rowsOf(t, c, i)
		win := rows[5*cfg.D : 13*cfg.D] // rows 5..12: past BOS
		q := m.embed(win, nil, u)
		best, bestCos := -1, -2.0
		for j := range embs {
			if cs := cosine(q, embs[j]); cs > bestCos {
				best, bestCos = j, cs
			}
		}
		if best == i {
			hits++
		}
	}
	if hits < 190 {
		t.Fatalf("8-row windows retrieve their own text %d of %d times", hits, cfg.Texts)
	}
	t.Logf("max |cos| between texts %.3f; 8-row windows retrieve their text %d/%d", maxCos, hits, cfg.Texts)
}

func TestProfileAndFrozenRanksKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		d  int
		pr float64
	}{{4096, 120}, {256, 30}, {64, 64}, {8, 1.5}} {
		lam := powerLawProfile(tc.d, tc.pr)
		var s1, s2 float64
		for _, l := range lam {
			s1 += l
			s2 += l * l
		}
		if math.Abs(s1-1) > 1e-9 || math.Abs(s1*s1/s2-tc.pr) > 1e-6*tc.pr {
			t.Fatalf("d=%d: profile sums to %v with PR %v, want 1 and %v", tc.d, s1, s1*s1/s2, tc.pr)
		}
	}
	cfg := DefaultConfig()
	k := frozenRanks(cfg)
	p := func(r int) float64 { return math.Pow(cfg.ZipfV+float64(r), -cfg.ZipfS) }
	var z, mass float64
	for r := 0; r < cfg.Vocab; r++ {
		z += p(r)
	}
	for r := 0; r < k; r++ {
		mass += p(r) / z
	}
	if k < 1 || mass > cfg.FrozenMass || mass+p(k)/z <= cfg.FrozenMass {
		t.Fatalf("%d frozen ranks hold mass %v; want the largest prefix within %v", k, mass, cfg.FrozenMass)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, bad := range []Config{
		{Texts: -1}, {MinTokens: 5, MaxTokens: 4}, {D: 1}, {DType: "bf16"}, {NormCV: -1},
		{PR: 1e9}, {ZipfS: 0.5}, {FrozenMass: 1}, {Weights: Weights{Text: -1, Token: 1}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
		if _, err := Generate(bad); err == nil {
			t.Errorf("Generate(%+v) accepted", bad)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
}

func BenchmarkGenerate(b *testing.B) {
	for _, d := range []int{256, 4096} {
		cfg := small(2000, d, 128)
		b.Run("d="+strconv.Itoa(d), func(b *testing.B) {
			for b.Loop() {
				if _, err := Generate(cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriteStore streams 2000 texts into a store; its memory stays bounded by a chunk.
func BenchmarkWriteStore(b *testing.B) {
	for _, d := range []int{256, 4096} {
		cfg := small(2000, d, 128)
		b.Run("d="+strconv.Itoa(d), func(b *testing.B) {
			for b.Loop() {
				if err := WriteStore(b.Context(), cfg, filepath.Join(b.TempDir(), "s")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
