package equality

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gelo-research/geloattack/data/gelo/mixing"
	"github.com/gelo-research/geloattack/engine/blas"
	"gonum.org/v1/gonum/blas/blas64"

	gblas "gonum.org/v1/gonum/blas"
)

// stage separates the random streams of one projection call.
type stage uint64

const (
	stageShields stage = iota + 1
	stageMix
)

// projIndex numbers the projections in stream keys.
var projIndex = map[string]uint64{"q": 1, "k": 2, "v": 3, "o": 4}

// stream returns the random stream of one stage of one projection call: a PCG generator seeded
// from ChaCha8 keyed by (seed, text id, layer, projection, stage, mix), as data/gelo keys its
// streams, so that nearby keys give independent draws.
func stream(seed uint64, textID int64, layer int, which string, st stage, mixKey uint64) *rand.Rand {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(textID))
	binary.LittleEndian.PutUint64(key[16:], uint64(layer)<<32|projIndex[which]<<8|uint64(st))
	binary.LittleEndian.PutUint64(key[24:], mixKey)
	k := rand.NewChaCha8(key)
	return rand.New(rand.NewPCG(k.Uint64(), k.Uint64()))
}

// call is one GELO projection call on the t rows of one text.
type call struct {
	textID    int64
	layer     int
	which     string
	mix       Mix
	precision string // accelerator storage
	trusted   string // TrustedFP64 or TrustedFP32
	frac      float64
	scale     float64
	seed      uint64
}

// scratch is one worker's buffers for protocol calls, grown on demand and reused.
type scratch struct {
	a, ainv, xs64, u64, y64, out64 []float64
	mx                             mixing.Mixer // the draws of A (see drawA)
	xs32, u32, y32, a32, ainv32    []float32
	shields, exact                 []float32

	// peak is the largest magnitude the accelerator has stored (U, Y) over the calls so far:
	// what fp16's range (65504) is up against.
	peak float64
}

// grow returns buf resized to n, reusing its storage when large enough.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// shieldCount is k for a text of t rows: ceil(frac * t), tolerant of round-off in the product.
func shieldCount(frac float64, t int) int {
	return int(math.Ceil(frac*float64(t) - 1e-9))
}

// gelo computes dst (t, out) = x (t, in) . w^T (w: (out, in)) + b through the protocol: shields,
// U = A [X; S] rounded to the storage precision, Y = U W^T in float32 on the "accelerator"
// (w is what the accelerator holds, already rounded when weights are), Y rounded, then
// (A^-1 Y)[:t] + b on the trusted side. It returns k, the number of shield rows used.
func (sc *scratch) gelo(lib *blas.Library, c call, x []float32, t, in int, w, b []float32, out int, dst []float32) (int, error) {
	k := 0
	if c.frac > 0 {
		k = shieldCount(c.frac, t)
	}
	n := t + k
	sc.drawShields(c, x, t, in, k)
	if err := sc.drawA(c, n); err != nil {
		return 0, err
	}

	// U: (n, in) = A (n, n) . [X; S] (n, in), rounded to the storage precision.
	sc.u32 = grow(sc.u32, n*in)
	if c.trusted == TrustedFP64 {
		sc.xs64 = grow(sc.xs64, n*in)
		for i, v := range x[:t*in] {
			sc.xs64[i] = float64(v)
		}
		for i, v := range sc.shields[:k*in] {
			sc.xs64[t*in+i] = float64(v)
		}
		sc.u64 = grow(sc.u64, n*in)
		blas64.Gemm(gblas.NoTrans, gblas.NoTrans, 1, gen(n, n, sc.a), gen(n, in, sc.xs64), 0, gen(n, in, sc.u64))
		for i, v := range sc.u64 {
			sc.u32[i] = float32(v)
		}
	} else {
		sc.xs32 = grow(sc.xs32, n*in)
		copy(sc.xs32, x[:t*in])
		copy(sc.xs32[t*in:], sc.shields[:k*in])
		lib.Sgemm(false, false, n, in, n, 1, sc.a32, n, sc.xs32, in, 0, sc.u32, in)
	}
	roundTo(c.precision, sc.u32)
	sc.observe(sc.u32)

	// Accelerator: Y (n, out) = U (n, in) . W^T (in, out), float32 accumulation; stored rounded.
	sc.y32 = grow(sc.y32, n*out)
	lib.Sgemm(false, true, n, out, in, 1, sc.u32, in, w, in, 0, sc.y32, out)
	roundTo(c.precision, sc.y32)
	sc.observe(sc.y32)

	// Trusted: X W^T = (A^-1 Y)[:t]; only the first t rows of A^-1 are needed (the shield rows'
	// outputs are dropped), then + b.
	if c.trusted == TrustedFP64 {
		sc.y64 = grow(sc.y64, n*out)
		for i, v := range sc.y32 {
			sc.y64[i] = float64(v)
		}
		sc.out64 = grow(sc.out64, t*out)
		if c.mix.Orthogonal {
			// A^-1 = A^T, so (A^-1)[:t] = (A[:, :t])^T.
			blas64.Gemm(gblas.Trans, gblas.NoTrans, 1, blas64.General{Rows: n, Cols: t, Stride: n, Data: sc.a}, gen(n, out, sc.y64), 0, gen(t, out, sc.out64))
		} else {
			blas64.Gemm(gblas.NoTrans, gblas.NoTrans, 1, gen(t, n, sc.ainv[:t*n]), gen(n, out, sc.y64), 0, gen(t, out, sc.out64))
		}
		for i, v := range sc.out64 {
			dst[i] = float32(v)
		}
	} else {
		if c.mix.Orthogonal {
			lib.Sgemm(true, false, t, out, n, 1, sc.a32, n, sc.y32, out, 0, dst[:t*out], out)
		} else {
			lib.Sgemm(false, false, t, out, n, 1, sc.ainv32[:t*n], n, sc.y32, out, 0, dst[:t*out], out)
		}
	}
	addBias(dst[:t*out], b, out)
	return k, nil
}

// precisionOnly computes dst (t, out) = round(round(x) . w^T) + b: the accelerator's storage
// rounding without GELO.
func (sc *scratch) precisionOnly(lib *blas.Library, p string, x []float32, t, in int, w, b []float32, out int, dst []float32) {
	sc.xs32 = grow(sc.xs32, t*in)
	copy(sc.xs32, x[:t*in])
	roundTo(p, sc.xs32)
	sc.observe(sc.xs32)
	lib.Sgemm(false, true, t, out, in, 1, sc.xs32, in, w, in, 0, dst[:t*out], out)
	roundTo(p, dst[:t*out])
	sc.observe(dst[:t*out])
	addBias(dst[:t*out], b, out)
}

// observe raises sc.peak to the largest magnitude in x (infinity included, NaN ignored).
func (sc *scratch) observe(x []float32) {
	p := float32(sc.peak)
	for _, v := range x {
		if v == v { // the builtin max would turn a NaN into the result
			p = max(p, v, -v)
		}
	}
	sc.peak = float64(p)
}

// addBias adds b (out) to every row of y (rows, out).
func addBias(y, b []float32, out int) {
	for r := 0; r+out <= len(y); r += out {
		row := y[r : r+out]
		for j := range row {
			row[j] += b[j]
		}
	}
}

// gen wraps a row-major (r, c) float64 slice as a gonum matrix.
func gen(r, c int, data []float64) blas64.General {
	return blas64.General{Rows: r, Cols: c, Stride: c, Data: data[:r*c]}
}

// drawShields fills sc.shields (k, in) with gaussian rows of expected norm scale * m, m the mean
// norm of the t rows of x: entries N(0, (scale m)^2 / in).
func (sc *scratch) drawShields(c call, x []float32, t, in, k int) {
	sc.shields = grow(sc.shields, k*in)
	if k == 0 {
		return
	}
	var m float64
	for i := 0; i < t; i++ {
		var ss float64
		for _, v := range x[i*in : (i+1)*in] {
			ss += float64(v) * float64(v)
		}
		m += math.Sqrt(ss)
	}
	m /= float64(t)
	sigma := c.scale * m / math.Sqrt(float64(in))
	rng := stream(c.seed, c.textID, c.layer, c.which, stageShields, 0)
	for i := range sc.shields {
		sc.shields[i] = float32(sigma * rng.NormFloat64())
	}
}

// drawA draws the call's A (n, n) into sc.a (float64, row-major) with data/gelo/mixing, the
// sampler's definition, and for non-orthogonal mixes its inverse into sc.ainv, from the draw's
// factors (the trusted side that drew A knows them). The draws run on gonum's library (the
// scalar Go QR) whatever BLAS the forward uses, so the same seed draws the same A on every
// machine. With a float32 trusted side A and A^-1 are rounded to float32 (sc.a32, sc.ainv32) and
// sc.a holds the rounded A, the matrix then used.
func (sc *scratch) drawA(c call, n int) error {
	rng := stream(c.seed, c.textID, c.layer, c.which, stageMix, c.mix.key())
	sc.a = grow(sc.a, n*n)
	sc.mx.Lib = blas.Gonum()
	if c.mix.Orthogonal {
		sc.mx.Orthogonal64(rng, n, sc.a)
	} else {
		sc.mx.Conditioned64(rng, n, c.mix.Kappa, sc.a)
		sc.ainv = grow(sc.ainv, n*n)
		if err := sc.mx.Inverse64(sc.ainv); err != nil {
			return fmt.Errorf("text %d layer %d %s, %s: %w", c.textID, c.layer, c.which, c.mix.Name(), err)
		}
	}
	if c.trusted == TrustedFP32 {
		sc.a32 = grow(sc.a32, n*n)
		for i, v := range sc.a {
			sc.a32[i] = float32(v)
			sc.a[i] = float64(sc.a32[i]) // the A the trusted side holds
		}
		if !c.mix.Orthogonal {
			sc.ainv32 = grow(sc.ainv32, n*n)
			for i, v := range sc.ainv {
				sc.ainv32[i] = float32(v)
			}
		}
	}
	return nil
}
