package gelo

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/engine/blas"
)

// testCorpus is a MemCorpus of texts with random lengths in [minTok, maxTok] and Gaussian rows
// around a common offset (so that centering has something to remove). Text ids are 1000+i.
func testCorpus(t testing.TB, texts, minTok, maxTok, d int, seed uint64) *data.MemCorpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	offset := make([]float32, d)
	for f := range offset {
		offset[f] = float32(rng.NormFloat64())
	}
	c := data.NewMemCorpus(d, 4)
	for i := 0; i < texts; i++ {
		n := minTok + rng.IntN(maxTok-minTok+1)
		rows := make([]float32, n*d)
		for j := range rows {
			rows[j] = offset[j%d] + float32(rng.NormFloat64())
		}
		emb := []float32{float32(i), 1, 2, 3}
		if err := c.Add(int64(1000+i), rows, emb); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// newSampler builds a sampler or fails the test.
func newSampler(t testing.TB, c data.Corpus, cfg Config) *Sampler {
	t.Helper()
	s, err := NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// example draws one example or fails the test.
func example(t testing.TB, s *Sampler, split data.Split, i int64) *Example {
	t.Helper()
	ex, err := s.Example(split, i)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// matmul64 is a: (m, k) times b: (k, n) in float64, row-major, as an independent reference.
func matmul64(m, n, k int, a, b []float32) []float64 {
	c := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for l := 0; l < k; l++ {
			x := float64(a[i*k+l])
			if x == 0 {
				continue
			}
			row := c[i*n : (i+1)*n]
			for j, y := range b[l*n : (l+1)*n] {
				row[j] += x * float64(y)
			}
		}
	}
	return c
}

// relErr is ||got - want||_F / ||want||_F.
func relErr(got []float32, want []float64) float64 {
	var num, den float64
	for i, w := range want {
		e := float64(got[i]) - w
		num += e * e
		den += w * w
	}
	return math.Sqrt(num / den)
}

// gram computes A^T A (float32, through the same BLAS as the sampler) for a: (n, n).
func gram(n int, a []float32) []float32 {
	g := make([]float32, n*n)
	blas.Sgemm(true, false, n, n, n, 1, a, n, a, n, 0, g, n)
	return g
}

// textSet maps the text ids of a split to true.
func textSet(s *Sampler, split data.Split) map[int64]bool {
	m := map[int64]bool{}
	for _, ci := range s.Texts(split) {
		m[s.Corpus().TextID(ci)] = true
	}
	return m
}

// mixPath is one way the mixer can draw: LAPACK through the default library, or the scalar Go
// QR that runs when the library has no LAPACK (forced here with gonum's library).
type mixPath struct {
	name string
	lib  *blas.Library
}

// mixPaths are the scalar Go path, and the LAPACK path when the default library has LAPACK.
func mixPaths(t testing.TB) []mixPath {
	paths := []mixPath{{"go", blas.Gonum()}}
	if blas.HasLAPACK() {
		paths = append(paths, mixPath{"lapack", blas.Default()})
	} else {
		t.Logf("no LAPACK in %s: testing the scalar Go QR only", blas.Name())
	}
	return paths
}
