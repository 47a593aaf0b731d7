// Package overhead measures what GELO costs the party that runs it: the compute-side overhead of
// one GELO-protected linear layer against the plain one (docs/paper.md, "The protocol itself").
//
// The plain layer is the GEMM H W, H: (n, d) the hidden states, W: (d, p) the weight. The
// protected layer is, per call:
//
//	A generation   a fresh secret A: (n, n), Haar-orthogonal (A^-1 = A^T), or with cond(A) = kappa
//	               together with A^-1 (the trusted side needs both)
//	mix            U = A H                 (n, n) x (n, d)
//	GEMM           Y = U W                 (n, d) x (d, p), the offloaded product
//	unmix          A^-1 Y = H W            (n, n) x (n, p)
//
// Run times each part at every n, Repeats times, and reports medians with their spread, the GELO
// total (the sum of the parts' medians), the baseline (the GEMM H W) and the overhead
// (total - baseline) / baseline in percent, beside the paper's figures (Result.Markdown, CSV,
// Plot). On the CPU the GEMMs run in float32 through engine/blas, the SGEMM the engine uses, and
// A is drawn in float64 (engine/blas.QR: LAPACK when OpenBLAS exports it) then rounded to float32,
// as data/gelo's sampler does. There is no host-device transfer on the CPU, so the copy part is 0;
// the paper's figures include a copy of about 14 ms (two GPUs) that dominates them. With a
// Config.Backend (a GPU) the GEMMs run on it through engine.Backend, A is still drawn on the
// host, and the copy part is the upload of A (and A^-1): the one transfer GELO adds to the
// baseline's.
package overhead
