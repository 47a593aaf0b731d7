package engine

import (
	"fmt"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// MixRound is the storage format MixRows rounds U to, as the GELO sampler's observe_dtype says
// an accelerator stores the observations.
type MixRound int

// Roundings of MixRows.
const (
	MixRoundNone MixRound = iota // U stays float32
	MixRoundBF16                 // nearest bf16, ties to even
	MixRoundFP16                 // nearest IEEE half, ties to even, overflow to infinity
)

// String is the observe_dtype name of r.
func (r MixRound) String() string {
	switch r {
	case MixRoundNone:
		return "fp32"
	case MixRoundBF16:
		return "bf16"
	case MixRoundFP16:
		return "fp16"
	}
	return fmt.Sprintf("MixRound(%d)", int(r))
}

// Mixer is implemented by a backend that forms U = A X in fp32 whatever the precision of its
// other GEMMs (CUDA: tf32 and bf16 runs must see the observations the host would form, not
// rounded ones). A backend without it gets MixRows' host-memory path.
type Mixer interface {
	// MixRows sets u_i = round(a_i x_i) for i < batch: a: (batch, n, k), x: (batch, k, d),
	// u: (batch, n, d), every product and sum in fp32.
	MixRows(u, a, x *Tensor, batch, n, k, d int, round MixRound)
}

// MixRows forms the observations U = A X of a batch of GELO sets on the backend, rounded to
// round: a: (B, n, k) the observed rows of each set's mixing matrix (padded rows and columns
// zero), x: (B, k, d) each set's rows [H; S] (padded rows zero) -> U: (B, n, d). U is data, not
// an activation: neither input may need a gradient, and nothing is recorded for Backward.
// Padded rows of U are zero when x is finite (0 * Inf is NaN).
//
// The sum's order is the backend's GEMM's (cuBLAS, OpenBLAS), so U agrees with the sampler's
// host product within fptol.Gamma(k, fptol.Float32) of each sum's magnitude, not bit for bit,
// except where every product and partial sum is exact (small integers), where any order gives
// the same bits.
func (tp *Tape) MixRows(a, x *Tensor, round MixRound) *Tensor {
	if !tp.usable("MixRows", a, x) {
		return tp.placeholder()
	}
	if a.ndim != 3 || x.ndim != 3 || a.shape[0] != x.shape[0] || a.shape[2] != x.shape[1] {
		return tp.failf("MixRows", "a %v, x %v: want (B, n, k) and (B, k, d)", a, x)
	}
	if a.needGrad || x.needGrad {
		return tp.failf("MixRows", "a %v or x %v needs a gradient: MixRows forms data and passes none back", a, x)
	}
	if round < MixRoundNone || round > MixRoundFP16 {
		return tp.failf("MixRows", "rounding %v: want fp32, bf16 or fp16", round)
	}
	batch, n, k, d := a.shape[0], a.shape[1], a.shape[2], x.shape[2]
	u, ok := tp.alloc("mix_rows", batch, n, d)
	if !ok {
		return u
	}
	if m, ok := mixerOf(tp.be); ok {
		m.MixRows(u, a, x, batch, n, k, d, round)
		return u
	}
	host, ok := HostSlice(u)
	if !ok {
		return tp.failf("MixRows", "backend %s neither forms U in fp32 (engine.Mixer) nor computes in host memory", tp.be.Name())
	}
	// The host's BLAS is fp32 whatever the run's precision (the CPU has no other).
	tp.be.GemmStrided(false, false, batch, n, d, k, 1, a, n*k, x, k*d, 0, u, n*d)
	switch round {
	case MixRoundBF16:
		numfmt.RoundBF16s(host)
	case MixRoundFP16:
		numfmt.RoundF16s(host)
	}
	return u
}

// mixerOf finds a Mixer along be's Unwrap chain.
func mixerOf(be Backend) (Mixer, bool) {
	for be != nil {
		if m, ok := be.(Mixer); ok {
			return m, true
		}
		w, ok := be.(Wrapper)
		if !ok {
			break
		}
		be = w.Unwrap()
	}
	return nil, false
}
