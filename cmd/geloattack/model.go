package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gelo-research/geloattack/data/extract"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/gelo-research/geloattack/runner"
)

var cmdModel = &Command{
	Name:     "model",
	Short:    "decoder models: init (a random-init Hugging Face directory like llama2-7b, ...), export (a trained task-lm run)",
	Long:     "Decoder models in Hugging Face's directory layout (docs/decoders.md): random-init ones for tests and\nbenchmarks, and the decoder geloattack trains itself (docs/language-model.md), until a user brings real weights.",
	Commands: []*Command{cmdModelInit, cmdModelExport},
}

var cmdModelInit = &Command{
	Name:      "init",
	UsageLine: "-like PRESET|CONFIG -out DIR [-layers N] [-hidden H] [-vocab V] [-seed S] [-dtype bf16|f16|f32] [-tokenizer FILE]",
	Short:     "write a random-init Hugging Face decoder directory with a real architecture's config",
	Long: "Writes a random-init Hugging Face directory (config.json + model.safetensors) with the public config of\n" +
		"a Llama-family model, optionally cut in depth, width and vocabulary. Seeded and deterministic.",
	Flags: modelInitFlags,
}

var cmdModelExport = &Command{
	Name:      "export",
	UsageLine: "-run DIR -out DIR [-dtype f32|bf16|f16]",
	Short:     "write a trained language model (a task-lm run) as a Hugging Face decoder directory",
	Long: "Writes the newest good checkpoint of a `geloattack train` run of task lm (configs/lm/) as a Hugging Face\n" +
		"directory: config.json (LlamaForCausalLM, tied embeddings), model.safetensors, the run's tokenizer.json\n" +
		"and tokenizer_config.json, and geloattack-run.json (run, checkpoint, step, config). `store extract\n" +
		"-model`, `decode -model` and bench/torch_llama.py read it. The directory must be new or empty; it appears\n" +
		"whole or not at all.",
	Flags: modelExportFlags,
}

// modelExportFlags defines the flags of `geloattack model export` and returns what runs it.
func modelExportFlags(fs *flag.FlagSet) runFunc {
	var (
		run   = fs.String("run", "", "run directory of a task-lm training run (required)")
		out   = fs.String("out", "", "directory to write (required; new or empty: it appears whole or not at all)")
		dtype = fs.String("dtype", "f32", "tensor type in model.safetensors: f32, bf16 or f16")
	)
	return func(ctx context.Context, _ []string) error {
		if *run == "" || *out == "" {
			return errors.New("model export: -run and -out are required (see -h)")
		}
		dt := map[string]string{"bf16": hf.BF16, "f16": hf.F16, "f32": hf.F32}[*dtype]
		if dt == "" {
			return fmt.Errorf("model export: -dtype %q: want f32, bf16 or f16", *dtype)
		}
		ex, err := runner.ExportLM(*run, *out, dt)
		if err != nil {
			return fmt.Errorf("model export: %w", err)
		}
		c := ex.Config
		fmt.Fprintf(os.Stderr, "model export: wrote %s from %s (step %d): %d layers, d %d, %d heads, vocab %d, %.3g parameters (%s)\n",
			*out, ex.Checkpoint, ex.Step, c.Layers, c.Hidden, c.Heads, c.VocabSize, float64(c.Params()), dt)
		return nil
	}
}

// modelInitFlags defines the flags of `geloattack model init` and returns what runs it.
func modelInitFlags(fs *flag.FlagSet) runFunc {
	var (
		like   = fs.String("like", "", "preset ("+strings.Join(hf.Presets(), ", ")+") or a config.json to imitate (required)")
		layers = intFlag(fs, "layers", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 10, Zero: "the original"}, "num_hidden_layers")
		hidden = intFlag(fs, "hidden", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 16, Zero: "the original"}, "hidden_size; heads follow from head_dim, intermediate_size scales with it")
		vocab  = intFlag(fs, "vocab", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 22, Zero: "the original"}, "vocab_size; must cover the tokenizer's ids to extract with it")
		seed   = fs.Uint64("seed", 1, "seed of the weights")
		dtype  = fs.String("dtype", "bf16", "tensor type in model.safetensors: bf16, f16 or f32")
		out    = fs.String("out", "", "directory to write (required; new or empty: it appears whole or not at all)")
		tok    = fs.String("tokenizer", "", "tokenizer.json to copy in (with tokenizer_config.json beside it, when present)")
	)
	return func(ctx context.Context, _ []string) error {
		if *like == "" || *out == "" {
			return errors.New("model init: -like and -out are required (see -h)")
		}
		dt := map[string]string{"bf16": hf.BF16, "f16": hf.F16, "f32": hf.F32}[*dtype]
		if dt == "" {
			return fmt.Errorf("model init: -dtype %q: want bf16, f16 or f32", *dtype)
		}
		var files safefile.Files // -like and -tokenizer are inputs: no write may replace one
		cfg, err := hf.Init(hf.InitOptions{Like: *like, Layers: *layers, Hidden: *hidden, Vocab: *vocab, Seed: *seed, DType: dt, Out: *out,
			Tokenizer: *tok, Files: &files})
		if err != nil {
			return fmt.Errorf("model init: %w", err)
		}
		fmt.Fprintf(os.Stderr, "model init: wrote %s: %s, %d layers, d %d, %d/%d heads of %d, vocab %d, %.3g parameters (%s)\n",
			*out, cfg.Architecture, cfg.Layers, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.VocabSize, float64(cfg.Params()), dt)
		return nil
	}
}

// openDecoderTokenizer reads the decoder directory's tokenizer.json (data/bpe) through the door.
func openDecoderTokenizer(dir string) (extract.Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("decoder tokenizer: %w (give model init -tokenizer, or copy the model's tokenizer.json in)", err)
	}
	return runner.LoadTokenizer(nil, path)
}

// decoderExtract is what `store extract` parsed, for a decoder model directory.
type decoderExtract struct {
	modelDir, texts, out, dtype, norm, point, dedup, modelName string
	corpora                                                    []string
	layer, maxTexts, maxTokens, batch, workers                 int
	dropSpecial                                                bool
	progress                                                   io.Writer
}

// runDecoderExtract is `store extract` on a decoder directory; openTok opens its tokenizer. The
// store is built beside a.out and renamed into place at the end (safefile.BeginDir), so a failure
// or an interrupt leaves no half-written store that a rerun would refuse.
func runDecoderExtract(ctx context.Context, a decoderExtract, openTok func(dir string) (extract.Tokenizer, error)) error {
	point := map[string]llama.Point{"residual": llama.Residual, "attn-input": llama.AttnInput}
	p, ok := point[a.point]
	if !ok {
		return fmt.Errorf("-point %q: want residual or attn-input", a.point)
	}
	if a.dedup != "" && a.dedup != "exact" && a.dedup != "none" {
		return fmt.Errorf("-dedup %q: want exact or none", a.dedup)
	}
	tx, err := safefile.BeginDir(a.out)
	if err != nil {
		return err
	}
	defer tx.Abort() // nothing once committed
	m, err := hf.Load(a.modelDir, nil)
	if err != nil {
		return err
	}
	top := m.Cfg.Layers
	if p == llama.AttnInput {
		top--
	}
	if a.layer > top {
		return fmt.Errorf("-layer %d: %s rows exist for layers 0..%d", a.layer, a.point, top)
	}
	tok, err := openTok(a.modelDir)
	if err != nil {
		return err
	}
	src, err := extract.ReadSource(a.texts, a.corpora)
	if err != nil {
		return err
	}
	if len(src.Texts) == 0 {
		return fmt.Errorf("-texts %s: no texts", a.texts)
	}
	truncate := a.maxTokens
	if truncate == 0 {
		// The full context of a 128k model would size the workspace for 128k-token batches.
		truncate = min(512, m.Cfg.MaxLen())
	}
	name := a.modelName
	if name == "" {
		name = decoderModelName(a.modelDir)
	}
	special := store.SpecialKept
	if a.dropSpecial {
		special = store.SpecialDropped
	}
	w, err := store.Create(tx.Path(), store.Meta{
		Model: name, Layer: a.layer, D: m.Cfg.Hidden, E: m.Cfg.Hidden, DType: a.dtype, Norm: a.norm,
		Source: src.Desc, LayerMeaning: decoderLayerMeaning(p, a.layer, m.Cfg.Layers), SpecialTokens: special, MaxTokens: truncate,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "extract: %s (%s), %s layer %d of %d, %d texts, BLAS %s\n",
		name, m.Cfg.Architecture, a.point, a.layer, m.Cfg.Layers, len(src.Texts), m.Lib().Name())
	st, err := extract.RunDecoder(ctx, m, tok, src.Texts, extract.DecoderOptions{
		Layer: a.layer, Point: p, MaxTexts: a.maxTexts, MaxTokens: truncate, BatchTokens: a.batch, Workers: a.workers,
		DropBOS: a.dropSpecial, Norm: a.norm, Dedup: a.dedup == "exact", Float16: a.dtype == store.Float16, Progress: a.progress,
	}, w)
	if err != nil {
		w.Abort()
		return err
	}
	dedup := "none"
	if a.dedup == "exact" {
		dedup = "exact"
	}
	w.SetDecoder(store.DecoderMeta{
		Family: hf.Family(m.Cfg.Architecture), Architecture: m.Cfg.Architecture, Point: a.point, BOS: st.BOS,
		TokenizerHash: tok.Hash(), Dedup: dedup, DuplicateRows: st.DuplicateRows, DroppedTexts: st.DroppedTexts,
		Embedding: extract.DecoderEmbedding,
	})
	if err := w.Close(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "extract: wrote %s: %d texts, %d rows stored (%d tokens through the model, %d texts truncated",
		a.out, st.Texts-st.DroppedTexts, st.StoredRows, st.Tokens, st.Truncated)
	if dedup == "exact" {
		fmt.Fprintf(os.Stderr, "; dedup exact dropped %d duplicate rows of %d (%.1f%%) and %d texts left without rows",
			st.DuplicateRows, st.Tokens, 100*float64(st.DuplicateRows)/float64(max(st.Tokens, 1)), st.DroppedTexts)
	}
	fmt.Fprintf(os.Stderr, ") in %s: %.0f tokens/s\n", st.Elapsed.Round(1e7), st.TokensPerSecond())
	return nil
}

// decoderModelName is config.json's _name_or_path, else the directory name.
func decoderModelName(dir string) string {
	if raw, err := safefile.Read(filepath.Join(dir, hf.ConfigFile), safefile.ModelConfig); err == nil {
		var c struct {
			Name string `json:"_name_or_path"`
		}
		if json.Unmarshal(raw, &c) == nil && c.Name != "" {
			return c.Name
		}
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return filepath.Base(abs)
	}
	return dir
}

// decoderLayerMeaning says in words what a decoder store's rows are, for meta.json.
func decoderLayerMeaning(p llama.Point, layer, layers int) string {
	switch {
	case p == llama.AttnInput:
		return fmt.Sprintf("attn-input of block %d of %d: RMSNorm(h)·g of the block's input (input_layernorm output, the rows q/k/v read)", layer, layers)
	case layer == layers:
		return fmt.Sprintf("residual %d of %d: the final RMSNorm's output (Hugging Face's hidden_states[%d])", layer, layers, layer)
	}
	return fmt.Sprintf("residual %d of %d: input of block %d (Hugging Face's hidden_states[%d]; 0 = token embedding)", layer, layers, layer, layer)
}

// flagWasSet reports whether name was given on the command line.
func flagWasSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
