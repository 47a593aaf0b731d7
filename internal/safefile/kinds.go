package safefile

import "fmt"

// Kind is what a file this program reads is. Its row of the table below says how much of it may be
// read and how: read whole up to a byte limit, streamed line by line under a per-line limit (text
// corpora, which can be gigabytes), or mapped (weights and store columns, which are never read into
// the heap; the limit only refuses a size no real file has). Every reader names a kind, so a new
// reader cannot forget the limit and a limit is changed in one place.
type Kind uint8

// The kinds, in the order of the table.
const (
	_ Kind = iota
	// Config is a YAML run or sweep config named on the command line (-config, base_config). It may
	// be a pipe or character device as well as a file (a config given as <(...)): the read is
	// bounded, and a FIFO without a writer reads as empty.
	Config
	// RunRecord is a run directory's own small record read back: a cell's config.yaml, report.json.
	RunRecord
	// Identity is a run directory's identity.json.
	Identity
	// SweepState is a sweep directory's plan (sweep.json) or a cell's error.txt.
	SweepState
	// Metrics is a run's metrics.jsonl, read whole on resume.
	Metrics
	// Pointer is a run directory's "latest" checkpoint pointer.
	Pointer
	// StoreMeta is a store's meta.json.
	StoreMeta
	// StoreColumns is a store's tokens.arrow or texts.arrow (mapped).
	StoreColumns
	// Weights is a safetensors file: a model's weights, a shard, a checkpoint (mapped).
	Weights
	// ShardIndex is a model.safetensors.index.json.
	ShardIndex
	// ModelConfig is a model directory's config.json, or a -like file imitating one.
	ModelConfig
	// TokenizerJSON is a Hugging Face tokenizer.json.
	TokenizerJSON
	// TokenizerConfig is the tokenizer_config.json beside a tokenizer.json.
	TokenizerConfig
	// Texts is a file of texts (-texts, lm.texts, a corpus's line files): one text per line or a
	// JSON object per line, streamed.
	Texts
	// CorpusFile is one file of a fetched corpus read whole: a fortune cookie file, a State of the
	// Union address.
	CorpusFile
	// Provenance is what a fetched directory says it holds: SOURCES.txt, an npm package.json.
	Provenance
	// DeployerInfo is a deployer's rows description (deployer.json).
	DeployerInfo
	// Candidates is a file of candidate values for content recovery (-set file:PATH), one a line.
	Candidates
	// PTX is a CUDA kernel module read from GELOATTACK_CUDA_PTX.
	PTX
	// BenchRecord is the JSON-lines record a benchmark twin writes for the benchmark to read.
	BenchRecord
	// Kernel is a file the kernel generates under /proc or /sys (meminfo, a cgroup limit, the
	// process status), which reports size 0 and is read whole.
	Kernel
	// NPZ is one text's rows in the reference .npz layout (store import, a deployer's rows),
	// opened and read through its zip directory.
	NPZ

	numKinds
)

// How a kind is read.
const (
	whole  = iota // read into memory, at most max bytes
	lines         // streamed line by line, no line longer than line bytes
	mapped        // memory-mapped; max only refuses an impossible size
)

// kindSpec is one row of the table.
type kindSpec struct {
	name   string // what the file is, in errors
	how    int    // whole, lines or mapped
	max    int64  // bytes, for whole and mapped kinds
	line   int    // bytes of the longest line, for lines kinds
	stream bool   // a pipe or character device is accepted besides a regular file
}

// table is every kind's limit. The numbers are generous for real files (the note on each row says
// how large real ones are) and far below what would exhaust memory or disk.
var table = [numKinds]kindSpec{
	// A real config is a few KB.
	Config: {name: "config file", how: whole, max: 4 << 20, stream: true},
	// A few KB each.
	RunRecord: {name: "run record", how: whole, max: 4 << 20},
	// A few hundred bytes per parameter tensor.
	Identity: {name: "identity.json", how: whole, max: 16 << 20},
	// A line per cell; error.txt is one message.
	SweepState: {name: "sweep state file", how: whole, max: 64 << 20},
	// A line per log step: a few hundred MB for millions of steps.
	Metrics: {name: "metrics.jsonl", how: whole, max: 1 << 30},
	// A checkpoint file name.
	Pointer: {name: "checkpoint pointer", how: whole, max: 256},
	// Well under a kilobyte.
	StoreMeta: {name: "meta.json", how: whole, max: 1 << 20},
	// Hundreds of GB for a large real store.
	StoreColumns: {name: "store column file", how: mapped, max: 1 << 44},
	// A 405B model's shards are about 5 GB each; a single-file 70B model 140 GB.
	Weights: {name: "safetensors file", how: mapped, max: 1 << 44},
	// A few hundred KB for a 405B model.
	ShardIndex: {name: "model.safetensors.index.json", how: whole, max: 64 << 20},
	// A few KB (classification heads' label maps make some larger).
	ModelConfig: {name: "config.json", how: whole, max: 4 << 20},
	// Llama-3's is 9 MB, Qwen's 11 MB, Gemma's 33 MB.
	TokenizerJSON: {name: "tokenizer.json", how: whole, max: 64 << 20},
	// Up to a few MB with chat templates and added_tokens_decoder.
	TokenizerConfig: {name: "tokenizer_config.json", how: whole, max: 16 << 20},
	// Corpora can be gigabytes, so they are streamed; a text is a sentence to a document chunk, and
	// no tokenizer or model of this tool reads a megabyte of one.
	Texts: {name: "texts file", how: lines, line: 1 << 20},
	// Fortune files are under 1 MB, an address under 200 KB.
	CorpusFile: {name: "corpus file", how: whole, max: 64 << 20},
	// A few KB.
	Provenance: {name: "provenance file", how: whole, max: 1 << 20},
	// About a kilobyte.
	DeployerInfo: {name: "deployer.json", how: whole, max: 1 << 20},
	// A name, a number or a short phrase per line.
	Candidates: {name: "candidates file", how: lines, line: 64 << 10},
	// A few MB.
	PTX: {name: "PTX module", how: whole, max: 64 << 20},
	// A JSON object per step.
	BenchRecord: {name: "benchmark record", how: lines, line: 1 << 20},
	// A few KB.
	Kernel: {name: "kernel status file", how: whole, max: 1 << 20},
	// A text's rows: 4,096 tokens of width 8,192 in float32 are 128 MB; opened, not read whole.
	NPZ: {name: ".npz rows file", how: mapped, max: 1 << 40},
}

func (k Kind) spec() kindSpec {
	if k == 0 || k >= numKinds {
		panic(fmt.Sprintf("safefile: unknown kind %d", k))
	}
	return table[k]
}

// String names the kind as errors do ("tokenizer.json", "texts file").
func (k Kind) String() string {
	if k == 0 || k >= numKinds {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return table[k].name
}

// Limit is the most bytes a file of kind k may hold: for a streamed kind, the longest line.
func (k Kind) Limit() int64 {
	s := k.spec()
	if s.how == lines {
		return int64(s.line)
	}
	return s.max
}

// Streamed reports whether files of kind k are read line by line (Lines) rather than whole.
func (k Kind) Streamed() bool { return k.spec().how == lines }
