package splitpool

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/data"
)

const testD = 16

// testCorpus is texts texts of 10 to 14 Gaussian rows of width 16, text ids 500, 501, ...
func testCorpus(t testing.TB, texts int) *data.MemCorpus {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	c := data.NewMemCorpus(testD, 1)
	for i := 0; i < texts; i++ {
		rows := make([]float32, (10+rng.IntN(5))*testD)
		for j := range rows {
			rows[j] = float32(2 + rng.NormFloat64())
		}
		if err := c.Add(int64(500+i), rows, []float32{1}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestCandidates(t *testing.T) {
	cands, pos, err := Candidates([][]int{{7, 3}, {3}, {9, 7, 1}}, []int{1, 42, 42, 5})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{7, 3, 9, 1, 42, 5}; !reflect.DeepEqual(cands, want) {
		t.Errorf("candidates = %v, want %v", cands, want)
	}
	if want := [][]int{{0, 1}, {1}, {2, 0, 3}}; !reflect.DeepEqual(pos, want) {
		t.Errorf("pos = %v, want %v", pos, want)
	}
	if _, _, err := Candidates([][]int{{1}, {}}, nil); err == nil {
		t.Error("an example without positives was accepted")
	}
	if _, _, err := Candidates([][]int{{1, 2, 1}}, nil); err == nil {
		t.Error("a repeated positive was accepted")
	}
}

// TestExtraTexts: extra negatives are distinct, never excluded, all free texts when fewer than k
// remain, and the same stream gives the same draw.
func TestExtraTexts(t *testing.T) {
	texts := make([]int, 40)
	for i := range texts {
		texts[i] = 2 * i
	}
	exclude := []int{0, 10, 38, 78}
	draw := func(k int) []int { return ExtraTexts(rand.New(rand.NewPCG(3, 4)), texts, exclude, k) }
	got := draw(12)
	if len(got) != 12 {
		t.Fatalf("%d extra texts, want 12", len(got))
	}
	for i, ti := range got {
		if !slices.Contains(texts, ti) || slices.Contains(exclude, ti) || slices.Contains(got[:i], ti) {
			t.Fatalf("draw %v: text %d is not a distinct free text of the split", got, ti)
		}
	}
	if again := draw(12); !slices.Equal(again, got) {
		t.Errorf("the same stream drew %v, then %v", got, again)
	}
	if all := draw(100); len(all) != len(texts)-len(exclude) {
		t.Errorf("asking for more than the free texts gave %d, want all %d", len(all), len(texts)-len(exclude))
	}
	if none := draw(0); none != nil {
		t.Errorf("k = 0 drew %v", none)
	}
}

// TestRows: the pool holds distinct real rows of the split's texts under the right text ids,
// draws never come from excluded texts, draws subtract the centring mean, and asking for more
// rows than the pool has outside the excluded texts is an error.
func TestRows(t *testing.T) {
	c := testCorpus(t, 12)
	d := testD
	texts := []int{1, 3, 4, 7, 8, 10}
	total := 0
	for _, ti := range texts {
		total += c.NumTokens(ti)
	}
	// corpusRow reports whether row is one of text id's rows minus center (nil: none), computed
	// in float32 as the sampler centres.
	corpusRow := func(id int64, row, center []float32) bool {
		i, _ := c.IndexOf(id)
		buf := make([]float32, c.NumTokens(i)*d)
		if err := c.Rows(i, 0, c.NumTokens(i), buf); err != nil {
			t.Fatal(err)
		}
		for j := range buf {
			if center != nil {
				buf[j] -= center[j%d]
			}
		}
		for r := 0; r < c.NumTokens(i); r++ {
			if slices.Equal(buf[r*d:(r+1)*d], row) {
				return true
			}
		}
		return false
	}
	p, err := NewRows(c, texts, 30, 5)
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 30 || p.D() != d {
		t.Fatalf("pool of %d rows of width %d, want 30 of %d", p.Len(), p.D(), d)
	}
	for r := 0; r < p.Len(); r++ {
		row, id := p.Row(r)
		if !slices.Contains(texts, int(id-500)) || !corpusRow(id, row, nil) {
			t.Fatalf("pool row %d is not a row of its text %d of the split", r, id)
		}
		for q := 0; q < r; q++ {
			if prev, _ := p.Row(q); slices.Equal(prev, row) {
				t.Fatalf("pool rows %d and %d are the same row", q, r)
			}
		}
	}
	all, err := NewRows(c, texts, 10*total, 5)
	if err != nil || all.Len() != total {
		t.Fatalf("pool larger than the split: %d rows (%v), want all %d", all.Len(), err, total)
	}

	excluded := []int64{c.TextID(3), c.TextID(8)}
	allowed := p.Outside(excluded)
	center := make([]float32, d)
	for j := range center {
		center[j] = float32(j) - 3.5
	}
	rng := rand.New(rand.NewPCG(2, 2))
	dst := mat.NewDense(len(allowed), d, nil)
	if err := p.Draw(rng, allowed, center, dst); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(allowed); i++ {
		row := make([]float32, d)
		for j, v := range dst.RawRowView(i) {
			row[j] = float32(v)
		}
		found := false
		for r := 0; r < p.Len(); r++ {
			if _, id := p.Row(r); corpusRow(id, row, center) {
				found = true
				if slices.Contains(excluded, id) {
					t.Fatalf("drawn row %d comes from excluded text %d", i, id)
				}
			}
		}
		if !found {
			t.Fatalf("drawn row %d is no corpus row minus the centring mean", i)
		}
	}
	if err := p.Draw(rng, allowed, nil, mat.NewDense(len(allowed)+1, d, nil)); err == nil {
		t.Error("drew more rows than the pool has outside the excluded texts")
	}
	if _, err := NewRows(c, texts, 0, 5); err == nil {
		t.Error("a pool of 0 rows was accepted")
	}
}
