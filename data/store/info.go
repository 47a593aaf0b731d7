package store

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/gelo-research/geloattack/data"
)

// Info summarises a corpus: sizes, split, and statistics of its hidden-state rows estimated on a
// seeded uniform sample of rows.
type Info struct {
	Texts      int    `json:"texts"`
	Tokens     int64  `json:"tokens"`
	MinTokens  int    `json:"min_tokens"`
	MaxTokens  int    `json:"max_tokens"`
	D          int    `json:"d"`
	E          int    `json:"e"`
	DType      string `json:"dtype,omitempty"` // empty when the corpus does not say
	Meta       *Meta  `json:"meta,omitempty"`  // set for stores
	SampleRows int    `json:"sample_rows"`
	SampleSeed uint64 `json:"sample_seed"`
	// NormMean and NormCV are the mean and coefficient of variation (std/mean) of row L2 norms.
	NormMean float64 `json:"norm_mean"`
	NormCV   float64 `json:"norm_cv"`
	// ParticipationRatio is (sum λ)^2 / sum λ^2 over the eigenvalues λ of the sample covariance of
	// rows: the number of directions the rows effectively spread over (1..d). The plug-in estimate
	// is biased low by sampling, roughly 1/(1/PR + 1/SampleRows) for Gaussian rows.
	ParticipationRatio float64 `json:"participation_ratio"`
	// DuplicateRate is the fraction of sampled rows bit-identical to another sampled row.
	DuplicateRate float64 `json:"duplicate_rate"`
	ValFrac       float64 `json:"val_frac"`
	TrainTexts    int     `json:"train_texts"`
	ValTexts      int     `json:"val_texts"`
	TrainTokens   int64   `json:"train_tokens"`
	ValTokens     int64   `json:"val_tokens"`
}

// maxSampleValues bounds the sample matrix (and so the centred copy) to 1 GiB of float32.
const maxSampleValues = 1 << 28

// ComputeInfo describes any corpus. sampleRows distinct rows (all rows when the corpus has fewer)
// are drawn uniformly with a stream seeded by seed, so the same corpus and seed give the same
// numbers. The covariance step costs O(min(s, d)^2 max(s, d)) for s sampled rows.
func ComputeInfo(ctx context.Context, c data.Corpus, sampleRows int, valFrac float64, seed uint64) (Info, error) {
	if sampleRows < 2 {
		return Info{}, fmt.Errorf("info: sample of %d rows: need at least 2", sampleRows)
	}
	if valFrac < 0 || valFrac > 1 || math.IsNaN(valFrac) {
		return Info{}, fmt.Errorf("info: val fraction %v: want [0, 1]", valFrac)
	}
	in := Info{Texts: c.NumTexts(), D: c.D(), E: c.E(), ValFrac: valFrac, SampleSeed: seed}
	if m, ok := c.(interface{ Meta() Meta }); ok {
		meta := m.Meta()
		in.Meta, in.DType = &meta, meta.DType
	}
	// offsets[i] is the first global row of text i: (texts+1).
	offsets := make([]int64, in.Texts+1)
	for i := 0; i < in.Texts; i++ {
		n := c.NumTokens(i)
		offsets[i+1] = offsets[i] + int64(n)
		if i == 0 || n < in.MinTokens {
			in.MinTokens = n
		}
		in.MaxTokens = max(in.MaxTokens, n)
		if data.SplitOf(c.TextID(i), valFrac) == data.Val {
			in.ValTexts++
			in.ValTokens += int64(n)
		} else {
			in.TrainTexts++
			in.TrainTokens += int64(n)
		}
	}
	in.Tokens = offsets[in.Texts]
	if in.Tokens < 2 {
		return in, nil
	}
	if k := min(int64(sampleRows), in.Tokens); k*int64(in.D) > maxSampleValues {
		return in, fmt.Errorf("info: sample of %d rows x d=%d needs %d GiB: use fewer rows", k, in.D, k*int64(in.D)*4>>30)
	}
	rows := sampleGlobalRows(in.Tokens, sampleRows, seed)
	in.SampleRows = len(rows)
	d := in.D
	x := make([]float32, len(rows)*d) // x: (s, d)
	for k, g := range rows {
		if k%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return in, fmt.Errorf("info: %w", err)
			}
		}
		i, _ := slices.BinarySearch(offsets, g+1)
		i-- // text with offsets[i] <= g < offsets[i+1]
		if err := c.Rows(i, int(g-offsets[i]), 1, x[k*d:(k+1)*d]); err != nil {
			return in, fmt.Errorf("info: %w", err)
		}
	}
	in.NormMean, in.NormCV = normStats(x, d)
	in.DuplicateRate = duplicateRate(x, d)
	if err := ctx.Err(); err != nil {
		return in, fmt.Errorf("info: %w", err)
	}
	in.ParticipationRatio = participationRatio(x, len(rows), d)
	return in, nil
}

// sampleGlobalRows draws k distinct integers of [0, total) (all of them when k >= total), sorted,
// with Floyd's algorithm: O(k) draws whatever total is.
func sampleGlobalRows(total int64, k int, seed uint64) []int64 {
	if int64(k) >= total {
		out := make([]int64, total)
		for i := range out {
			out[i] = int64(i)
		}
		return out
	}
	rng := rand.New(rand.NewPCG(seed, 0x1f0))
	chosen := make(map[int64]struct{}, k)
	out := make([]int64, 0, k)
	for j := total - int64(k); j < total; j++ {
		t := rng.Int64N(j + 1)
		if _, ok := chosen[t]; ok {
			t = j
		}
		chosen[t] = struct{}{}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// normStats returns the mean and coefficient of variation of the row norms of x: (s, d).
func normStats(x []float32, d int) (mean, cv float64) {
	s := len(x) / d
	var sum, sum2 float64
	for r := 0; r < s; r++ {
		var n2 float64
		for _, v := range x[r*d : (r+1)*d] {
			n2 += float64(v) * float64(v)
		}
		n := math.Sqrt(n2)
		sum += n
		sum2 += n * n
	}
	mean = sum / float64(s)
	variance := max(sum2/float64(s)-mean*mean, 0)
	if mean > 0 {
		cv = math.Sqrt(variance) / mean
	}
	return mean, cv
}

// duplicateRate is the fraction of rows of x: (s, d) that are bit-identical to another row.
func duplicateRate(x []float32, d int) float64 {
	s := len(x) / d
	// Rows are grouped by a fingerprint and compared bit by bit inside a group, so fingerprint
	// collisions cannot inflate the count.
	groups := map[[4]uint64][]int{}
	for r := 0; r < s; r++ {
		k := rowKey(x[r*d : (r+1)*d])
		groups[k] = append(groups[k], r)
	}
	dup := 0
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		for _, a := range g {
			for _, b := range g {
				if a != b && bitEqual(x[a*d:(a+1)*d], x[b*d:(b+1)*d]) {
					dup++
					break
				}
			}
		}
	}
	return float64(dup) / float64(s)
}

// rowKey is a cheap comparable fingerprint of a row's bits.
func rowKey(row []float32) [4]uint64 {
	var k [4]uint64
	for j, v := range row {
		k[j%4] = k[j%4]*0x100000001b3 ^ uint64(math.Float32bits(v))
	}
	return k
}

func bitEqual(a, b []float32) bool {
	for j := range a {
		if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
			return false
		}
	}
	return true
}

// participationRatio returns (tr C)^2 / ||C||_F^2 for the covariance C of the rows of x: (s, d).
// The non-zero eigenvalues of Xc^T Xc and Xc Xc^T agree, so the smaller Gram matrix is formed.
func participationRatio(x []float32, s, d int) float64 {
	mean := make([]float64, d)
	for r := 0; r < s; r++ {
		for j, v := range x[r*d : (r+1)*d] {
			mean[j] += float64(v)
		}
	}
	xc := make([]float32, s*d) // xc: (s, d), centred
	for r := 0; r < s; r++ {
		for j, v := range x[r*d : (r+1)*d] {
			xc[r*d+j] = float32(float64(v) - mean[j]/float64(s))
		}
	}
	m, trans := s, blas.NoTrans // G = Xc Xc^T: (s, s)
	if d < s {
		m, trans = d, blas.Trans // G = Xc^T Xc: (d, d)
	}
	g := make([]float32, m*m)
	blas32.Implementation().Ssyrk(blas.Upper, trans, m, s+d-m, 1, xc, d, 0, g, m)
	var tr, fro float64
	for i := 0; i < m; i++ {
		tr += float64(g[i*m+i])
		for j := i; j < m; j++ {
			v := float64(g[i*m+j])
			if j == i {
				fro += v * v
			} else {
				fro += 2 * v * v
			}
		}
	}
	if fro == 0 {
		return 0
	}
	return tr * tr / fro
}

// String renders the summary as aligned plain text.
func (in Info) String() string {
	var b strings.Builder
	for _, kv := range in.pairs() {
		fmt.Fprintf(&b, "%-22s %s\n", kv[0], kv[1])
	}
	return b.String()
}

// Markdown renders the summary as a two-column Markdown table.
func (in Info) Markdown() string {
	var b strings.Builder
	b.WriteString("| property | value |\n|---|---|\n")
	for _, kv := range in.pairs() {
		fmt.Fprintf(&b, "| %s | %s |\n", kv[0], strings.ReplaceAll(kv[1], "|", `\|`))
	}
	return b.String()
}

func (in Info) pairs() [][2]string {
	dtype := in.DType
	if dtype == "" {
		dtype = "unknown"
	}
	var p [][2]string
	add := func(k, format string, a ...any) { p = append(p, [2]string{k, fmt.Sprintf(format, a...)}) }
	if in.Meta != nil {
		add("model", "%s (layer %d)", in.Meta.Model, in.Meta.Layer)
		add("layer means", "%s", orUnrecorded(in.Meta.LayerMeaning))
		add("special-token rows", "%s", orUnrecorded(in.Meta.SpecialTokens))
		maxTok := "not recorded"
		if in.Meta.MaxTokens > 0 {
			maxTok = fmt.Sprintf("%d tokens per text, special tokens included", in.Meta.MaxTokens)
		}
		add("truncated to", "%s", maxTok)
		if dm := in.Meta.Decoder; dm != nil {
			add("decoder", "%s (%s), point %s, BOS %s", dm.Family, dm.Architecture, dm.Point, dm.BOS)
			add("tokenizer hash", "%s", dm.TokenizerHash)
			add("dedup", "%s: %d duplicate rows dropped, %d texts dropped", dm.Dedup, dm.DuplicateRows, dm.DroppedTexts)
			add("text embedding", "%s", dm.Embedding)
		}
		if in.Meta.ComputePrecision != "" {
			add("computed in", "%s GEMMs (a deployer of that precision to proofs that recompute the rows)", in.Meta.ComputePrecision)
		}
		add("norm", "%s", in.Meta.Norm)
		add("source", "%s", in.Meta.Source)
		add("tool version", "%s", in.Meta.ToolVersion)
		add("integrity", "%s", integrity(in.Meta))
	}
	add("texts", "%d", in.Texts)
	add("tokens", "%d", in.Tokens)
	if in.Texts > 0 {
		add("tokens per text", "%d..%d (mean %.1f)", in.MinTokens, in.MaxTokens, float64(in.Tokens)/float64(in.Texts))
	}
	add("d", "%d", in.D)
	add("e", "%d", in.E)
	add("dtype", "%s", dtype)
	add("sample rows", "%d (seed %d)", in.SampleRows, in.SampleSeed)
	add("row norm", "mean %.4g, cv %.4f", in.NormMean, in.NormCV)
	add("participation ratio", "%.1f of d = %d", in.ParticipationRatio, in.D)
	add("duplicate rows", "%.2f%%", 100*in.DuplicateRate)
	add("split (val frac)", "%.3g", in.ValFrac)
	add("train", "%d texts, %d tokens", in.TrainTexts, in.TrainTokens)
	add("val", "%d texts, %d tokens", in.ValTexts, in.ValTokens)
	return p
}

// integrity says what meta.json lets a reader verify: older stores lack the checksums or the id
// hash, and their notes say what that leaves unchecked.
func integrity(m *Meta) string {
	switch {
	case m.Checksums == nil:
		return "no checksums, no id hash (written before checksums): data not verified"
	case m.IDHash == "":
		return "CRC-32C per record batch; no id hash (written before id hashes): ids checked per batch only"
	default:
		return "CRC-32C per record batch, id hash over text ids and checksums"
	}
}

// orUnrecorded is s, or "not recorded" for a field an older store lacks.
func orUnrecorded(s string) string {
	if s == "" {
		return "not recorded"
	}
	return s
}
