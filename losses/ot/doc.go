// Package ot holds the unmixing losses of SPEC §5 on the engine tape: log-domain Sinkhorn OT
// between predicted and clean rows (balanced, dustbin and unbalanced variants, gradients through
// the unrolled iterations), the cycle loss ||A_hat H_hat - U_obs||^2 / ||U_obs||^2, the mixing
// and row-norm regularisers, and Unmix, their weighted sum. SinkhornHost is a float64 reference.
//
// Every loss takes padded batches with per-example real-row counts: padded rows carry no mass
// and receive exactly zero gradient, so a batch's losses equal those of its unpadded examples.
package ot
