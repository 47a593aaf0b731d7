package overhead

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gelo-research/geloattack/engine"
)

// MixKind says how the secret A is drawn.
type MixKind string

// The mixing matrices Run can time.
const (
	// MixOrthogonal is a Haar-orthogonal A: the Q of a float64 Householder QR of a Gaussian
	// matrix with column j multiplied by sign(R_jj); the trusted side unmixes with A^T.
	MixOrthogonal MixKind = "orthogonal"
	// MixKappa is A = Q1 diag(s) Q2^T, Q1 and Q2 Haar, s log-spaced in [1, kappa] in random order,
	// so cond(A) = kappa; A^-1 = Q2 diag(1/s) Q1^T is formed from the same factors.
	MixKappa MixKind = "kappa"
)

// Defaults of the fields Run fills when they are zero.
var (
	// DefaultNs are the paper's sequence lengths.
	DefaultNs = []int{64, 128, 256, 512, 1024, 2048, 4096, 8192}
	// DefaultMixes times both kinds of A.
	DefaultMixes = []MixKind{MixOrthogonal, MixKappa}
)

// Defaults and limits of Config's scalar fields.
const (
	DefaultD          = 4096     // row width d: the hidden size of the paper's Llama-2 7B
	DefaultRepeats    = 5        // measured rounds per n
	DefaultKappa      = 100      // cond(A): the paper's recommended bound
	DefaultBreakdownN = 512      // the n of the paper's breakdown
	DefaultMaxBytes   = 16 << 30 // memory Run may plan to hold (16 GiB)
	MaxDim            = 1 << 16  // largest n, d or p accepted
	MaxRepeats        = 1000     // largest Repeats accepted
	MaxKappa          = 1e6      // beyond this a float32 A^-1 keeps no correct digit
)

// Config says what Run measures. A zero field takes its default (DefaultConfig shows them); a
// negative or out-of-range one is an error. Every field but Backend maps to a command-line flag.
type Config struct {
	// Ns are the sequence lengths n (rows of H and size of A) to time, in the order given;
	// default DefaultNs. Each 2 <= n <= MaxDim, no repeats.
	Ns []int
	// D is the row width d of H and the rows of W; default 4096.
	D int
	// P is the projection width p, the columns of W; default D (a square projection such as
	// the paper's Q, K, V and O).
	P int
	// Repeats is the number of measured rounds per n; medians, quartiles, min and max are over
	// them. Default 5.
	Repeats int
	// Kappa is cond(A) of MixKappa; default 100 (1 <= Kappa <= MaxKappa).
	Kappa float64
	// Mixes are the kinds of A to time; default both (orthogonal, kappa).
	Mixes []MixKind
	// BreakdownN is the n whose parts Markdown sets beside the paper's breakdown; default 512
	// when it is in Ns, else the n of Ns nearest 512. It must be one of Ns.
	BreakdownN int
	// Seed seeds H, W and every A drawn (0 is a seed like any other).
	Seed uint64
	// Threads is the BLAS thread count of the CPU path (and of the host's A generation when a
	// GPU computes); 0 means GOMAXPROCS. Run restores the previous count when it returns.
	Threads int
	// MaxTimePerN stops the rounds at an n once its measured rounds have taken this long
	// (always at least one round; Row.Rounds says how many ran). 0 means no limit: Repeats
	// rounds at every n.
	MaxTimePerN time.Duration
	// MaxBytes bounds the memory Run plans to hold at the largest n (host float64 scratch of A
	// generation plus the float32 matrices); default 16 GiB. A config needing more is refused
	// before anything is allocated.
	MaxBytes int64
	// Backend, when set, computes the GEMMs (mix, GEMM, unmix, baseline) on it through
	// engine.Tape.MatMul, with engine.Sync before each clock read; nil means the CPU through
	// engine/blas. The caller opens it (engine/device.Open) and closes it; for CUDA, call Run on
	// the goroutine that opened it, locked to its OS thread (runtime.LockOSThread).
	Backend engine.Backend
}

// DefaultConfig is the configuration Run uses for a zero Config, with every default written out
// (for flag defaults).
func DefaultConfig() Config {
	c := Config{}.withDefaults()
	c.Ns = slices.Clone(c.Ns)
	c.Mixes = slices.Clone(c.Mixes)
	return c
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Ns == nil {
		c.Ns = DefaultNs
	}
	if c.D == 0 {
		c.D = DefaultD
	}
	if c.P == 0 {
		c.P = c.D
	}
	if c.Repeats == 0 {
		c.Repeats = DefaultRepeats
	}
	if c.Kappa == 0 {
		c.Kappa = DefaultKappa
	}
	if c.Mixes == nil {
		c.Mixes = DefaultMixes
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.BreakdownN == 0 && len(c.Ns) > 0 {
		// The n nearest 512 (the smaller on a tie), so that a sweep of small n still gets a
		// breakdown without naming one.
		best := c.Ns[0]
		for _, n := range c.Ns {
			dn, db := abs(n-DefaultBreakdownN), abs(best-DefaultBreakdownN)
			if dn < db || (dn == db && n < best) {
				best = n
			}
		}
		c.BreakdownN = best
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Validate reports the first field of c (after defaults) that Run would refuse, naming it.
func (c Config) Validate() error {
	c = c.withDefaults()
	if len(c.Ns) == 0 {
		return fmt.Errorf("overhead: Config.Ns is empty: want at least one n")
	}
	for i, n := range c.Ns {
		if n < 2 || n > MaxDim {
			return fmt.Errorf("overhead: Config.Ns[%d] = %d: want 2 <= n <= %d", i, n, MaxDim)
		}
		if j := slices.Index(c.Ns, n); j < i {
			return fmt.Errorf("overhead: Config.Ns[%d] = %d repeats Ns[%d]", i, n, j)
		}
	}
	if c.D < 1 || c.D > MaxDim {
		return fmt.Errorf("overhead: Config.D = %d: want 1 <= d <= %d", c.D, MaxDim)
	}
	if c.P < 1 || c.P > MaxDim {
		return fmt.Errorf("overhead: Config.P = %d: want 1 <= p <= %d (0 means D)", c.P, MaxDim)
	}
	if c.Repeats < 1 || c.Repeats > MaxRepeats {
		return fmt.Errorf("overhead: Config.Repeats = %d: want 1 <= repeats <= %d", c.Repeats, MaxRepeats)
	}
	if !(c.Kappa >= 1 && c.Kappa <= MaxKappa) { // also refuses NaN
		return fmt.Errorf("overhead: Config.Kappa = %g: want 1 <= kappa <= %g", c.Kappa, float64(MaxKappa))
	}
	if len(c.Mixes) == 0 {
		return fmt.Errorf("overhead: Config.Mixes is empty: want %q and/or %q", MixOrthogonal, MixKappa)
	}
	for i, m := range c.Mixes {
		if m != MixOrthogonal && m != MixKappa {
			return fmt.Errorf("overhead: Config.Mixes[%d] = %q: want %q or %q", i, m, MixOrthogonal, MixKappa)
		}
		if j := slices.Index(c.Mixes, m); j < i {
			return fmt.Errorf("overhead: Config.Mixes[%d] = %q repeats Mixes[%d]", i, m, j)
		}
	}
	if !slices.Contains(c.Ns, c.BreakdownN) {
		return fmt.Errorf("overhead: Config.BreakdownN = %d is not one of Ns %v", c.BreakdownN, c.Ns)
	}
	if c.Threads < 0 {
		return fmt.Errorf("overhead: Config.Threads = %d: want >= 0 (0 means GOMAXPROCS)", c.Threads)
	}
	if c.MaxTimePerN < 0 {
		return fmt.Errorf("overhead: Config.MaxTimePerN = %v: want >= 0 (0 means no limit)", c.MaxTimePerN)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("overhead: Config.MaxBytes = %d: want >= 0 (0 means %d)", c.MaxBytes, int64(DefaultMaxBytes))
	}
	nMax := slices.Max(c.Ns)
	if need := PlannedBytes(nMax, c.D, c.P); need > c.MaxBytes {
		return fmt.Errorf("overhead: n = %d, d = %d, p = %d needs about %.1f GiB, over Config.MaxBytes = %.1f GiB: lower Ns, D or P, or raise MaxBytes",
			nMax, c.D, c.P, float64(need)/(1<<30), float64(c.MaxBytes)/(1<<30))
	}
	return nil
}

// PlannedBytes estimates the memory Run holds at one n: the float64 scratch of drawing A (two
// Haar factors, their product, LAPACK's column-major copy: 4 n^2) and the float32 matrices (A,
// the kappa A and A^-1: 3 n^2; H, U: n d each; W: d p; Y, Z and H W: n p each). With a Backend
// the float32 ones are on the device too; the estimate counts them once.
func PlannedBytes(n, d, p int) int64 {
	n64, d64, p64 := int64(n), int64(d), int64(p)
	f64 := 4 * n64 * n64
	f32 := 3*n64*n64 + 2*n64*d64 + d64*p64 + 3*n64*p64
	if f64 > math.MaxInt64/16 || f32 > math.MaxInt64/8 {
		return math.MaxInt64
	}
	return 8*f64 + 4*f32
}
