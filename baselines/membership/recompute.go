package membership

import (
	"fmt"
	"math"
)

// Compute precisions a deployer can declare for its forward pass (RecomputeError).
const (
	PrecisionFP32 = "fp32"
	PrecisionBF16 = "bf16"
	PrecisionFP16 = "fp16"
)

// ComputePrecisions lists the precisions RecomputeError accepts.
var ComputePrecisions = []string{PrecisionFP32, PrecisionBF16, PrecisionFP16}

// RoundingsPerBlock is how many intermediate tensors of one transformer block are rounded to the
// compute precision: Q, K, V, the scores, the softmax, the context, the attention output, the
// residual sum and its LayerNorm, the FFN input product, the activation, the FFN output, the
// residual sum and its LayerNorm (14), rounded up to 16 for the bias adds and scalings that some
// implementations round separately.
const RoundingsPerBlock = 16

// AccumulationRoundoff is the unit round-off products accumulate in: fp32 for every BLAS and for
// bf16/fp16 tensor-core GEMMs (inputs in the low precision, sums in fp32).
const AccumulationRoundoff = 0x1p-24

// RecomputeError is a default for Options.Recompute: a bound on the relative 2-norm error between
// the row a deployer computed in precision (fp32, bf16 or fp16) and the attacker's fp32
// recomputation of it, for rows that went through blocks transformer blocks of hidden size width
// (blocks 0: the embedding output). The formula, per side:
//
//	stage(u) = sqrt(RoundingsPerBlock/3) u + sqrt(4 width) AccumulationRoundoff
//	rho      = (blocks + 1) (stage(u_deployer) + stage(2^-24))
//
// where the constants come from:
//   - sqrt(RoundingsPerBlock/3) u: each rounding to nearest adds a relative error uniform in
//     [-u, u] (variance u^2/3, as RankTol assumes), independent across the block's roundings;
//   - sqrt(4 width) 2^-24: an fp32 inner product of length k errs by about sqrt(k) u_32 (the
//     probabilistic error analysis of Higham and Mary, 2019); k = 4 width is the FFN's inner
//     dimension (4d in BERT and MiniLM, 8/3 d in Llama, which it covers); a different kernel or
//     batch changes the order of the sums and with it this error;
//   - blocks + 1: the embedding sum and its LayerNorm count as one stage; stages add linearly
//     (the coherent worst case; independent errors would grow as sqrt) with gain at most 1
//     (every block ends in a LayerNorm);
//   - both sides err: the deployer's in its precision, the attacker's in fp32.
//
// Measured (docs/content-recovery.md, "Recomputation error"): the same 4,227 rows of
// all-MiniLM-L6-v2 (d 384) recomputed with OpenBLAS SkylakeX, OpenBLAS Haswell and gonum, in
// three batch compositions, differ by at most 9.6e-7 (block 1), 1.3e-6 (block 3) and 2.7e-6
// (block 6) relative; the fp32 formula gives 9.9e-6, 2.0e-5 and 3.5e-5, 10-20x above. The bf16
// and fp16 values (3.6e-2 and 4.5e-3 at block 3, d 384) rest on the rounding model alone, not on
// a measurement of a low-precision deployer: conservative by the same linear growth, to be
// refined against PyTorch's bf16/fp16 forward.
//
// Rows rounded to a storage format afterwards (a float16 store) need StoredRecompute on top.
func RecomputeError(precision string, blocks, width int) (float64, error) {
	var u float64
	switch precision {
	case PrecisionFP32:
		u = roundFP32
	case PrecisionBF16:
		u = roundBF16
	case PrecisionFP16:
		u = roundFP16
	default:
		return 0, fmt.Errorf("membership: deployer precision %q: want fp32, bf16 or fp16", precision)
	}
	if blocks < 0 {
		return 0, fmt.Errorf("membership: recomputation through %d blocks: want >= 0", blocks)
	}
	if width < 1 {
		return 0, fmt.Errorf("membership: recomputation at width %d: want >= 1", width)
	}
	stage := func(u float64) float64 {
		return math.Sqrt(RoundingsPerBlock/3.0)*u + math.Sqrt(4*float64(width))*AccumulationRoundoff
	}
	return float64(blocks+1) * (stage(u) + stage(roundFP32)), nil
}

// StoredRecompute widens a recomputation error rho for rows that both sides round to a storage
// format of unit round-off uStore after computing them (the attacker rounds its candidate rows
// as the store writer rounded the deployer's; 0: no rounding). Rounding to nearest turns a
// difference far below uStore into a flipped last bit, so the bound is additive, not relative:
// with rd(a) = a (1 + eps_a), |eps| <= uStore per element,
//
//	||rd(a) - rd(b)|| <= (1 + uStore) ||a - b|| + 2 uStore ||a||,  ||rd(a)|| >= (1 - uStore) ||a||,
//
// so the relative error of the rounded rows is at most ((1 + uStore) rho + 2 uStore) / (1 - uStore).
// Measured on the small MiniLM store (float16): 3.2e-4 at most where the fp32 rows differed by
// 1.3e-6; the bound is 9.8e-4.
func StoredRecompute(rho, uStore float64) float64 {
	if uStore == 0 {
		return rho
	}
	return ((1+uStore)*rho + 2*uStore) / (1 - uStore)
}
