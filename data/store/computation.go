package store

import "fmt"

// GEMM precisions of Meta.ComputePrecision (engine/device's names).
const (
	PrecisionFP32 = "fp32"
	PrecisionTF32 = "tf32"
	PrecisionBF16 = "bf16"
)

// Candidate embeddings of DecoderMeta.CandidateEmbedding.
const (
	// EmbeddingFinal pools the final norm's rows (hidden_states[num_layers]): every block runs.
	EmbeddingFinal = "final"
	// EmbeddingStored pools the stored layer's rows: only the blocks up to that layer run.
	EmbeddingStored = "stored"
)

// RowPrecision is the GEMM precision the store's rows were computed in: ComputePrecision, or
// fp32 when it is not recorded.
func (m Meta) RowPrecision() string {
	if m.ComputePrecision == "" {
		return PrecisionFP32
	}
	return m.ComputePrecision
}

// RecomputePrecision is the deployer precision (fptol.Recompute's fp32, bf16 or fp16) whose
// recomputation bound covers the store's rows against an fp32 recomputation of them: fp32 for
// fp32 rows, bf16 for bf16 GEMMs, and fp16 for tf32 GEMMs. tf32 keeps 10 mantissa bits as fp16
// does (unit round-off 2^-11) and rounds only the GEMM inputs, fewer roundings per block than the
// fp16 deployer the bound assumes, so fp16's bound covers it.
func (m Meta) RecomputePrecision() string {
	switch m.RowPrecision() {
	case PrecisionTF32:
		return "fp16"
	case PrecisionBF16:
		return "bf16"
	}
	return "fp32"
}

// CandidateEmbeddingKind is the rows the decoder store's candidate embedding pools:
// DecoderMeta.CandidateEmbedding, EmbeddingFinal when it is not recorded, "" for a store
// without a decoder section.
func (m Meta) CandidateEmbeddingKind() string {
	switch {
	case m.Decoder == nil:
		return ""
	case m.Decoder.CandidateEmbedding == "":
		return EmbeddingFinal
	}
	return m.Decoder.CandidateEmbedding
}

// CheckComputePrecision refuses a compute_precision this tool does not know (Open refuses such a
// store; a consumer handed a Meta from elsewhere asks here rather than reading it as fp32).
func (m Meta) CheckComputePrecision() error {
	switch m.ComputePrecision {
	case "", PrecisionFP32, PrecisionTF32, PrecisionBF16:
		return nil
	}
	return fmt.Errorf("compute_precision = %q: want %q, %q, %q or absent (fp32)", m.ComputePrecision, PrecisionFP32, PrecisionTF32, PrecisionBF16)
}

// checkComputation refuses a compute_precision or candidate_embedding this tool does not know.
func (m Meta) checkComputation() error {
	if err := m.CheckComputePrecision(); err != nil {
		return err
	}
	if m.Decoder == nil {
		return nil
	}
	switch m.Decoder.CandidateEmbedding {
	case "", EmbeddingFinal, EmbeddingStored:
	default:
		return fmt.Errorf("decoder.candidate_embedding = %q: want %q, %q or absent (final)", m.Decoder.CandidateEmbedding, EmbeddingFinal, EmbeddingStored)
	}
	return nil
}
