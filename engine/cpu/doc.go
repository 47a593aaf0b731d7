// Package cpu is the engine's CPU backend: Go kernels parallel over rows on
// a fixed pool of worker goroutines, GEMMs through engine/blas (OpenBLAS
// loaded at run time, else gonum) called single-threaded from the workers,
// and an AVX2/FMA exponential for softmax and SiLU on amd64. Results are
// bit-reproducible run to run and on any number of workers: kernels cut
// their work into chunks (workpool.ChunkSize) and GEMMs into tiles
// (gemmTiles) by shape alone, and reductions add their partial sums in a
// fixed order whatever the scheduling.
//
// Backend implements engine.Backend through the exported view of
// engine.Tensor only (Storage, Offset, Size, Dim, Rows, Cols), like
// engine/cuda; model code never names it, and commands open it through
// engine/device ("cpu", or "auto" without a GPU). Close stops the workers.
package cpu

import "github.com/gelo-research/geloattack/engine"

// Backend must stay an engine.Backend (report misuse after Close as an
// engine.Errer, count its GEMM FLOPs as an engine.FLOPCounter); the compiler
// checks it here.
var (
	_ engine.Backend     = (*Backend)(nil)
	_ engine.Errer       = (*Backend)(nil)
	_ engine.FLOPCounter = (*Backend)(nil)
)
