package engine

// KernelEmbedding names Embedding's fused kernels, an EmbeddingKernels.
const KernelEmbedding = "embedding"

// EmbeddingKernels are Embedding's fused kernels. Token ids travel as a
// float32 tensor (exact below maxTokenID), so that every backend's kernels
// read them from their own memory like any other input.
type EmbeddingKernels struct {
	// Forward: table: (V, d), ids: (T) -> y: (T, d), y[t] = table[ids[t]].
	Forward func(y, table, ids *Tensor)
	// Backward accumulates dtable[ids[t]] += dy[t] for every t (a
	// scatter-add: a repeated id receives the sum of its rows' gradients).
	Backward func(dtable, dy, ids *Tensor)
}

// maxTokenID bounds a vocabulary: ids are carried as float32, which holds
// every integer below 2^24 exactly.
const maxTokenID = 1 << 24

// Embedding looks up one row of table per token id: table: (V, d), ids:
// T values in [0, V) -> (T, d). Saves the ids (as a (T) tensor); the backward
// scatter-adds the rows' gradients into the table's.
func (tp *Tape) Embedding(table *Tensor, ids []int32) *Tensor {
	if !tp.usable("Embedding", table) {
		return tp.placeholder()
	}
	if table.ndim != 2 {
		return tp.failf("Embedding", "table %v: want (V, d)", table)
	}
	idt := tp.tokenIDs("Embedding", ids, table.shape[0])
	if tp.err != nil {
		return tp.placeholder()
	}
	k, ok := kernel[EmbeddingKernels](tp, KernelEmbedding)
	if !ok {
		return tp.placeholder()
	}
	y, ok := tp.alloc("embedding", len(ids), table.shape[1])
	if !ok {
		return y
	}
	k.Forward(y, table, idt)
	return tp.record(node{op: embeddingOp{}, out: y, in: [4]*Tensor{table}, saved: idt})
}

// embeddingOp is Embedding's node: in = table; saved = ids (T).
type embeddingOp struct{}

func (embeddingOp) backward(tp *Tape, n *node) {
	k, ok := kernel[EmbeddingKernels](tp, KernelEmbedding)
	if !ok {
		return
	}
	if dt := tp.accumGrad(n.in[0]); dt != nil {
		k.Backward(dt, n.out.grad, n.saved)
	}
}

// tokenIDs checks that ids is non-empty with every id in [0, vocab) and
// uploads them as a (T) float32 tensor; an error is recorded on the tape,
// naming op and the first bad id.
func (tp *Tape) tokenIDs(op string, ids []int32, vocab int) *Tensor {
	if len(ids) == 0 {
		return tp.failf(op, "no token ids")
	}
	if vocab > maxTokenID {
		return tp.failf(op, "vocabulary of %d: ids above %d are not exact in float32", vocab, maxTokenID)
	}
	host := make([]float32, len(ids))
	for t, id := range ids {
		if id < 0 || int(id) >= vocab {
			return tp.failf(op, "token %d: id %d outside [0, %d)", t, id, vocab)
		}
		host[t] = float32(id)
	}
	return tp.Input(host, len(ids))
}
