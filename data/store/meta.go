package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// FormatVersion is the version of the store layout this package writes and reads. Checksums and
// the id hash in meta.json are optional fields of it rather than a new version: stores written
// before them still open (with a note), and a bit flip in a field's name cannot make a store pass
// for one without them, because meta.json is decoded with unknown fields rejected.
const FormatVersion = 1

// File names inside a store directory.
const (
	TokensFile = "tokens.arrow"
	TextsFile  = "texts.arrow"
	MetaFile   = "meta.json"
)

// Element types of the token embedding column.
const (
	Float16 = "float16"
	Float32 = "float32"
)

// Normalisations of the stored hidden states.
const (
	NormRaw = "raw"
	NormRMS = "rms"
)

// Meta is the content of meta.json. Callers of Create fill the descriptive fields; the writer fills
// FormatVersion, ToolVersion and the counts at Close.
type Meta struct {
	FormatVersion int    `json:"format_version"`
	Model         string `json:"model"`
	Layer         int    `json:"layer"`
	D             int    `json:"d"`
	E             int    `json:"e"`
	DType         string `json:"dtype"`
	Norm          string `json:"norm"`
	Source        string `json:"source"`
	ToolVersion   string `json:"tool_version"`
	NumTexts      int64  `json:"num_texts"`
	NumTokens     int64  `json:"num_tokens"`
	// Checksums are the CRC-32C checksums of the Arrow files (see checksum.go), filled by the
	// writer at Close; nil in stores written before checksums existed.
	Checksums *Checksums `json:"checksums,omitempty"`
	// IDHash is a SHA-256 over the text ids, their n_tokens and the checksums (idhash.go), filled
	// by the writer at Close; empty in stores written before it. It needs Checksums.
	IDHash string `json:"id_hash,omitempty"`
	// LayerMeaning says what Layer counts, e.g. "output of block 3 of 6 (0 = embedding output)":
	// layer numbers differ between tools (Hugging Face's hidden_states[0] is the embedding output).
	// Empty: not recorded (older stores, imports without it).
	LayerMeaning string `json:"layer_meaning,omitempty"`
	// SpecialTokens says whether the rows of special tokens ([CLS], [SEP], BOS) are stored:
	// SpecialKept or SpecialDropped; empty: not recorded. It matters to attacks that score rows:
	// a BERT's [CLS] rows at an early layer are nearly identical across texts.
	SpecialTokens string `json:"special_tokens,omitempty"`
	// MaxTokens is the length each text was truncated to before the model ran, special tokens
	// included; 0: not recorded or not truncated.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Decoder describes how a decoder LLM's rows were extracted; nil for encoder stores and imports.
	Decoder *DecoderMeta `json:"decoder,omitempty"`
	// ComputePrecision is the GEMM precision the rows were computed in (PrecisionFP32, TF32 or
	// BF16: `store extract -precision` on a GPU); empty: fp32 (every store written before the
	// field, and every fp32 store: the default leaves the bytes of meta.json unchanged). A store
	// of tf32 or bf16 rows is a deployer of that precision to every proof that compares them
	// with recomputed rows (RecomputePrecision).
	ComputePrecision string `json:"compute_precision,omitempty"`
}

// DecoderMeta is what a decoder store's rows are (see docs/decoders.md).
type DecoderMeta struct {
	// Family is llama, mistral, qwen2 or qwen3; Architecture the config.json class name.
	Family       string `json:"family"`
	Architecture string `json:"architecture"`
	// Point is "residual" (Hugging Face's hidden_states[layer]) or "attn-input" (RMSNorm(h)·g of
	// block layer, the rows the q/k/v projections read).
	Point string `json:"point"`
	// BOS is "kept", "dropped" or "none" (the tokenizer adds no BOS).
	BOS string `json:"bos"`
	// TokenizerHash identifies the tokenizer that made the token ids.
	TokenizerHash string `json:"tokenizer_hash"`
	// Dedup is "none" or "exact"; with "exact", DuplicateRows rows bit-identical (as stored) to an
	// earlier row were dropped, and DroppedTexts texts whose every row was a duplicate.
	Dedup         string `json:"dedup"`
	DuplicateRows int64  `json:"duplicate_rows"`
	DroppedTexts  int64  `json:"dropped_texts"`
	// Embedding says how each text's candidate embedding was made.
	Embedding string `json:"embedding"`
	// CandidateEmbedding names the rows the candidate embedding pools: EmbeddingFinal (the
	// final norm's) or EmbeddingStored (the stored layer's own); empty: final (every store
	// written before the field, and the default, whose meta.json bytes stay unchanged).
	CandidateEmbedding string `json:"candidate_embedding,omitempty"`
}

// Values of Meta.SpecialTokens.
const (
	SpecialKept    = "kept"
	SpecialDropped = "dropped"
)

// maxWidth bounds d and e so that a row's byte size and the arithmetic on it cannot overflow.
const maxWidth = 1 << 20

// checkShape validates the fields a writer needs before any data exists.
func (m Meta) checkShape() error {
	if m.D <= 0 || m.D > maxWidth {
		return fmt.Errorf("d = %d: want 1..%d", m.D, maxWidth)
	}
	if m.E <= 0 || m.E > maxWidth {
		return fmt.Errorf("e = %d: want 1..%d", m.E, maxWidth)
	}
	if m.DType != Float16 && m.DType != Float32 {
		return fmt.Errorf("dtype = %q: want %q or %q", m.DType, Float16, Float32)
	}
	if m.Norm != NormRaw && m.Norm != NormRMS {
		return fmt.Errorf("norm = %q: want %q or %q", m.Norm, NormRaw, NormRMS)
	}
	if m.SpecialTokens != "" && m.SpecialTokens != SpecialKept && m.SpecialTokens != SpecialDropped {
		return fmt.Errorf("special_tokens = %q: want %q, %q or absent", m.SpecialTokens, SpecialKept, SpecialDropped)
	}
	if m.MaxTokens < 0 || m.MaxTokens > 1<<24 {
		return fmt.Errorf("max_tokens = %d: want 0 (not recorded) or a length up to %d", m.MaxTokens, 1<<24)
	}
	return m.checkComputation()
}

// check validates a meta.json read from disk.
func (m Meta) check() error {
	if m.FormatVersion != FormatVersion {
		return fmt.Errorf("format_version = %d: this tool reads version %d", m.FormatVersion, FormatVersion)
	}
	if err := m.checkShape(); err != nil {
		return err
	}
	if m.NumTexts < 0 || m.NumTokens < 0 {
		return fmt.Errorf("num_texts = %d, num_tokens = %d: counts must not be negative", m.NumTexts, m.NumTokens)
	}
	if m.IDHash != "" {
		if m.Checksums == nil {
			return fmt.Errorf("id_hash without checksums: the hash covers the checksums, and a writer that records it records them")
		}
		if !isIDHash(m.IDHash) {
			return fmt.Errorf("id_hash %q is not 64 lowercase hex digits", m.IDHash)
		}
	}
	if m.Checksums != nil {
		if err := m.Checksums.Tokens.checkLayout(TokensFile, "num_tokens", m.NumTokens); err != nil {
			return err
		}
		if err := m.Checksums.Texts.checkLayout(TextsFile, "num_texts", m.NumTexts); err != nil {
			return err
		}
	}
	return nil
}

// elemSize is the byte width of one embedding value.
func (m Meta) elemSize() int {
	if m.DType == Float16 {
		return 2
	}
	return 4
}

// readMeta reads and checks dir/meta.json. Unknown fields are rejected so that a typo in a
// hand-edited file does not silently fall back to a default.
func readMeta(dir string) (Meta, error) {
	path := filepath.Join(dir, MetaFile)
	// Bounded, and refused before any read when not a regular file: a FIFO would block the
	// open, /dev/zero would be read until memory runs out.
	raw, err := safefile.Read(path, safefile.StoreMeta)
	if err != nil {
		if os.IsNotExist(err) {
			return Meta{}, fmt.Errorf("%s missing: incomplete store (the writer writes it last) or not a store", MetaFile)
		}
		return Meta{}, err
	}
	var m Meta
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Meta{}, fmt.Errorf("%s: %w", MetaFile, err)
	}
	if err := m.check(); err != nil {
		return Meta{}, fmt.Errorf("%s: %w", MetaFile, err)
	}
	if m.NumTexts == 0 {
		return Meta{}, fmt.Errorf("%s: num_texts = 0: %w (nothing to sample, train on or attack; build it again from a source with texts)", MetaFile, ErrEmpty)
	}
	return m, nil
}

// ErrEmpty is wrapped by the refusal to open (or validate) a store of no texts.
var ErrEmpty = errors.New("the store holds no texts")

// toolVersion names the build that wrote a store: the main module's version when built from a
// tagged module, "devel" otherwise.
func toolVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return "geloattack " + bi.Main.Version
	}
	return "geloattack devel"
}
