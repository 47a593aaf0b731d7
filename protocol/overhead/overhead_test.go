package overhead

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// smallConfig is a run that takes milliseconds: two n, d != p so that a swapped dimension
// shows, both kinds of A.
func smallConfig() Config {
	return Config{Ns: []int{16, 64}, D: 48, P: 40, Repeats: 1, Kappa: 100, Seed: 7}
}

// checkColumns checks the invariants of a row: the total is the sum of the parts' medians, the
// overhead follows from total and baseline, quantiles are ordered, and the unmixed result
// matched the plain one to float32 round-off (see tolFor).
func checkColumns(t *testing.T, res Result) {
	t.Helper()
	if want := len(res.Config.Ns) * len(res.Config.Mixes); len(res.Rows) != want {
		t.Fatalf("%d rows, want %d", len(res.Rows), want)
	}
	for _, r := range res.Rows {
		sum := r.AGen.Median + r.Copy.Median + r.Mix.Median + r.GEMM.Median + r.Unmix.Median
		if r.Total() != sum {
			t.Errorf("n=%d %s: total %g != sum of parts %g", r.N, r.Kind, r.Total(), sum)
		}
		if want := (sum - r.Baseline.Median) / r.Baseline.Median * 100; math.Abs(r.Overhead()-want) > 1e-9*math.Abs(want) {
			t.Errorf("n=%d %s: overhead %g%%, want %g%%", r.N, r.Kind, r.Overhead(), want)
		}
		for name, s := range map[string]Stat{"agen": r.AGen, "copy": r.Copy, "mix": r.Mix, "gemm": r.GEMM, "unmix": r.Unmix, "baseline": r.Baseline} {
			if !(s.Min <= s.Q1 && s.Q1 <= s.Median && s.Median <= s.Q3 && s.Q3 <= s.Max) || s.Min < 0 {
				t.Errorf("n=%d %s %s: unordered stat %+v", r.N, r.Kind, name, s)
			}
			if name != "copy" && s.Median <= 0 {
				t.Errorf("n=%d %s %s: median %g ms, want > 0", r.N, r.Kind, name, s.Median)
			}
		}
		if r.Rounds != res.Config.Repeats {
			t.Errorf("n=%d %s: %d rounds, want %d", r.N, r.Kind, r.Rounds, res.Config.Repeats)
		}
		if tol := tolFor(r.Kind, res.Config.Kappa, r.N); !(r.RelErr <= tol) {
			t.Errorf("n=%d %s: unmixed result off the plain one by %g (relative), tolerance %g", r.N, r.Kind, r.RelErr, tol)
		}
	}
}

// tolFor is the float32 round-off allowed between A^-1 (A H W) and H W, relative to max |H W|:
// A, A^-1 and the three products each round at eps32 = 2^-24 per element, errors that sums of
// about n terms grow by sqrt(n), and the unmix amplifies by at most cond(A). 5 cond(A) sqrt(n)
// eps32 is that bound with a small constant; the tests see 5 to 10 times less for the
// orthogonal A and far less than the worst case for the kappa one.
func tolFor(kind MixKind, kappa float64, n int) float64 {
	c := 1.0
	if kind == MixKappa {
		c = kappa
	}
	return 5 * c * math.Sqrt(float64(n)) * 0x1p-24
}

// TestRunColumnsAddUp runs the CPU path: every row's columns add up and its unmixed result
// equals the plain one.
func TestRunColumnsAddUp(t *testing.T) {
	var progress bytes.Buffer
	res, err := Run(context.Background(), smallConfig(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	checkColumns(t, res)
	for _, r := range res.Rows {
		if r.Copy != (Stat{}) {
			t.Errorf("n=%d %s: copy %+v on the CPU, want exactly 0", r.N, r.Kind, r.Copy)
		}
	}
	if lines := strings.Split(strings.TrimSpace(progress.String()), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "n=16 ") || !strings.HasPrefix(lines[1], "n=64 ") {
		t.Errorf("want one progress line per n, got %q", progress.String())
	}
	if res.Threads < 1 || res.QR == "" || !strings.HasPrefix(res.Device, "cpu (") {
		t.Errorf("result does not say where it ran: threads %d, QR %q, device %q", res.Threads, res.QR, res.Device)
	}
}

// TestRunOnBackend runs the device path (Tape.MatMul, engine.Sync, uploads of A) on the CPU
// backend, the one available in tests: the same invariants hold and copy is measured.
func TestRunOnBackend(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer blas.SetThreads(0) // cpu.New set the process-wide count to 1
	cfg := smallConfig()
	cfg.Backend = be
	cfg.Repeats = 3
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkColumns(t, res)
	for _, r := range res.Rows {
		if r.Copy.Median <= 0 {
			t.Errorf("n=%d %s: copy %g ms on a backend, want > 0", r.N, r.Kind, r.Copy.Median)
		}
	}
	if res.Device != be.Name() || res.Threads != 0 {
		t.Errorf("device %q threads %d: want the backend's name and BLAS threads left alone", res.Device, res.Threads)
	}
	if md := string(res.Markdown()); !strings.Contains(md, "upload of A") {
		t.Errorf("Markdown of a device run should explain the copy as the upload of A:\n%s", md)
	}
}

// TestPipelineUnmixes checks the computation being timed directly, for both kinds of A and an
// odd n: A^-1 (A H W) = H W to float32 round-off, the orthogonal A is orthogonal and the kappa
// A has cond(A) = kappa with A^-1 its inverse.
func TestPipelineUnmixes(t *testing.T) {
	lib := blas.Default()
	const n, d, p, kappa = 37, 24, 16, 100.0
	h := gaussian(stream(1, streamH, n, 0), n*d, 1)
	w := gaussian(stream(1, streamW, 0, 0), d*p, 1/math.Sqrt(d))
	l := newCPULayer(lib, n, d, p, h, w)
	g := newGenerator(lib, n)
	aOrth, aKappa, aInv := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	if err := g.orthogonal(stream(1, streamOrthogonal, n, 0), aOrth); err != nil {
		t.Fatal(err)
	}
	if err := g.kappa(stream(1, streamKappa, n, 0), kappa, aKappa, aInv); err != nil {
		t.Fatal(err)
	}
	if err := l.baseline(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind    MixKind
		a, ainv []float32
	}{{MixOrthogonal, aOrth, nil}, {MixKappa, aKappa, aInv}} {
		for _, f := range []func() error{func() error { return l.upload(c.a, c.ainv) }, l.mix, l.gemm, func() error { return l.unmix(c.kind == MixOrthogonal) }} {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := l.relErr()
		if tol := tolFor(c.kind, kappa, n); got > tol {
			t.Errorf("%s: max |A^-1 Y - H W| / max |H W| = %g > %g", c.kind, got, tol)
		}
		t.Logf("%s: relative error %.2e", c.kind, got)
	}

	// A A^T = I (orthogonal) and A A^-1 = I (kappa), in float64 from the float32 entries.
	toDense := func(x []float32) *mat.Dense {
		v := make([]float64, len(x))
		for i, e := range x {
			v[i] = float64(e)
		}
		return mat.NewDense(n, n, v)
	}
	var prod mat.Dense
	prod.Mul(toDense(aOrth), toDense(aOrth).T())
	if e := offIdentity(&prod); e > 1e-6 {
		t.Errorf("orthogonal A: max |A A^T - I| = %g", e)
	}
	prod.Mul(toDense(aKappa), toDense(aInv))
	if e := offIdentity(&prod); e > kappa*1e-6 {
		t.Errorf("kappa A: max |A A^-1 - I| = %g", e)
	}
	var svd mat.SVD
	if !svd.Factorize(toDense(aKappa), mat.SVDNone) {
		t.Fatal("SVD of the kappa A failed")
	}
	s := svd.Values(nil)
	if c := s[0] / s[n-1]; math.Abs(c-kappa) > 1e-3*kappa {
		t.Errorf("cond(A) = %g, want %g", c, kappa)
	}
}

// offIdentity is max |m - I|.
func offIdentity(m *mat.Dense) float64 {
	r, _ := m.Dims()
	var e float64
	for i := range r {
		for j := range r {
			want := 0.0
			if i == j {
				want = 1
			}
			e = max(e, math.Abs(m.At(i, j)-want))
		}
	}
	return e
}

// TestConfigRefused: invalid configurations are refused before anything runs, naming the field.
func TestConfigRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"n too small", func(c *Config) { c.Ns = []int{64, 1} }, "Config.Ns[1] = 1"},
		{"n too large", func(c *Config) { c.Ns = []int{1 << 17} }, "Config.Ns[0] = 131072"},
		{"n repeated", func(c *Config) { c.Ns = []int{16, 64, 16} }, "Config.Ns[2] = 16 repeats"},
		{"no n", func(c *Config) { c.Ns = []int{} }, "Config.Ns is empty"},
		{"d", func(c *Config) { c.D = -1 }, "Config.D = -1"},
		{"d too large", func(c *Config) { c.D = 1 << 17 }, "Config.D = 131072"},
		{"p", func(c *Config) { c.P = -3 }, "Config.P = -3"},
		{"repeats", func(c *Config) { c.Repeats = -1 }, "Config.Repeats = -1"},
		{"kappa below 1", func(c *Config) { c.Kappa = 0.5 }, "Config.Kappa = 0.5"},
		{"kappa NaN", func(c *Config) { c.Kappa = math.NaN() }, "Config.Kappa = NaN"},
		{"mix", func(c *Config) { c.Mixes = []MixKind{"haar"} }, `Config.Mixes[0] = "haar"`},
		{"no mix", func(c *Config) { c.Mixes = []MixKind{} }, "Config.Mixes is empty"},
		{"breakdown", func(c *Config) { c.BreakdownN = 512 }, "Config.BreakdownN = 512 is not one of Ns"},
		{"threads", func(c *Config) { c.Threads = -2 }, "Config.Threads = -2"},
		{"time", func(c *Config) { c.MaxTimePerN = -time.Second }, "Config.MaxTimePerN = -1s"},
		{"max bytes", func(c *Config) { c.MaxBytes = -1 }, "Config.MaxBytes = -1"},
		{"memory", func(c *Config) { c.Ns = []int{65536}; c.D = 65536 }, "over Config.MaxBytes"},
		{"memory bound", func(c *Config) { c.MaxBytes = 1000 }, "over Config.MaxBytes = 0.0 GiB"},
	} {
		cfg := smallConfig()
		c.mod(&cfg)
		_, err := Run(context.Background(), cfg, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestDefaults: the zero Config is the documented one and valid; BreakdownN follows Ns.
func TestDefaults(t *testing.T) {
	d := DefaultConfig()
	if len(d.Ns) != 8 || d.Ns[0] != 64 || d.Ns[7] != 8192 || d.D != 4096 || d.P != 4096 || d.Repeats != 5 ||
		d.Kappa != 100 || d.BreakdownN != 512 || len(d.Mixes) != 2 || d.MaxBytes != 16<<30 {
		t.Fatalf("DefaultConfig = %+v", d)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	d.Ns[0] = 3 // a copy: the package default is unchanged
	if DefaultNs[0] != 64 {
		t.Fatal("DefaultConfig aliases DefaultNs")
	}
	if c := (Config{Ns: []int{64, 128, 2048}}).withDefaults(); c.BreakdownN != 128 {
		t.Errorf("BreakdownN for Ns 64,128,2048 = %d, want the n nearest 512 (128)", c.BreakdownN)
	}
	if c := (Config{D: 512}).withDefaults(); c.P != 512 {
		t.Errorf("P defaults to %d for D = 512, want D", c.P)
	}
}

// TestMarkdownHasPaperColumns: the tables have the paper's columns with its figures beside
// ours, the breakdown carries the paper's parts, and the A-generation sentence is there.
func TestMarkdownHasPaperColumns(t *testing.T) {
	cfg := smallConfig()
	cfg.Ns = []int{64} // in the paper's list
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := string(res.Markdown())
	for _, want := range []string{
		"## Overhead per n: orthogonal A (Haar; unmixed with A^T)",
		"## Overhead per n: non-orthogonal A (cond 100; A^-1 formed with A)",
		"| n | overhead % (ours) | overhead % (paper) | GELO ms (ours) | GELO ms (paper) | baseline ms (ours) | baseline ms (paper) |",
		" | 28.9 | ", " | 4.490 | ", " | 3.480 |", // the paper's n = 64
		"## Breakdown at n = 64",
		"| A generation |", "| 2.322 (QR) |", "| 0.199 |", "| 0.441 |", "| 0.272 |", "| 14.186 |",
		"| 0.443 |", "| 14.123 |", "| 17.420 |", "| 14.566 |",
		"| copy | 0 (n/a) | 0 (n/a) | 14.186 |",
		"n = 512 was not measured",
		"no host-device transfer on the CPU",
		"## Parts at every n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	// The overhead table's figures are the row's.
	row, _ := res.Lookup(64, MixOrthogonal)
	if line := "| 64 | " + pct(row.Overhead()) + " | 28.9 | " + ms(row.Total()) + " | 4.490 | " + ms(row.Baseline.Median) + " | 3.480 |"; !strings.Contains(md, line) {
		t.Errorf("Markdown lacks the row %q:\n%s", line, md)
	}
}

// TestMarkdownSentenceAt512 measures n = 512 with a tiny d so that the A-generation sentence
// compares with the paper's 2.322 ms.
func TestMarkdownSentenceAt512(t *testing.T) {
	if testing.Short() {
		t.Skip("draws n = 512 matrices")
	}
	res, err := Run(context.Background(), Config{Ns: []int{512}, D: 8, Repeats: 1, Mixes: []MixKind{MixOrthogonal}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	row, _ := res.Lookup(512, MixOrthogonal)
	want := "A generation at n = 512: our Haar A takes " + ms(row.AGen.Median) + " ms"
	if md := string(res.Markdown()); !strings.Contains(md, want) || !strings.Contains(md, "the paper's 2.322 ms") {
		t.Errorf("Markdown lacks %q beside the paper's 2.322 ms:\n%s", want, md)
	}
}

// TestCSVColumnsAddUp parses the CSV: one line per row, the total equal to the sum of the
// part medians and the overhead to (total - baseline) / baseline (the file holds exact values).
func TestCSVColumnsAddUp(t *testing.T) {
	res, err := Run(context.Background(), smallConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(res.CSV())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(res.Rows) {
		t.Fatalf("%d CSV lines, want header + %d", len(recs), len(res.Rows))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, rec := range recs[1:] {
		num := func(name string) float64 {
			i, ok := col[name]
			if !ok {
				t.Fatalf("CSV has no column %q: %v", name, recs[0])
			}
			v, err := strconv.ParseFloat(rec[i], 64)
			if err != nil {
				t.Fatalf("column %s: %v", name, err)
			}
			return v
		}
		sum := 0.0
		for _, p := range []string{"agen", "copy", "mix", "gemm", "unmix"} {
			sum += num(p + "_median_ms")
		}
		if total := num("gelo_total_ms"); total != sum {
			t.Errorf("n=%s: gelo_total_ms %g, parts sum to %g", rec[0], total, sum)
		}
		total, base := num("gelo_total_ms"), num("baseline_median_ms")
		if o := num("overhead_pct"); o != (total-base)/base*100 {
			t.Errorf("n=%s: overhead_pct %g, (total - baseline) / baseline = %g", rec[0], o, (total-base)/base*100)
		}
		if rec[0] == "64" && num("paper_overhead_pct") != 28.9 {
			t.Errorf("n=64: paper_overhead_pct %s, want 28.9", rec[col["paper_overhead_pct"]])
		}
		if rec[0] == "16" && rec[col["paper_gelo_ms"]] != "" {
			t.Errorf("n=16: the paper has no figure, got %q", rec[col["paper_gelo_ms"]])
		}
	}
}

// TestPlotWritesPNG: the plot is a PNG file.
func TestPlotWritesPNG(t *testing.T) {
	res, err := Run(context.Background(), smallConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "overhead.png")
	if err := res.Plot(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG (%d bytes)", path, len(b))
	}
}

// TestCancel: a cancelled context stops the run between measurements with ctx's error and the
// rows of the n already finished.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, smallConfig(), nil)
	if !errors.Is(err, context.Canceled) || len(res.Rows) != 0 {
		t.Fatalf("cancelled before the start: rows %d, err %v", len(res.Rows), err)
	}

	// Cancel while the second n runs: the first n's rows come back.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	w := &cancelAfter{lines: 1, cancel: cancel}
	res, err = Run(ctx, smallConfig(), w)
	if !errors.Is(err, context.Canceled) || len(res.Rows) != 2 || res.Rows[0].N != 16 || !strings.Contains(err.Error(), "n = 64") {
		t.Fatalf("cancelled after n = 16: rows %d, err %v", len(res.Rows), err)
	}
}

// cancelAfter cancels once it has received the given number of progress lines.
type cancelAfter struct {
	lines  int
	cancel func()
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.lines -= bytes.Count(p, []byte("\n"))
	if c.lines <= 0 {
		c.cancel()
	}
	return len(p), nil
}

// TestMaxTimePerN: a time limit ends an n's rounds after the first, and the rows say so.
func TestMaxTimePerN(t *testing.T) {
	cfg := smallConfig()
	cfg.Repeats = 50
	cfg.MaxTimePerN = time.Nanosecond
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if r.Rounds != 1 || r.RelErr == 0 {
			t.Errorf("n=%d %s: %d rounds, check %g: want 1 round, checked", r.N, r.Kind, r.Rounds, r.RelErr)
		}
	}
}

// TestSummarize: quartiles interpolate between sorted rounds; the input is left unsorted.
func TestSummarize(t *testing.T) {
	in := []float64{5, 1, 4, 2, 3}
	s := summarize(in)
	if s != (Stat{Median: 3, Q1: 2, Q3: 4, Min: 1, Max: 5}) || in[0] != 5 {
		t.Fatalf("summarize(5 1 4 2 3) = %+v (input now %v)", s, in)
	}
	if s := summarize([]float64{1, 2}); s.Median != 1.5 || s.Q1 != 1.25 || s.Q3 != 1.75 {
		t.Fatalf("summarize(1 2) = %+v", s)
	}
	if s := summarize([]float64{7}); s != (Stat{7, 7, 7, 7, 7}) {
		t.Fatalf("summarize(7) = %+v", s)
	}
}
