package overhead

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// Row is one kind of A measured at one n: each part's spread over the rounds, in milliseconds.
type Row struct {
	// N is the sequence length n.
	N int
	// Kind is how A was drawn.
	Kind MixKind
	// Rounds is the number of measured rounds (Config.Repeats unless MaxTimePerN cut it short).
	Rounds int
	// AGen draws A (and for MixKappa also forms A^-1) on the trusted side, in float64 rounded
	// to float32.
	AGen Stat
	// Copy is the host-to-device upload of A (and A^-1) with a Backend; exactly 0 on the CPU,
	// where nothing is transferred.
	Copy Stat
	// Mix is U = A H: (n, n) x (n, d).
	Mix Stat
	// GEMM is the offloaded product Y = U W: (n, d) x (d, p).
	GEMM Stat
	// Unmix is A^-1 Y: (n, n) x (n, p) (A^T Y for MixOrthogonal).
	Unmix Stat
	// Baseline is the plain layer's GEMM H W: (n, d) x (d, p), the same measurement in every
	// Kind's row of an n.
	Baseline Stat
	// RelErr is max |A^-1 Y - H W| / max |H W| in the last round: the unmixed result checked
	// against the plain one (float32 round-off, growing with cond(A)).
	RelErr float64
}

// Total is the GELO total in ms: the sum of the parts' medians (A generation, copy, mix, GEMM,
// unmix), so that the table's columns add up.
func (r Row) Total() float64 {
	return r.AGen.Median + r.Copy.Median + r.Mix.Median + r.GEMM.Median + r.Unmix.Median
}

// Overhead is (Total - baseline) / baseline in percent, the baseline being Baseline.Median.
func (r Row) Overhead() float64 {
	return (r.Total() - r.Baseline.Median) / r.Baseline.Median * 100
}

// Result is what Run measured.
type Result struct {
	// Config is the configuration run, defaults filled in.
	Config Config
	// Device says where the GEMMs ran: "cpu (<BLAS library>)" or the Backend's Name.
	Device string
	// QR names the QR implementation that drew A (engine/blas: LAPACK or gonum).
	QR string
	// Threads is the BLAS thread count Run set for the CPU GEMMs and the host's A generation;
	// 0 when Run left it alone (a Backend that is itself the CPU manages BLAS threads).
	Threads int
	// Rows are the measurements in the order of Config.Ns, then Config.Mixes. After an error
	// or cancellation they hold the n that finished.
	Rows []Row
}

// Lookup returns the row of n and kind.
func (r Result) Lookup(n int, kind MixKind) (Row, bool) {
	for _, row := range r.Rows {
		if row.N == n && row.Kind == kind {
			return row, true
		}
	}
	return Row{}, false
}

// warmupMaxWork is the largest n^2 max(d, p) at which the CPU runs an unmeasured round of the
// GEMMs before an n's measured rounds: below it a cold start (page faults on fresh buffers,
// OpenBLAS waking its threads) is a visible share of a round; above it (n > 2048 at d = 4096) a
// round takes seconds and the warm-up would cost as much as a measurement. A Backend always gets
// the warm-up: its first round also allocates device memory.
const warmupMaxWork = 1 << 34

// Random streams of one seed: each use of randomness has its own, so that changing Ns or Mixes
// leaves the draws of the others unchanged.
const (
	streamW = iota + 1
	streamH
	streamOrthogonal
	streamKappa
)

// stream is the generator of one use at one n and round.
func stream(seed uint64, use, n, round int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(use)<<56|uint64(n)<<24|uint64(round)))
}

// Run measures the parts of a GELO-protected linear layer against the plain one at every n of
// cfg (see the package comment), printing one progress line per n to progress (nil: none). It
// checks ctx between measurements: a cancelled run returns the rows of the n that finished with
// ctx's error. One measurement (a QR at n = 8192 takes most of a minute on two cores) is not
// interrupted.
func Run(ctx context.Context, cfg Config, progress io.Writer) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.withDefaults()
	if progress == nil {
		progress = io.Discard
	}
	lib := blas.Default()
	res := Result{Config: cfg, QR: lib.QRName(), Device: "cpu (" + lib.Name() + ")"}
	if cfg.Backend != nil {
		res.Device = cfg.Backend.Name()
	}
	// The CPU backend runs BLAS single-threaded on its own workers: more BLAS threads would
	// compete with them. Otherwise the BLAS threads are this benchmark's to set.
	if _, cpuBackend := cfg.Backend.(*cpu.Backend); !cpuBackend {
		prev := lib.Threads()
		lib.SetThreads(cfg.Threads)
		defer lib.SetThreads(prev)
		res.Threads = lib.Threads()
	}

	w := gaussian(stream(cfg.Seed, streamW, 0, 0), cfg.D*cfg.P, 1/math.Sqrt(float64(cfg.D))) // w: (d, p)
	var tp *engine.Tape
	if cfg.Backend != nil {
		tp = engine.NewTape(cfg.Backend) // one tape for every n: its arena is reused
	}
	for _, n := range cfg.Ns {
		start := time.Now()
		h := gaussian(stream(cfg.Seed, streamH, n, 0), n*cfg.D, 1) // h: (n, d)
		var l layer
		if cfg.Backend != nil {
			l = &deviceLayer{be: cfg.Backend, tp: tp, n: n, d: cfg.D, p: cfg.P, h: h, w: w}
		} else {
			l = newCPULayer(lib, n, cfg.D, cfg.P, h, w)
		}
		rows, err := measureN(ctx, cfg, lib, l, n)
		if err != nil {
			return res, fmt.Errorf("overhead: n = %d: %w", n, err)
		}
		res.Rows = append(res.Rows, rows...)
		fmt.Fprintln(progress, progressLine(rows, time.Since(start), cfg.Backend != nil))
	}
	return res, nil
}

// measureN runs the warm-up and measured rounds at one n and returns one Row per mix.
func measureN(ctx context.Context, cfg Config, lib *blas.Library, l layer, n int) ([]Row, error) {
	gen := newGenerator(lib, n)
	aOrth := make([]float32, n*n)  // aOrth: (n, n)
	aKappa := make([]float32, n*n) // aKappa: (n, n)
	aInv := make([]float32, n*n)   // aInv: (n, n), the inverse of aKappa
	mat := func(kind MixKind) (a, ainv []float32) {
		if kind == MixOrthogonal {
			return aOrth, nil
		}
		return aKappa, aInv
	}

	// One round: the baseline, then each mix's parts in the protocol's order. times, when not
	// nil, receives the parts' durations (ms) per mix: [A-gen, copy, mix, GEMM, unmix].
	round := func(r int, measure, check bool, times map[MixKind]*[5][]float64, base *[]float64, errs map[MixKind]float64) error {
		step := func(what string, f func() error) (float64, error) {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, fmt.Errorf("round %d, %s: %w", r, what, err)
			}
			return float64(time.Since(t0).Nanoseconds()) / 1e6, nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.begin(); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		t, err := step("baseline H W", l.baseline)
		if err != nil {
			return err
		}
		if measure {
			*base = append(*base, t)
		}
		for _, kind := range cfg.Mixes {
			a, ainv := mat(kind)
			var parts [5]float64
			if measure {
				// The warm-up leaves A as it is (zero at first): it warms the GEMMs, not the draw.
				rng := stream(cfg.Seed, streamOrthogonal, n, r)
				draw := func() error { return gen.orthogonal(rng, a) }
				if kind == MixKappa {
					rng = stream(cfg.Seed, streamKappa, n, r)
					draw = func() error { return gen.kappa(rng, cfg.Kappa, a, ainv) }
				}
				if parts[0], err = step(string(kind)+" A generation", draw); err != nil {
					return err
				}
			}
			if l.transfers() {
				if parts[1], err = step(string(kind)+" copy of A", func() error { return l.upload(a, ainv) }); err != nil {
					return err
				}
			} else if err := l.upload(a, ainv); err != nil { // no transfer: the part is 0
				return err
			}
			if parts[2], err = step(string(kind)+" mix U = A H", l.mix); err != nil {
				return err
			}
			if parts[3], err = step(string(kind)+" GEMM Y = U W", l.gemm); err != nil {
				return err
			}
			if parts[4], err = step(string(kind)+" unmix A^-1 Y", func() error { return l.unmix(kind == MixOrthogonal) }); err != nil {
				return err
			}
			if measure {
				for i, v := range parts {
					times[kind][i] = append(times[kind][i], v)
				}
			}
			if check {
				e, err := l.relErr()
				if err != nil {
					return fmt.Errorf("round %d, %s check: %w", r, kind, err)
				}
				errs[kind] = e
			}
		}
		return nil
	}

	if l.transfers() || n*n*max(cfg.D, cfg.P) <= warmupMaxWork {
		if err := round(-1, false, false, nil, nil, nil); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	times := map[MixKind]*[5][]float64{}
	for _, kind := range cfg.Mixes {
		times[kind] = new([5][]float64)
	}
	var base []float64
	errs := map[MixKind]float64{}
	start := time.Now()
	rounds := 0
	for r := range cfg.Repeats {
		last := r == cfg.Repeats-1
		// The check costs a pass over Y; it runs in the round that is known to be the last, or
		// in every round when a time limit may end them early.
		check := last || cfg.MaxTimePerN > 0
		if err := round(r, true, check, times, &base, errs); err != nil {
			return nil, err
		}
		rounds++
		if cfg.MaxTimePerN > 0 && time.Since(start) >= cfg.MaxTimePerN {
			break
		}
	}
	rows := make([]Row, 0, len(cfg.Mixes))
	baseline := summarize(base)
	for _, kind := range cfg.Mixes {
		t := times[kind]
		rows = append(rows, Row{
			N: n, Kind: kind, Rounds: rounds,
			AGen: summarize(t[0]), Copy: summarize(t[1]), Mix: summarize(t[2]), GEMM: summarize(t[3]), Unmix: summarize(t[4]),
			Baseline: baseline, RelErr: errs[kind],
		})
	}
	return rows, nil
}

// progressLine is the one line printed when an n is done.
func progressLine(rows []Row, took time.Duration, copies bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "n=%d (%d rounds, %.1f s): baseline %.3f ms", rows[0].N, rows[0].Rounds, took.Seconds(), rows[0].Baseline.Median)
	for _, r := range rows {
		fmt.Fprintf(&b, "; %s GELO %.3f ms (A-gen %.3f", r.Kind, r.Total(), r.AGen.Median)
		if copies {
			fmt.Fprintf(&b, ", copy %.3f", r.Copy.Median)
		}
		fmt.Fprintf(&b, ", mix %.3f, GEMM %.3f, unmix %.3f) %+.1f%%", r.Mix.Median, r.GEMM.Median, r.Unmix.Median, r.Overhead())
	}
	return b.String()
}

// gaussian returns n draws of N(0, scale^2) as float32.
func gaussian(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(scale * rng.NormFloat64())
	}
	return x
}

// relErr is max |z - want| / max |want|.
func relErr(z, want []float32) float64 {
	var num, den float64
	for i, w := range want {
		num = max(num, math.Abs(float64(z[i])-float64(w)))
		den = max(den, math.Abs(float64(w)))
	}
	if den == 0 {
		return num
	}
	return num / den
}

// layer computes the GEMMs of one n on one device. Each method returns when its work is done
// (a Backend is synced), so that a clock read after it measures the work.
type layer interface {
	// begin starts a round: a device gets H and W (not measured: the baseline needs them too).
	begin() error
	// baseline computes H W.
	baseline() error
	// transfers says whether upload moves data (a device) or only hands over the host matrices.
	transfers() bool
	// upload makes A (and A^-1, nil for an orthogonal A) available to the GEMMs.
	upload(a, ainv []float32) error
	// mix computes U = A H.
	mix() error
	// gemm computes Y = U W.
	gemm() error
	// unmix computes Z = A^T Y (orthogonal) or A^-1 Y.
	unmix(orthogonal bool) error
	// relErr compares the last Z with the last H W (see Row.RelErr).
	relErr() (float64, error)
}

// cpuLayer runs the GEMMs through engine/blas on host buffers.
type cpuLayer struct {
	lib     *blas.Library
	n, d, p int
	h, w    []float32 // h: (n, d), w: (d, p)
	a, ainv []float32 // (n, n), set by upload
	u       []float32 // (n, d)
	y, z    []float32 // (n, p)
	hw      []float32 // (n, p)
}

func newCPULayer(lib *blas.Library, n, d, p int, h, w []float32) *cpuLayer {
	return &cpuLayer{lib: lib, n: n, d: d, p: p, h: h, w: w,
		u: make([]float32, n*d), y: make([]float32, n*p), z: make([]float32, n*p), hw: make([]float32, n*p)}
}

func (l *cpuLayer) begin() error    { return nil }
func (l *cpuLayer) transfers() bool { return false }

func (l *cpuLayer) upload(a, ainv []float32) error {
	l.a, l.ainv = a, ainv
	return nil
}

func (l *cpuLayer) baseline() error {
	l.lib.Sgemm(false, false, l.n, l.p, l.d, 1, l.h, l.d, l.w, l.p, 0, l.hw, l.p)
	return nil
}

func (l *cpuLayer) mix() error {
	l.lib.Sgemm(false, false, l.n, l.d, l.n, 1, l.a, l.n, l.h, l.d, 0, l.u, l.d)
	return nil
}

func (l *cpuLayer) gemm() error {
	l.lib.Sgemm(false, false, l.n, l.p, l.d, 1, l.u, l.d, l.w, l.p, 0, l.y, l.p)
	return nil
}

func (l *cpuLayer) unmix(orthogonal bool) error {
	if orthogonal {
		l.lib.Sgemm(true, false, l.n, l.p, l.n, 1, l.a, l.n, l.y, l.p, 0, l.z, l.p)
	} else {
		l.lib.Sgemm(false, false, l.n, l.p, l.n, 1, l.ainv, l.n, l.y, l.p, 0, l.z, l.p)
	}
	return nil
}

func (l *cpuLayer) relErr() (float64, error) { return relErr(l.z, l.hw), nil }

// deviceLayer runs the GEMMs on a Backend through a Tape (MatMul on tensors), syncing after
// each part. Its tensors live until the next begin.
type deviceLayer struct {
	be      engine.Backend
	tp      *engine.Tape
	n, d, p int
	h, w    []float32 // host h: (n, d), w: (d, p)

	th, tw, thw *engine.Tensor // (n, d), (d, p), (n, p)
	ta, tainv   *engine.Tensor // (n, n); tainv nil for an orthogonal A
	tu          *engine.Tensor // (n, d)
	ty, tz      *engine.Tensor // (n, p)
}

// sync waits for the device and returns the first error of the tape or the backend.
func (l *deviceLayer) sync(what string) error {
	if err := l.tp.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := engine.Sync(l.be); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (l *deviceLayer) begin() error {
	l.tp.Reset()
	l.th = l.tp.Input(l.h, l.n, l.d)
	l.tw = l.tp.Input(l.w, l.d, l.p)
	return l.sync("upload H and W")
}

func (l *deviceLayer) transfers() bool { return true }

func (l *deviceLayer) upload(a, ainv []float32) error {
	l.ta = l.tp.Input(a, l.n, l.n)
	l.tainv = nil
	if ainv != nil {
		l.tainv = l.tp.Input(ainv, l.n, l.n)
	}
	return l.sync("upload A")
}

func (l *deviceLayer) baseline() error {
	l.thw = l.tp.MatMul(l.th, l.tw, false, false)
	return l.sync("H W")
}

func (l *deviceLayer) mix() error {
	l.tu = l.tp.MatMul(l.ta, l.th, false, false)
	return l.sync("A H")
}

func (l *deviceLayer) gemm() error {
	l.ty = l.tp.MatMul(l.tu, l.tw, false, false)
	return l.sync("U W")
}

func (l *deviceLayer) unmix(orthogonal bool) error {
	if orthogonal {
		l.tz = l.tp.MatMul(l.ta, l.ty, true, false)
	} else {
		l.tz = l.tp.MatMul(l.tainv, l.ty, false, false)
	}
	return l.sync("A^-1 Y")
}

func (l *deviceLayer) relErr() (float64, error) {
	z, hw := make([]float32, l.n*l.p), make([]float32, l.n*l.p)
	if err := l.tz.CopyTo(z); err != nil {
		return 0, err
	}
	if err := l.thw.CopyTo(hw); err != nil {
		return 0, err
	}
	if err := l.sync("download Z and H W"); err != nil {
		return 0, err
	}
	return relErr(z, hw), nil
}
