package cuda

import (
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/internal/numfmt"
)

// roundObserveKernel is mix.cu's entry point; mix.ptx is built on a GPU machine (no nvcc
// elsewhere) and committed, and a backend whose PTX lacks it rounds U on the host instead.
const roundObserveKernel = "ga_round_observe"

// MixRows is engine.Mixer: U = A X as one strided-batched cuBLAS GEMM in fp32 (CUBLAS_COMPUTE_32F,
// fp32 operands) whatever the backend's precision, since U is the model's input data, which a
// tf32 or bf16 run must see as the host would form it; then rounded to round in place.
// a: (batch, n, k), x: (batch, k, d), u: (batch, n, d).
func (b *Backend) MixRows(u, a, x *engine.Tensor, batch, n, k, d int, round engine.MixRound) {
	if !b.begin() {
		return
	}
	defer b.end()
	b.wrote(u)
	b.gemmStridedIn(PrecisionFP32, cublasCompute32F, false, false, batch, n, d, k, 1, ptr(a), n*k, ptr(x), k*d, 0, ptr(u), n*d)
	if round == engine.MixRoundNone {
		return
	}
	size := batch * n * d
	if _, ok := b.dev.funcs[roundObserveKernel]; ok {
		b.launch(roundObserveKernel, gridFor(size), blk, ptr(u), int32(round), int64(size))
		return
	}
	// No mix.ptx loaded: round on the host, as the sampler does (a download and an upload of U).
	host := make([]float32, size)
	b.fail(b.dev.Download(host, ptr(u)))
	if round == engine.MixRoundBF16 {
		numfmt.RoundBF16s(host)
	} else {
		numfmt.RoundF16s(host)
	}
	b.fail(b.dev.Upload(ptr(u), host))
}

// RoundsObserveOnDevice reports whether the loaded PTX holds mix.cu's rounding kernel (without it
// MixRows rounds bf16 and fp16 observations on the host).
func (b *Backend) RoundsObserveOnDevice() bool {
	_, ok := b.dev.funcs[roundObserveKernel]
	return ok
}
