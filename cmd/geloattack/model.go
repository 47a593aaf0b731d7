package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gelo-research/geloattack/data/bpe"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/causallm"
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
		for _, n := range ex.Notes {
			fmt.Fprintf(os.Stderr, "model export: note: %s\n", n)
		}
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
			Tokenizer: *tok, Files: &files, Check: func(p hf.InitPlan) error { return initPreflight(p, *out, *tok != "") }})
		if err != nil {
			return fmt.Errorf("model init: %w", err)
		}
		fmt.Fprintf(os.Stderr, "model init: wrote %s: %s, %d layers, d %d, %d/%d heads of %d, vocab %d, %.3g parameters (%s)\n",
			*out, cfg.Architecture, cfg.Layers, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.VocabSize, float64(cfg.Params()), dt)
		return nil
	}
}

// initPreflight is model init's resource pre-flight: the drawing buffer (the largest tensor in
// float32) and the tokenizer against the host memory, model.safetensors against the free disk.
func initPreflight(p hf.InitPlan, out string, withTokenizer bool) error {
	b := runner.Budget{What: "-out " + out, Disk: p.File, DiskPath: filepath.Dir(p.Dir), Reduce: "-layers, -hidden or -vocab"}
	b.Add(runner.Part{Name: "drawing buffer (the largest tensor, float32)", Bytes: p.Buffer})
	if withTokenizer {
		b.Add(runner.TokenizerPart(p.Config.VocabSize))
	}
	return preflight("model init", b)
}

// preflight checks a decoder command's budget, printing its warning (GELOATTACK_SKIP_PREFLIGHT,
// or memory unknown) on stderr.
func preflight(cmd string, b runner.Budget) error {
	warn, err := b.Check()
	if warn != "" {
		fmt.Fprintf(os.Stderr, "%s: %s\n", cmd, warn)
	}
	return err
}

// openDecoderTokenizer reads the decoder directory's tokenizer.json (data/bpe) through the door,
// for a model of vocab ids: an id at or past vocab is refused before any table is sized by it.
func openDecoderTokenizer(dir string, vocab int) (extraction.Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("decoder tokenizer: %w (give model init -tokenizer, or copy the model's tokenizer.json in)", err)
	}
	j, c, err := hf.ReadTokenizer(nil, path)
	if err != nil {
		return nil, err
	}
	tok, err := bpe.ParseFor(j, c, path, vocab)
	if err != nil {
		return nil, err
	}
	return tok, nil
}

// decoderExtract is what `store extract` parsed, for a decoder model directory.
type decoderExtract struct {
	modelDir, texts, out, dtype, norm, point, dedup, modelName string
	device                                                     string   // -device: where the decoder runs
	precision                                                  string   // -precision: the GEMMs' on a GPU (empty: fp32)
	embedding                                                  string   // -embedding: final or stored (empty: final)
	open                                                       openFunc // opens the backend (nil: engine/device.Open; tests pass fakes)
	corpora                                                    []string
	layer, maxTexts, maxTokens, batch, workers                 int
	dropSpecial, replaceUTF8                                   bool
	progress                                                   io.Writer
}

// runDecoderExtract is `store extract` on a decoder directory; openTok opens its tokenizer. The
// store is built beside a.out and renamed into place at the end (safefile.BeginDir), so a failure
// or an interrupt leaves no half-written store that a rerun would refuse.
func runDecoderExtract(ctx context.Context, a decoderExtract, openTok func(dir string, vocab int) (extraction.Tokenizer, error)) error {
	point := map[string]llama.Point{"residual": llama.Residual, "attn-input": llama.AttnInput}
	p, ok := point[a.point]
	if !ok {
		return fmt.Errorf("-point %q: want residual or attn-input", a.point)
	}
	if a.dedup != "" && a.dedup != "exact" && a.dedup != "none" {
		return fmt.Errorf("-dedup %q: want exact or none", a.dedup)
	}
	if a.norm != "" && a.norm != extraction.NormRaw && a.norm != extraction.NormRMS {
		return fmt.Errorf("-norm %q: want %s or %s", a.norm, extraction.NormRaw, extraction.NormRMS)
	}
	if a.device == "" {
		a.device = device.Auto
	}
	if err := checkDecoderDevice(a.device); err != nil {
		return err
	}
	prec, err := extractPrecision(a.precision)
	if err != nil {
		return err
	}
	if spec, _ := device.ParseSpec(a.device); spec.Kind == device.CPU && prec != store.PrecisionFP32 {
		return fmt.Errorf("-precision %s with -device cpu: the CPU computes its GEMMs in fp32 only; give -device cuda on a machine with a GPU, or -precision fp32", prec)
	}
	if a.open == nil {
		a.open = device.Open
	}
	if a.embedding == "" {
		a.embedding = store.EmbeddingFinal
	}
	embDesc, err := extraction.DecoderEmbeddingOf(a.embedding)
	if err != nil {
		return fmt.Errorf("-embedding: %w", err)
	}
	tx, err := safefile.BeginDir(a.out)
	if err != nil {
		return err
	}
	defer tx.Abort() // nothing once committed
	// What config.json, the flags, the weight files' headers, the tokenizer and the texts can
	// refuse is refused before the weights are read: the model alone against the memory first
	// (from config.json and the headers only), then the directory, then everything.
	cfg, err := hf.LoadConfig(a.modelDir)
	if err != nil {
		return err
	}
	top := cfg.Layers
	if p == llama.AttnInput {
		top--
	}
	if a.layer > top {
		return fmt.Errorf("-layer %d: %s rows exist for layers 0..%d", a.layer, a.point, top)
	}
	blocks := extraction.DecoderBlocks(p, a.layer, cfg.Layers, a.embedding)
	if a.maxTokens > cfg.MaxLen() {
		return fmt.Errorf("-max-tokens %d: the model reads at most %d tokens (max_position_embeddings or sliding_window)", a.maxTokens, cfg.MaxLen())
	}
	truncate := a.maxTokens
	if truncate == 0 {
		// The full context of a 128k model would size the workspace for 128k-token batches.
		truncate = min(512, cfg.MaxLen())
	}
	if _, err := extractBudget(a, cfg, blocks, 0, nil, truncate).Check(); err != nil {
		return err
	}
	if _, err := hf.Check(a.modelDir); err != nil {
		return err
	}
	tok, err := openTok(a.modelDir, cfg.VocabSize)
	if err != nil {
		return err
	}
	src, err := corpus.ReadSourceWith(a.texts, corpus.SourceOptions{Corpora: a.corpora, ReplaceInvalidUTF8: a.replaceUTF8})
	if err != nil {
		return utf8Hint(err)
	}
	if len(src.Texts) == 0 {
		return fmt.Errorf("-texts %s: no texts", a.texts)
	}
	if err := preflight("extract", extractBudget(a, cfg, blocks, tok.VocabSize(), src, truncate)); err != nil {
		return err
	}
	// The device before the weights: a GPU that cannot run the decoder is refused (or, for auto,
	// left for the CPU) before the long load.
	runtime.LockOSThread() // a CUDA context is current per OS thread: keep the decoder's calls on one
	defer runtime.UnlockOSThread()
	be, err := openExtractDeviceWith(a.device, prec, func(line string) { fmt.Fprintln(os.Stderr, "extract: "+line) }, a.open)
	if err != nil {
		return err
	}
	defer device.Close(be)
	// Every block for the final norm's embedding; with -embedding stored, those up to the layer.
	m, err := hf.LoadWith(a.modelDir, hf.LoadOptions{Blocks: blocks})
	if err != nil {
		return err
	}
	defer m.Close()
	name := a.modelName
	if name == "" {
		name = hf.ModelName(nil, a.modelDir)
	}
	special := store.SpecialKept
	if a.dropSpecial {
		special = store.SpecialDropped
	}
	recPrec, recEmb := prec, a.embedding // the defaults are left out of meta.json: its bytes stay those of older stores
	if recPrec == store.PrecisionFP32 {
		recPrec = ""
	}
	if recEmb == store.EmbeddingFinal {
		recEmb = ""
	}
	w, err := store.Create(tx.Path(), store.Meta{
		Model: name, Layer: a.layer, D: m.Cfg.Hidden, E: m.Cfg.Hidden, DType: a.dtype, Norm: a.norm,
		Source: src.Desc, LayerMeaning: decoderLayerMeaning(p, a.layer, m.Cfg.Layers), SpecialTokens: special, MaxTokens: truncate,
		ComputePrecision: recPrec,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "extract: %s (%s), %s layer %d of %d, %d texts, on %s, %s GEMMs; candidate embedding %s: blocks 0..%d run\n",
		name, m.Cfg.Architecture, a.point, a.layer, m.Cfg.Layers, len(src.Texts), be.Name(), prec, a.embedding, blocks-1)
	st, err := extraction.RunDecoder(ctx, m, tok, src.Texts, extraction.DecoderOptions{
		Layer: a.layer, Point: p, MaxTexts: a.maxTexts, MaxTokens: truncate, BatchTokens: a.batch, Workers: a.workers,
		DropBOS: a.dropSpecial, Norm: a.norm, Dedup: a.dedup == "exact", Float16: a.dtype == store.Float16, Progress: a.progress,
		Backend: be, Embedding: a.embedding,
	}, w)
	if err != nil {
		w.Abort()
		return err
	}
	if st.Texts == st.DroppedTexts {
		w.Abort()
		return fmt.Errorf("-texts %s: every one of the %d texts lost its rows (-dedup exact, -drop-special): the store would hold no texts", a.texts, st.Texts)
	}
	dedup := "none"
	if a.dedup == "exact" {
		dedup = "exact"
	}
	w.SetDecoder(store.DecoderMeta{
		Family: hf.Family(m.Cfg.Architecture), Architecture: m.Cfg.Architecture, Point: a.point, BOS: st.BOS,
		TokenizerHash: tok.Hash(), Dedup: dedup, DuplicateRows: st.DuplicateRows, DroppedTexts: st.DroppedTexts,
		Embedding: embDesc, CandidateEmbedding: recEmb,
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
	fmt.Fprintf(os.Stderr, ") in %s: %.0f tokens/s", st.Elapsed.Round(1e7), st.TokensPerSecond())
	if peak, ok := device.PeakBytes(be); ok {
		fmt.Fprintf(os.Stderr, "; peak device memory %.2f GiB", float64(peak)/(1<<30))
	}
	fmt.Fprintln(os.Stderr)
	return nil
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

// extractBudget is the resource pre-flight of `store extract` on a decoder: the weights as
// stored of blocks 0..blocks-1 (extraction.DecoderBlocks: every block for the final norm's
// candidate embedding) and their conversion scratch, from the weight files' headers, the tokenizer, the texts, their token
// ids (at most a token per byte, BOS and the -max-tokens cut), the forward pass's workspace for
// -batch tokens, the batch's chosen and pooled rows, and -dedup exact's prefix trie. Before the
// tokenizer and the texts are read (src nil), it is the model's parts alone.
func extractBudget(a decoderExtract, cfg llama.Config, blocks, vocab int, src *corpus.Source, truncate int) runner.Budget {
	n, textBytes := 0, int64(0)
	if src != nil {
		n, textBytes = len(src.Texts), src.Bytes()
	}
	if a.maxTexts > 0 {
		n = min(n, a.maxTexts)
	}
	tokens := min(textBytes+2*int64(n), int64(n)*int64(truncate))
	batch := max(a.batch, truncate)
	if a.batch == 0 {
		batch = max(2048, truncate)
	}
	workers := a.workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	b := runner.Budget{What: "store extract -model " + a.modelDir,
		Reduce: "-max-texts, -max-tokens, -batch or -workers, or use a smaller model"}
	b.Add(runner.StoredWeights(a.modelDir, cfg, blocks)...)
	if src != nil {
		b.Add(runner.TokenizerPart(vocab), runner.TextsPart(len(src.Texts), textBytes))
	}
	b.Add(runner.Part{Name: fmt.Sprintf("token ids (at most %d)", tokens), Bytes: 4 * tokens},
		runner.Part{Name: fmt.Sprintf("workspace (%d tokens a batch, %d workers)", batch, workers),
			Bytes: causallm.WorkspaceBytes(cfg, batch, truncate, workers) + 8*int64(batch)*int64(cfg.Hidden)})
	if a.dedup == "exact" {
		b.Add(runner.Part{Name: "dedup prefix trie", Bytes: 32 * tokens})
	}
	return b
}

// utf8Hint adds to a refusal of invalid UTF-8 how to read the file anyway.
func utf8Hint(err error) error {
	if errors.Is(err, corpus.ErrInvalidUTF8) {
		return fmt.Errorf("%w (convert the file to UTF-8, or give -invalid-utf8 replace to replace each invalid sequence with U+FFFD and count them)", err)
	}
	return err
}

// invalidUTF8Flag defines -invalid-utf8 on fs: what a command does with texts that are not valid
// UTF-8. It reports whether they are to be replaced.
func invalidUTF8Flag(fs *flag.FlagSet) func() (bool, error) {
	v := fs.String("invalid-utf8", "refuse", "texts that are not valid UTF-8: refuse (naming file, line and byte offset) or replace (each invalid sequence by U+FFFD, counted and recorded)")
	return func() (bool, error) {
		switch *v {
		case "refuse":
			return false, nil
		case "replace":
			return true, nil
		}
		return false, fmt.Errorf("-invalid-utf8 %q: want refuse or replace", *v)
	}
}
