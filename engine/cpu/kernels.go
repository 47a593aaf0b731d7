package cpu

import "github.com/gelo-research/geloattack/engine"

// kernelTable is the CPU's fused kernels under the names the engine's ops
// look them up by (engine.Backend.Kernel): a new op adds its line here.
func (c *Backend) kernelTable() map[string]any {
	return map[string]any{
		engine.KernelRMSNorm:      engine.RMSNormKernels{Forward: c.rmsNorm, Backward: c.rmsNormBackward},
		engine.KernelAttention:    engine.AttentionKernels{Forward: c.attention, Backward: c.attentionBackward},
		engine.KernelSwiGLU:       engine.SwiGLUKernels{Forward: c.swiGLU, Backward: c.swiGLUBackward},
		engine.KernelScaleRows:    engine.ScaleRowsKernel(c.scaleRows),
		engine.KernelMeanPool:     engine.MeanPoolKernels{Forward: c.meanPool, Backward: c.meanPoolBackward},
		engine.KernelL2Normalize:  engine.L2NormalizeKernels{Forward: c.l2Normalize, Backward: c.l2NormalizeBackward},
		engine.KernelRowReduce:    engine.RowReduceKernels{Forward: c.rowReduce, Backward: c.rowReduceBackward},
		engine.KernelInfoNCE:      engine.InfoNCEKernels{Forward: c.infoNCE, Backward: c.infoNCEBackward},
		engine.KernelBroadcastAdd: engine.BroadcastAddKernels{Forward: c.broadcastAdd, Backward: c.broadcastAddBackward},
		engine.KernelPrependRow:   engine.PrependRowKernel(c.prependRow),

		// The language model's ops (engine/cuda registers them too, from lm.ptx): rotary
		// embeddings, causal attention, the embedding lookup and the chunked vocabulary cross-entropy.
		engine.KernelRoPE:            engine.RoPEKernels{Forward: c.rope, Backward: c.ropeBackward},
		engine.KernelCausalAttention: engine.CausalAttentionKernels{Forward: c.causalAttention, Backward: c.causalAttentionBackward},
		engine.KernelEmbedding:       engine.EmbeddingKernels{Forward: c.embedding, Backward: c.embeddingBackward},
		engine.KernelCrossEntropy:    engine.CrossEntropyKernels{Forward: c.crossEntropy, Backward: c.crossEntropyBackward},
		engine.KernelSpanAttention:   engine.SpanAttentionKernel(c.spanAttention),
	}
}

// Kernel is the fused kernel registered under name, nil if none
// (engine.Backend).
func (c *Backend) Kernel(name string) any { return c.kernels[name] }
