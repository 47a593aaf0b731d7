package content

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/wordpiece"
)

func TestLocateTiesCountAgainstTheSecret(t *testing.T) {
	o, err := Locate([]float64{-3, -9, -9, -1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if o.Rank != 2 || o.Margin != 0 || o.Gap != 0 {
		t.Fatalf("tie: got %+v, want rank 2, margin 0, gap 0", o)
	}
	o, _ = Locate([]float64{-3, -9, -4, -1}, 1)
	if o.Rank != 1 || o.Margin != 5 || o.Gap != 5 {
		t.Fatalf("clear win: got %+v, want rank 1, margin 5, gap 5", o)
	}
	o, _ = Locate([]float64{-3, -9, -4, -1}, 3)
	if o.Rank != 4 || o.Margin != -8 {
		t.Fatalf("loss: got %+v, want rank 4, margin -8", o)
	}
	if _, err := Locate([]float64{1}, 0); err == nil {
		t.Fatal("one candidate accepted")
	}
}

// synthetic makes X (n, d) of rank r (n > r possible) and U = A X rounded to dtype.
func synthetic(rng *rand.Rand, n, d, r int, dtype gelo.ObserveDtype) (x, u *mat.Dense) {
	b := mat.NewDense(n, r, nil)
	c := mat.NewDense(r, d, nil)
	for _, m := range []*mat.Dense{b, c} {
		raw := m.RawMatrix().Data
		for i := range raw {
			raw[i] = rng.NormFloat64()
		}
	}
	x = new(mat.Dense)
	x.Mul(b, c)
	g := mat.NewDense(n, n, nil)
	for i := range g.RawMatrix().Data {
		g.RawMatrix().Data[i] = rng.NormFloat64()
	}
	var qr mat.QR
	qr.Factorize(g)
	var a mat.Dense
	qr.QTo(&a) // orthogonal (n, n), as GELO's Haar mixing
	u = new(mat.Dense)
	u.Mul(&a, x)
	f32 := make([]float32, n*d)
	for i, v := range u.RawMatrix().Data {
		f32[i] = float32(v)
	}
	roundTo(f32, dtype)
	for i, v := range f32 {
		u.RawMatrix().Data[i] = float64(v)
	}
	return x, u
}

// roundTo rounds to bf16 or fp16 by truncating mantissa bits with rounding to nearest, an
// independent stand-in for the sampler's rounding (ties are immaterial here).
func roundTo(x []float32, dtype gelo.ObserveDtype) {
	bits := map[gelo.ObserveDtype]int{gelo.ObserveBF16: 8, gelo.ObserveFP16: 11}[dtype]
	if bits == 0 {
		return
	}
	for i, v := range x {
		if v == 0 {
			continue
		}
		e := math.Floor(math.Log2(math.Abs(float64(v))))
		q := math.Ldexp(1, int(e)-bits+1)
		x[i] = float32(math.Round(float64(v)/q) * q)
	}
}

func TestRankTolFindsTheTrueRankUnderRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		dtype   gelo.ObserveDtype
		n, r, d int
	}{
		{gelo.ObserveNone, 120, 80, 96},
		{gelo.ObserveBF16, 120, 80, 96},
		{gelo.ObserveFP16, 120, 80, 96},
		{gelo.ObserveBF16, 60, 50, 96},
		{gelo.ObserveNone, 150, 96, 96}, // full rank
	} {
		_, u := synthetic(rng, tc.n, tc.d, tc.r, tc.dtype)
		ur, err := membership.UnitRoundoff(string(tc.dtype))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := baselines.NewRowSpace(u, membership.RankTol(u, ur))
		if err != nil {
			t.Fatal(err)
		}
		if rs.Rank() != tc.r {
			t.Errorf("%s n %d rank %d: numerical rank %d at tolerance %.3g", tc.dtype, tc.n, tc.r, rs.Rank(), membership.RankTol(u, ur))
		}
	}
	if _, err := membership.UnitRoundoff("fp8"); err == nil {
		t.Error("fp8 accepted")
	}
}

// candidatesFrom stacks candidate row blocks (each (t_i, d)) with the given slot ranges.
func candidatesFrom(blocks []*mat.Dense, slots [][2]int) *Candidates {
	_, d := blocks[0].Dims()
	c := &Candidates{Rows: &Rows{D: d, Off: []int{0}}, Slot: slots}
	for i, b := range blocks {
		n, _ := b.Dims()
		for r := 0; r < n; r++ {
			for _, v := range b.RawRowView(r) {
				c.Rows.Data = append(c.Rows.Data, float32(v))
			}
		}
		c.Rows.Off = append(c.Rows.Off, c.Rows.Off[i]+n)
		c.Values = append(c.Values, string(rune('a'+i)))
		c.Texts = append(c.Texts, "x")
	}
	return c
}

// TestScoreAllRanksTheContainedCandidateFirst builds candidates that share template rows lying in
// the row space and differ in their slot row: only the secret's slot row is in it. BestRow is
// fooled (every candidate has a contained row); the slot and energy scores are not. With U of full
// rank every candidate is contained and nothing can be told apart.
func TestScoreAllRanksTheContainedCandidateFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, d = 40, 64
	x, u := synthetic(rng, n, d, n, gelo.ObserveBF16)
	shared := mat.DenseCopyOf(x.Slice(0, 2, 0, d)) // a [CLS]-like row and a template row, in X
	var blocks []*mat.Dense
	const secret = 3
	for i := 0; i < 8; i++ {
		b := mat.NewDense(3, d, nil)
		b.Slice(0, 2, 0, d).(*mat.Dense).Copy(shared)
		row := b.RawRowView(2)
		if i == secret {
			copy(row, x.RawRowView(5))
		} else {
			for j := range row {
				row[j] = rng.NormFloat64()
			}
		}
		blocks = append(blocks, b)
	}
	slots := make([][2]int, len(blocks))
	for i := range slots {
		slots[i] = [2]int{2, 3}
	}
	c := candidatesFrom(blocks, slots)
	rs, err := baselines.NewRowSpace(u, membership.RankTol(u, 0x1p-8))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ScoreAll(rs, Scores)
	if err != nil {
		t.Fatal(err)
	}
	for k, kind := range Scores {
		o, _ := Locate(got[k], secret)
		if kind == BestRow {
			if o.Rank == 1 && o.Margin > 1 {
				t.Errorf("best_row told the secret apart by %.2f decades; the shared rows should fool it", o.Margin)
			}
			continue
		}
		need := 2.0
		if kind == Energy {
			need = 0.5 // diluted by the contained template rows: why the slot scores exist
		}
		if o.Rank != 1 || o.Margin < need {
			t.Errorf("%s: secret rank %d, margin %.2f decades; want rank 1 by >= %g decades (scores %v)", kind, o.Rank, o.Margin, need, got[k])
		}
	}

	// Full rank: U spans R^d, every candidate is contained.
	_, uFull := synthetic(rng, 2*d, d, d, gelo.ObserveNone)
	rsFull, err := baselines.NewRowSpace(uFull, membership.RankTol(uFull, 0x1p-24))
	if err != nil {
		t.Fatal(err)
	}
	if rsFull.Rank() != d {
		t.Fatalf("full-rank U has numerical rank %d of %d", rsFull.Rank(), d)
	}
	full, err := c.ScoreAll(rsFull, []Score{SlotWorst})
	if err != nil {
		t.Fatal(err)
	}
	msFull, err := membership.New(uFull, membership.Options{UnitRoundoff: 0x1p-24, AllObserved: true, RankTol: membership.RankTol(uFull, 0x1p-24)})
	if err != nil {
		t.Fatal(err)
	}
	meas, err := c.Measure(msFull)
	if err != nil {
		t.Fatal(err)
	}
	if dec := Decide(msFull, full[0], meas, 1); dec.Measure == "residual" {
		t.Fatalf("full rank: the attack rests a verdict on the void residual (%+v)", dec)
	}
	for i, v := range full[0] {
		if v > -8 {
			t.Errorf("full rank: candidate %d outside fraction 1e%.1f, want ~0", i, v)
		}
	}
}

func TestSlotRowsFindTheSecretTokens(t *testing.T) {
	vocab := map[string]int32{"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4,
		"my": 5, "pin": 6, "is": 7, "12": 8, "##34": 9, "today": 10, "5": 11}
	tok, err := wordpiece.New(vocab, wordpiece.BertUncased())
	if err != nil {
		t.Fatal(err)
	}
	tp, err := ParseTemplate("t", "my PIN is {x} today")
	if err != nil {
		t.Fatal(err)
	}
	for _, drop := range []bool{false, true} {
		enc := &encoder{tok: tok}
		enc.opt.DropSpecial = drop
		e := &Embedder{fwd: enc}
		r := &Rows{Off: []int{0}}
		for _, v := range []string{"1234", "5"} {
			ids := tok.Encode(tp.Fill(v), 0)
			if drop {
				ids = ids[1 : len(ids)-1]
			}
			r.IDs = append(r.IDs, ids)
			r.Off = append(r.Off, r.Off[len(r.Off)-1]+len(ids))
		}
		got, err := e.SlotRows(tp, []string{"1234", "5"}, r)
		if err != nil {
			t.Fatal(err)
		}
		off := 0
		if drop {
			off = -1
		}
		want := [][2]int{{4 + off, 6 + off}, {4 + off, 5 + off}}
		if got[0] != want[0] || got[1] != want[1] {
			t.Errorf("drop %v: slot rows %v, want %v (ids %v)", drop, got, want, r.IDs)
		}
	}
}

func TestTemplatesAndSets(t *testing.T) {
	if _, err := ParseTemplate("x", "no slot"); err == nil {
		t.Error("template without {x} accepted")
	}
	if _, err := ParseTemplate("x", "{x} and {x}"); err == nil {
		t.Error("template with two slots accepted")
	}
	if got := TemplateBirth.Fill("March 5, 1987"); got != "I was born on March 5, 1987" {
		t.Errorf("fill: %q", got)
	}
	p := PINs()
	if len(p) != 10000 || p[0] != "0000" || p[9999] != "9999" {
		t.Errorf("PINs: %d, %q..%q", len(p), p[0], p[len(p)-1])
	}
	dts, err := Dates(1925, 2024)
	if err != nil || len(dts) != 36525 || dts[0] != "January 1, 1925" || dts[len(dts)-1] != "December 31, 2024" {
		t.Errorf("dates: %d %v", len(dts), err)
	}
	sub := Subset(p, 100, 7)
	if len(sub) != 100 || sub[0] >= sub[99] {
		t.Errorf("subset: %d, not in order", len(sub))
	}
	if again := Subset(p, 100, 7); again[50] != sub[50] {
		t.Error("subset not reproducible")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "c.txt")
	if err := os.WriteFile(f, []byte("# secrets\nalpha\n\nbeta\nalpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCandidates(f); err == nil {
		t.Error("repeated candidate accepted")
	}
	if err := os.WriteFile(f, []byte("# secrets\nalpha\n\n beta \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := ReadCandidates(f); err != nil || len(c) != 2 || c[1] != "beta" {
		t.Errorf("candidates file: %v %v", c, err)
	}
}

func TestLocateTiesAtRandomIsAtChance(t *testing.T) {
	scores := make([]float64, 10)
	rng := rand.New(rand.NewPCG(9, 9))
	first := 0
	for i := 0; i < 2000; i++ {
		o, err := LocateTies(scores, i%10, rng)
		if err != nil {
			t.Fatal(err)
		}
		if o.Rank == 1 {
			first++
		}
	}
	if first < 140 || first > 260 { // 200 expected, sd ~13
		t.Fatalf("all tied: secret first %d of 2000 times, want ~200 (chance 1/10)", first)
	}
}

// A candidates file (-set file:PATH) is read through the file door: /dev/zero, a FIFO with no
// writer and a directory are refused at once naming the path, and a line past the limit is refused
// naming its line, instead of blocking or filling memory.
func TestReadCandidatesRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	long := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(long, []byte("1234\n"+strings.Repeat("9", 1<<17)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", fifo, dir, long} {
		done := make(chan error, 1)
		go func() { _, err := ReadCandidates(p); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("ReadCandidates(%s): %v, want a refusal naming the path", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadCandidates(%s) blocked", p)
		}
	}
}
