package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/gelo-research/geloattack/data/bpe"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/llama"
)

// InitOptions configures Init.
type InitOptions struct {
	Like                  string // preset name or config.json path
	Layers, Hidden, Vocab int    // cuts; 0 keeps the original
	Seed                  uint64
	DType                 string // F32, F16 or BF16 (default BF16)
	// Out is the directory to write: a new one, or an empty one. It is built beside its final
	// name and renamed into place at the end, so a failure leaves nothing.
	Out string
	// Tokenizer, when not empty, is a tokenizer.json copied into Out, with tokenizer_config.json
	// from the same directory when present.
	Tokenizer string
	// Files is the door the files are read and written through; nil: one that remembers no
	// inputs (see safefile.Files).
	Files *safefile.Files
	// Check, when not nil, is called with the plan once the config is resolved and every input
	// read and checked, before any tensor is drawn or written: the caller's resource pre-flight
	// (runner.Budget). An error stops Init, leaving nothing.
	Check func(InitPlan) error
}

// InitPlan is what Init is about to do, for a resource pre-flight.
type InitPlan struct {
	// Config is the model's architecture.
	Config llama.Config
	// Buffer is the host memory of the tensors' drawing buffer: the largest tensor in float32.
	Buffer int64
	// File is the size model.safetensors will have, written under Dir.
	File int64
	Dir  string
}

// Init writes a random-init Hugging Face directory, the model llama.Random draws (the standard
// deviation is the config's initializer_range, 0.02 when absent), and returns its config. Every
// input (the -like file, the tokenizer) is read and checked before anything is written, and the
// directory appears whole or not at all.
func Init(opt InitOptions) (llama.Config, error) {
	files := opt.Files
	// The output first: a mistyped or occupied -out is refused before any work.
	tx, err := files.BeginDir(opt.Out)
	if err != nil {
		return llama.Config{}, err
	}
	defer tx.Abort() // nothing once committed
	base, err := likeConfig(files, opt.Like)
	if err != nil {
		return llama.Config{}, err
	}
	cfgMap, err := Cut(base, opt.Layers, opt.Hidden, opt.Vocab)
	if err != nil {
		return llama.Config{}, err
	}
	raw, _ := json.Marshal(cfgMap)
	cfg, err := ParseConfig(raw)
	if err != nil {
		return cfg, err
	}
	std := 0.02
	if v, ok := configFloat(cfgMap["initializer_range"]); ok && v > 0 {
		std = v
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	var tok *tokenizerFiles
	if opt.Tokenizer != "" {
		if tok, err = readTokenizer(files, opt.Tokenizer); err != nil {
			return cfg, err
		}
		if err := tok.fits(opt.Tokenizer, cfg.VocabSize); err != nil {
			return cfg, err
		}
	}
	dtype := opt.DType
	if dtype == "" {
		dtype = BF16
	}
	sp := specs(cfg, cfg.Layers)
	largest := 0
	for _, s := range sp {
		largest = max(largest, s.Elems())
	}
	if opt.Check != nil {
		plan := InitPlan{Config: cfg, Buffer: 4 * int64(largest), File: cfg.Params() * dtypeSize(dtype), Dir: tx.Path()}
		if err := opt.Check(plan); err != nil {
			return cfg, err
		}
	}
	// torch_dtype says what the file holds, not what the imitated model shipped in.
	cfgMap["torch_dtype"] = map[string]string{BF16: "bfloat16", F16: "float16", F32: "float32"}[dtype]
	// Tensors are drawn one at a time into one buffer, in llama.Random's order, so a full-size
	// preset needs memory for its largest tensor (the embedding), not for the model.
	buf := make([]float32, largest)
	stream := llama.NewInitStream(opt.Seed, std)
	err = save(files, tx.Path(), cfgMap, cfg, dtype, func(i int) ([]float32, error) {
		x := buf[:sp[i].Elems()]
		if sp[i].Part.Gain() {
			stream.Gain(x)
		} else {
			stream.Normal(x)
		}
		return x, nil
	})
	if err != nil {
		return cfg, err
	}
	if tok != nil {
		if err := tok.write(files, tx.Path()); err != nil {
			return cfg, err
		}
	}
	return cfg, tx.Commit()
}

// tokenizerFiles are a tokenizer.json and the tokenizer_config.json beside it, read.
type tokenizerFiles struct {
	json, config []byte // config nil when there is none
}

// tokenizerConfigFile is the file beside tokenizer.json that Hugging Face loaders read with it.
const tokenizerConfigFile = "tokenizer_config.json"

// ReadTokenizer reads tokenizerJSON and the tokenizer_config.json beside it (config nil when
// there is none) through files, under their kinds' limits: a FIFO, a device or a huge file is
// refused at once, naming it. data/bpe's Parse builds the tokenizer from them.
func ReadTokenizer(files *safefile.Files, tokenizerJSON string) (json, config []byte, err error) {
	t, err := readTokenizer(files, tokenizerJSON)
	if err != nil {
		return nil, nil, err
	}
	return t.json, t.config, nil
}

// readTokenizer is ReadTokenizer keeping the two files together for write.
func readTokenizer(files *safefile.Files, tokenizerJSON string) (*tokenizerFiles, error) {
	j, err := files.Read(tokenizerJSON, safefile.TokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t := &tokenizerFiles{json: j}
	tc := filepath.Join(filepath.Dir(tokenizerJSON), tokenizerConfigFile)
	c, err := files.Read(tc, safefile.TokenizerConfig)
	switch {
	case err == nil:
		t.config = c
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

// fits refuses a tokenizer that data/bpe cannot read or whose ids do not fit a vocabulary of
// vocabSize (model init -vocab cut below them, or a tokenizer of another model): the embedding
// would have no row for its largest ids. data/bpe bounds the ids before sizing any table.
func (t *tokenizerFiles) fits(path string, vocabSize int) error {
	tk, err := bpe.Parse(t.json, t.config, path)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if n := tk.VocabSize(); n > vocabSize {
		return fmt.Errorf("tokenizer %s has ids 0..%d but vocab_size is %d (-vocab, or the -like config's): the embedding would have no row for ids %d..%d; give -vocab %d or more",
			path, n-1, vocabSize, vocabSize, n-1, n)
	}
	return nil
}

// write writes the tokenizer's files into dir.
func (t *tokenizerFiles) write(files *safefile.Files, dir string) error {
	if err := files.WriteFileAtomic(filepath.Join(dir, "tokenizer.json"), t.json); err != nil {
		return err
	}
	if t.config != nil {
		return files.WriteFileAtomic(filepath.Join(dir, tokenizerConfigFile), t.config)
	}
	return nil
}

// CopyTokenizer copies a tokenizer.json into the model directory dir, with the
// tokenizer_config.json beside it when there is one, reading and writing through files (see
// readTokenizer; the writes are atomic and refuse to replace an input of files).
func CopyTokenizer(files *safefile.Files, tokenizerJSON, dir string) error {
	t, err := readTokenizer(files, tokenizerJSON)
	if err != nil {
		return err
	}
	return t.write(files, dir)
}

// dtypeSize is the bytes of one element of a tensor type of this package.
func dtypeSize(dtype string) int64 {
	if dtype == F32 {
		return 4
	}
	return 2
}
