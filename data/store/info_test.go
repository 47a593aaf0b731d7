package store

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data"
)

func TestComputeInfoKnownAnswers(t *testing.T) {
	// Four texts whose rows are ±1 e0 and ±2 e1: mean zero, covariance diag(1/2, 2, 0, 0) up to a
	// common factor, so PR = (1+4)^2/(1+16) = 25/17; norms 1 and 2 in equal numbers give mean 1.5
	// and CV 1/3; every row has a bit-identical twin.
	c := data.NewMemCorpus(4, 2)
	for id := int64(0); id < 4; id++ {
		rows := []float32{1, 0, 0, 0, -1, 0, 0, 0, 0, 2, 0, 0, 0, -2, 0, 0}
		if err := c.Add(10+id, rows, []float32{1, 0}); err != nil {
			t.Fatal(err)
		}
	}
	in, err := ComputeInfo(t.Context(), c, 1000, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if in.Texts != 4 || in.Tokens != 16 || in.SampleRows != 16 || in.MinTokens != 4 || in.MaxTokens != 4 || in.DType != "" {
		t.Fatalf("info = %+v", in)
	}
	if math.Abs(in.ParticipationRatio-25.0/17) > 1e-9 || math.Abs(in.NormMean-1.5) > 1e-12 || math.Abs(in.NormCV-1.0/3) > 1e-12 || in.DuplicateRate != 1 {
		t.Fatalf("PR %v (want %v), norm %v cv %v (want 1.5, 1/3), dup %v (want 1)", in.ParticipationRatio, 25.0/17, in.NormMean, in.NormCV, in.DuplicateRate)
	}
	train, val := data.SplitIndices(c, 0.5)
	if in.TrainTexts != len(train) || in.ValTexts != len(val) || in.TrainTokens != int64(4*len(train)) || in.ValTokens != int64(4*len(val)) {
		t.Fatalf("split %d/%d texts, want %d/%d", in.TrainTexts, in.ValTexts, len(train), len(val))
	}
	for _, s := range []string{in.String(), in.Markdown()} {
		if !strings.Contains(s, "participation ratio") || !strings.Contains(s, "1.5") {
			t.Fatalf("rendering lacks fields:\n%s", s)
		}
	}
}

// naivePR forms the d x d covariance explicitly.
func naivePR(x []float32, n, d int) float64 {
	mean := make([]float64, d)
	for r := 0; r < n; r++ {
		for j := 0; j < d; j++ {
			mean[j] += float64(x[r*d+j]) / float64(n)
		}
	}
	var tr, fro float64
	for a := 0; a < d; a++ {
		for b := 0; b < d; b++ {
			var c float64
			for r := 0; r < n; r++ {
				c += (float64(x[r*d+a]) - mean[a]) * (float64(x[r*d+b]) - mean[b])
			}
			if a == b {
				tr += c
			}
			fro += c * c
		}
	}
	return tr * tr / fro
}

func TestParticipationRatioMatchesNaiveCovariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, shape := range [][2]int{{30, 5}, {20, 40}} { // both Gram orientations
		n, d := shape[0], shape[1]
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * float64(1+i%d) * 0.3)
		}
		got, want := participationRatio(x, n, d), naivePR(x, n, d)
		if math.Abs(got-want) > 1e-4*want {
			t.Fatalf("n=%d d=%d: PR %v, naive %v", n, d, got, want)
		}
	}
}

func TestSampleGlobalRowsIsUniformDistinctAndSeeded(t *testing.T) {
	if all := sampleGlobalRows(5, 9, 1); !slices.Equal(all, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("k >= total: %v", all)
	}
	counts := make([]int, 100)
	const reps = 4000
	for rep := 0; rep < reps; rep++ {
		s := sampleGlobalRows(100, 30, uint64(rep))
		if len(s) != 30 || !slices.IsSorted(s) || len(slices.Compact(slices.Clone(s))) != 30 {
			t.Fatalf("sample %v is not 30 distinct sorted rows", s)
		}
		for _, r := range s {
			counts[r]++
		}
	}
	// Each row is in a sample with probability 0.3: 1200 ± 29 (1 sd) per row.
	for r, c := range counts {
		if math.Abs(float64(c)-1200) > 6*29 {
			t.Fatalf("row %d drawn %d times of %d, want about 1200", r, c, reps)
		}
	}
	if !slices.Equal(sampleGlobalRows(1e9, 50, 7), sampleGlobalRows(1e9, 50, 7)) {
		t.Fatal("same seed, different sample")
	}
}

func TestComputeInfoOnStoreReportsMeta(t *testing.T) {
	const d, e = 8, 3
	dir := filepath.Join(t.TempDir(), "s")
	writeStore(t, dir, Meta{Model: "m", D: d, E: e, DType: Float16, Norm: NormRaw}, makeTexts(2, 30, 10, d, e), 1<<20)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := ComputeInfo(t.Context(), s, 50, 0.1, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ComputeInfo(t.Context(), s, 50, 0.1, 3)
	if a.DType != Float16 || a.Meta == nil || a.Meta.Model != "m" || a.SampleRows != 50 {
		t.Fatalf("info = %+v", a)
	}
	if a.ParticipationRatio != b.ParticipationRatio || a.NormMean != b.NormMean {
		t.Fatal("same seed, different statistics")
	}
	if a.ParticipationRatio <= 1 || a.ParticipationRatio > d {
		t.Fatalf("PR %v outside (1, d]", a.ParticipationRatio)
	}
}

// meta.json's descriptive fields are checked: an unknown special_tokens value or a negative
// max_tokens is refused; absent ones (older stores) are fine.
func TestMetaDescriptiveFieldsChecked(t *testing.T) {
	base := Meta{FormatVersion: FormatVersion, D: 4, E: 4, DType: Float32, Norm: NormRaw}
	if err := base.check(); err != nil {
		t.Fatalf("older meta without the fields: %v", err)
	}
	ok := base
	ok.SpecialTokens, ok.MaxTokens, ok.LayerMeaning = SpecialDropped, 256, "output of block 3 of 6"
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	bad := base
	bad.SpecialTokens = "some"
	if err := bad.check(); err == nil || !strings.Contains(err.Error(), "special_tokens") {
		t.Errorf("special_tokens \"some\": %v", err)
	}
	bad = base
	bad.MaxTokens = -1
	if err := bad.check(); err == nil || !strings.Contains(err.Error(), "max_tokens") {
		t.Errorf("max_tokens -1: %v", err)
	}
}
