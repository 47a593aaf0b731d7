package cuda

import "github.com/gelo-research/geloattack/engine"

// kernelTable is the backend's fused kernels (fused_*.go, launching the CUDA
// C of kernels/) under the names the engine's ops look them up by
// (engine.Backend.Kernel): a new op adds its line here and its entry points
// to requiredKernels (or, for the language model's kernels of lm.cu, to
// optionalKernels: NewBackend drops those whose PTX is not loaded).
func (b *Backend) kernelTable() map[string]any {
	return map[string]any{
		engine.KernelRMSNorm:      engine.RMSNormKernels{Forward: b.rmsNorm, Backward: b.rmsNormBackward},
		engine.KernelAttention:    engine.AttentionKernels{Forward: b.attention, Backward: b.attentionBackward},
		engine.KernelSwiGLU:       engine.SwiGLUKernels{Forward: b.swiGLU, Backward: b.swiGLUBackward},
		engine.KernelScaleRows:    engine.ScaleRowsKernel(b.scaleRows),
		engine.KernelMeanPool:     engine.MeanPoolKernels{Forward: b.meanPool, Backward: b.meanPoolBackward},
		engine.KernelL2Normalize:  engine.L2NormalizeKernels{Forward: b.l2Normalize, Backward: b.l2NormalizeBackward},
		engine.KernelRowReduce:    engine.RowReduceKernels{Forward: b.rowReduce, Backward: b.rowReduceBackward},
		engine.KernelInfoNCE:      engine.InfoNCEKernels{Forward: b.infoNCE, Backward: b.infoNCEBackward},
		engine.KernelBroadcastAdd: engine.BroadcastAddKernels{Forward: b.broadcastAdd, Backward: b.broadcastAddBackward},
		engine.KernelPrependRow:   engine.PrependRowKernel(b.prependRow),

		engine.KernelRoPE:            engine.RoPEKernels{Forward: b.rope, Backward: b.ropeBackward},
		engine.KernelCausalAttention: engine.CausalAttentionKernels{Forward: b.causalAttention, Backward: b.causalAttentionBackward},
		engine.KernelEmbedding:       engine.EmbeddingKernels{Forward: b.embedding, Backward: b.embeddingBackward},
		engine.KernelCrossEntropy:    engine.CrossEntropyKernels{Forward: b.crossEntropy, Backward: b.crossEntropyBackward},
		engine.KernelSpanAttention:   engine.SpanAttentionKernel(b.spanAttention),
	}
}

// Kernel is the fused kernel registered under name, nil if none
// (engine.Backend).
func (b *Backend) Kernel(name string) any { return b.kernels[name] }
