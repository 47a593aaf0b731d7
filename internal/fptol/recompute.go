package fptol

import (
	"fmt"
	"math"
)

// Compute precisions a deployer can declare for its forward pass (Recompute).
const (
	PrecisionFP32 = "fp32"
	PrecisionBF16 = "bf16"
	PrecisionFP16 = "fp16"
)

// Unit round-offs of the low precisions.
const (
	BFloat16 = 0x1p-8
	Float16  = 0x1p-11
)

// RoundingsPerBlock is how many intermediate tensors of one transformer block are rounded to the
// compute precision: Q, K, V, the scores, the softmax, the context, the attention output, the
// residual sum and its norm, the FFN input product, the activation, the FFN output, the residual
// sum and its norm (14), rounded up to 16 for the bias adds and scalings that some
// implementations round separately.
const RoundingsPerBlock = 16

// FittedC is the constant of Recompute's fitted term: about twice the largest
// err / (u sqrt(blocks + 1)) measured against a PyTorch deployer.
const FittedC = 12

// FittedFP32Unit is the fitted term's unit for an fp32 deployer: a float32 stack differs from
// geloattack's float32 forward less by storage rounding than by how it computes (summation order;
// transformers' RoPE angles p·theta in float32 where geloattack's are in float64, an error that
// grows with the position): measured up to 10 x 2^-24 at depth 3 and 4096 tokens.
const FittedFP32Unit = 0x1p-20

// Recompute bounds rho = ||x_att - x_dep|| / ||x_dep||, the relative 2-norm distance between a row
// x_dep a deployer computed in precision (fp32, bf16 or fp16) and the attacker's float32
// recomputation x_att of it, for a row that went through blocks transformer blocks of hidden size
// width (attn-input and residual rows of block L: blocks = L; a final norm's output: the number
// of blocks). It is the larger of two bounds, each covering what the other may miss:
//
// The rounding model (derived), per side:
//
//		stage(u) = sqrt(RoundingsPerBlock/3) u + sqrt(4 width) 2^-24
//		derived  = (blocks + 1) (stage(u_deployer) + stage(2^-24))
//
//	  - sqrt(RoundingsPerBlock/3) u: each rounding to nearest adds a relative error uniform in
//	    [-u, u] (variance u^2/3), independent across the block's roundings;
//	  - sqrt(4 width) 2^-24: an fp32 inner product of length k errs by about sqrt(k) u_32 (the
//	    probabilistic error analysis of Higham and Mary, 2019); k = 4 width is the FFN's inner
//	    dimension (4d in BERT, 8/3 d in Llama, which it covers); a different kernel or batch changes
//	    the order of the sums and with it this error;
//	  - blocks + 1: the embedding counts as one more stage; stages add linearly (the coherent worst
//	    case) with gain at most 1 (every block ends in a norm);
//	  - both sides err: the deployer's in its precision, the attacker's in fp32.
//
// Measured against it: the same 4,227 rows of all-MiniLM-L6-v2 (d 384) recomputed with OpenBLAS
// SkylakeX, OpenBLAS Haswell and gonum in three batch compositions differ by at most 8.7e-7
// (block 1), 1.3e-6 (block 3) and 2.7e-6 (block 6); the formula gives 9.9e-6, 2.0e-5, 3.5e-5.
//
// The fit to a PyTorch deployer (bench/torch_deploy.py against geloattack's forward):
//
//	fitted = FittedC u sqrt(blocks + 1),  u = 2^-8 (bf16), 2^-11 (fp16), FittedFP32Unit (fp32)
//
// on random-init Llama-3-shaped checkpoints (bf16 weights; d 64 to 1024; 2 to 32 layers; 64 to
// 4096 tokens; Llama-2, Mistral, Qwen2 and Qwen3 shapes at d 256), bf16 and fp16 emulated and,
// for bf16, PyTorch's CPU kernels, eager and fused attention: the largest max over rows was
// 6.4 u sqrt(blocks + 1) (a norm-preserving init, std 1/sqrt(d), at 4096 tokens; there the
// derived bound alone, 3.6e-2 at bf16 block 3, is below the measured 5.0e-2), p99 3.5; with
// model init's std 0.02 the max was 2.3. FittedC = 12 leaves about 2x for real checkpoints and
// GPU kernels, neither measured. Not covered by either: a deployer whose weights differ from the
// file's (an fp32 checkpoint cast to bf16), and fp32 contexts far past 4096 tokens.
func Recompute(precision string, blocks, width int) (float64, error) {
	var u, uFit float64
	switch precision {
	case PrecisionFP32:
		u, uFit = Float32, FittedFP32Unit
	case PrecisionBF16:
		u, uFit = BFloat16, BFloat16
	case PrecisionFP16:
		u, uFit = Float16, Float16
	default:
		return 0, fmt.Errorf("deployer precision %q: want fp32, bf16 or fp16", precision)
	}
	if blocks < 0 {
		return 0, fmt.Errorf("recomputation through %d blocks: want >= 0", blocks)
	}
	if width < 1 {
		return 0, fmt.Errorf("recomputation at width %d: want >= 1", width)
	}
	stage := func(u float64) float64 {
		return math.Sqrt(RoundingsPerBlock/3.0)*u + math.Sqrt(4*float64(width))*Float32
	}
	derived := float64(blocks+1) * (stage(u) + stage(Float32))
	fitted := FittedC * uFit * math.Sqrt(float64(blocks+1))
	return max(derived, fitted), nil
}
