// Package fptol derives the tolerances of floating-point comparisons from the computation compared,
// so a test states why two results may differ instead of picking 1e-6 by hand. Two correct
// evaluations of the same formula differ when a GEMM kernel (OpenBLAS picks one per CPU: Haswell,
// SkylakeX, Zen, ...; gonum another) or the shape of a batch changes the order of a sum; these
// bounds cover every such order.
package fptol

import "math"

// Unit round-offs.
const (
	// Float32 is 2^-24, the unit round-off of IEEE binary32.
	Float32 = 0x1p-24
	// Float64 is 2^-53.
	Float64 = 0x1p-53
)

// Gamma is Higham's gamma_k = k u / (1 - k u): the relative error bound, against the sum of the
// terms' magnitudes, of a sum or dot product of k terms computed in any order with unit round-off
// u. +Inf when k u >= 1 (no bound).
func Gamma(k int, u float64) float64 {
	ku := float64(k) * u
	if ku >= 1 {
		return math.Inf(1)
	}
	return ku / (1 - ku)
}

// Chain bounds the relative difference, against the largest magnitude of the result, between two
// evaluations of a chain of `stages` matrix products (each inner dimension at most k) in
// precision u, whatever the order of each sum:
//
//	2 stages gamma_k sqrt(k)
//
// 2: each evaluation is within the bound of the exact result; stages: first-order errors of the
// stages add (a stage's input error passes through the next stage with a gain of order one in the
// networks tested: normalised layers and residual sums); gamma_k: one dot product's error against
// the sum of its terms' magnitudes; sqrt(k): that sum over the dot product's own size for terms of
// random sign (a dot product of k such terms is about sqrt(k) times smaller than the sum of their
// magnitudes). It is a bound for the difference of two correct evaluations, far above what they
// usually differ by; a wrong formula differs by far more.
func Chain(stages, k int, u float64) float64 {
	return 2 * float64(stages) * Gamma(k, u) * math.Sqrt(float64(k))
}
