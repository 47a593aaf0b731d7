package hf

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gelo-research/geloattack/models/llama"
)

// InitOptions configures Init.
type InitOptions struct {
	Like                  string // preset name or config.json path
	Layers, Hidden, Vocab int    // cuts; 0 keeps the original
	Seed                  uint64
	DType                 string // F32, F16 or BF16 (default BF16)
	Out                   string // directory to write; it must not hold a model already
	// Tokenizer, when not empty, is a tokenizer.json copied into Out, with tokenizer_config.json
	// from the same directory when present.
	Tokenizer string
}

// Init writes a random-init Hugging Face directory, the model llama.Random draws (the standard
// deviation is the config's initializer_range, 0.02 when absent), and returns its config.
func Init(opt InitOptions) (llama.Config, error) {
	if err := RefuseModel(opt.Out); err != nil {
		return llama.Config{}, err
	}
	base, err := LikeConfig(opt.Like)
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
	if v, ok := cfgMap["initializer_range"].(float64); ok && v > 0 {
		std = v
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	dtype := opt.DType
	if dtype == "" {
		dtype = BF16
	}
	// torch_dtype says what the file holds, not what the imitated model shipped in.
	cfgMap["torch_dtype"] = map[string]string{BF16: "bfloat16", F16: "float16", F32: "float32"}[dtype]
	// Tensors are drawn one at a time into one buffer, in llama.Random's order, so a full-size
	// preset needs memory for its largest tensor (the embedding), not for the model.
	sp := specs(cfg)
	largest := 0
	for _, s := range sp {
		largest = max(largest, product(s.shape))
	}
	buf := make([]float32, largest)
	stream := llama.NewInitStream(opt.Seed, std)
	err = save(opt.Out, cfgMap, cfg, dtype, func(i int) []float32 {
		x := buf[:product(sp[i].shape)]
		if sp[i].gain {
			stream.Gain(x)
		} else {
			stream.Normal(x)
		}
		return x
	})
	if err != nil {
		return cfg, err
	}
	if opt.Tokenizer != "" {
		if err := CopyTokenizer(opt.Tokenizer, opt.Out); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// RefuseModel fails when dir already holds a model's config or weights: writers of model
// directories never overwrite one.
func RefuseModel(dir string) error {
	for _, f := range []string{ConfigFile, WeightsFile, IndexFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("%s already holds %s: not overwriting a model", dir, f)
		}
	}
	return nil
}

// CopyTokenizer copies a tokenizer.json into the model directory dir, with the
// tokenizer_config.json beside it when there is one.
func CopyTokenizer(tokenizerJSON, dir string) error {
	if err := copyFile(tokenizerJSON, filepath.Join(dir, "tokenizer.json")); err != nil {
		return err
	}
	tc := filepath.Join(filepath.Dir(tokenizerJSON), "tokenizer_config.json")
	if _, err := os.Stat(tc); err == nil {
		return copyFile(tc, filepath.Join(dir, "tokenizer_config.json"))
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

func product(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
