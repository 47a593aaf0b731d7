package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/synth"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/termtext"
)

var cmdStore = &Command{
	Name:  "store",
	Short: "stores of hidden states: synth | import | info | validate | extract",
	Long: "A store is a directory of hidden states (SPEC §2): tokens.arrow (one row per token), texts.arrow\n" +
		"(one embedding per text) and meta.json (model, layer, widths, dtype, checksums).",
	Commands: []*Command{cmdStoreSynth, cmdStoreImport, cmdStoreExtract, cmdStoreInfo, cmdStoreValidate},
}

// synthFlags registers the flags that describe a synthetic corpus.
func synthFlags(fs *flag.FlagSet) *synth.Config {
	cfg := synth.DefaultConfig()
	intVar(fs, &cfg.Texts, "texts", cfg.Texts, synth.Rules.Bounds("texts"), "number of texts")
	intVar(fs, &cfg.MinTokens, "min-tokens", cfg.MinTokens, synth.Rules.Bounds("min_tokens"), "fewest rows (tokens) per text, BOS included")
	intVar(fs, &cfg.MaxTokens, "max-tokens", cfg.MaxTokens, synth.Rules.Bounds("max_tokens"), "most rows (tokens) per text")
	intVar(fs, &cfg.D, "d", cfg.D, synth.Rules.Bounds("d"), "hidden-state width (row length)")
	intVar(fs, &cfg.E, "e", cfg.E, synth.Rules.Bounds("e"), "width of the text-level candidate embedding")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed choosing the texts")
	fs.Uint64Var(&cfg.ModelSeed, "model-seed", cfg.ModelSeed, "seed choosing the fixed synthetic model (profile, outliers, vocabulary, embedding map)")
	fs.StringVar(&cfg.DType, "dtype", cfg.DType, "row element type: float16 or float32")
	floatVar(fs, &cfg.PR, "pr", 0, synth.Rules.Bounds("pr"), "participation ratio of the rows")
	return &cfg
}

var cmdStoreSynth = &Command{
	Name:      "synth",
	UsageLine: "-out DIR [flags]",
	Short:     "write the synthetic store (LLM-like statistics; the embedded default's generator)",
	Long: "Write the synthetic corpus (the embedded default of geloattack) as a store:\n" +
		"LLM-like rows (norm about 24, strongly anisotropic, a few outlier features, frozen BOS and\n" +
		"frequent-token rows) and text embeddings from a fixed non-linear map of each text's rows.",
	Flags: storeSynthFlags,
}

func storeSynthFlags(fs *flag.FlagSet) runFunc {
	out := fs.String("out", "", "directory of the new store (required; must not hold a store)")
	cfg := synthFlags(fs)
	return func(ctx context.Context, args []string) error {
		if *out == "" {
			return errors.New("store synth: -out is required")
		}
		start := time.Now()
		if err := synth.WriteStore(ctx, *cfg, *out); err != nil {
			return err
		}
		size, err := storeSize(*out)
		if err != nil {
			return err
		}
		fmt.Printf("wrote %s: %s, in %.2fs\n", *out, size, time.Since(start).Seconds())
		return nil
	}
}

var cmdStoreImport = &Command{
	Name:      "import",
	UsageLine: "-in DIR -out DIR [flags]",
	Short:     "import one .npz of hidden states per text (Llama-class models)",
	Long: "Import a directory of reference-layout .npz files (one per text: token_ids int32[seq],\n" +
		"attention_mask int8[seq], embeddings float16[seq x d], optional embeddings_rms and\n" +
		"text_embedding) into a store, losslessly. Rows with attention_mask 0 are dropped; the text\n" +
		"embedding defaults to the L2-normalised mean of the kept rows (e = d).",
	Flags: storeImportFlags,
}

func storeImportFlags(fs *flag.FlagSet) runFunc {
	in := fs.String("in", "", "directory of .npz files (required)")
	out := fs.String("out", "", "directory of the new store (required)")
	var opts store.ImportOptions
	fs.StringVar(&opts.Norm, "norm", store.NormRaw, "hidden states to import: raw (embeddings) or rms (embeddings_rms)")
	fs.StringVar(&opts.IDs, "ids", store.IDsAuto, "text ids: auto (numbers in file names if unique, else sorted order), name, or sorted")
	fs.StringVar(&opts.Model, "model", "", "model name to record in meta.json")
	intVar(fs, &opts.Layer, "layer", 0, field.Bounds{Int: true, Min: 0, Max: 1 << 10}, "layer index to record in meta.json")
	return func(ctx context.Context, args []string) error {
		if *in == "" || *out == "" {
			return errors.New("store import: -in and -out are required")
		}
		p := newProgress(os.Stderr, "import", "files")
		opts.Progress = func(done, total int) { p.update(int64(done), int64(total)) }
		opts.Warn = func(msg string) { p.println(msg) }
		err := store.ImportNPZ(ctx, *in, *out, opts)
		p.finish()
		if err != nil {
			return err
		}
		size, err := storeSize(*out)
		if err != nil {
			return err
		}
		fmt.Printf("imported %s into %s: %s\n", *in, *out, size)
		return nil
	}
}

var cmdStoreInfo = &Command{
	Name:      "info",
	UsageLine: "-store DIR | -synth [flags]",
	Short:     "print a store's metadata and row statistics",
	Long: "Describe a store (-store DIR) or the embedded synthetic corpus (-synth, with the synth flags):\n" +
		"sizes, train/val split, and row statistics (norm mean and CV, participation ratio of the\n" +
		"row covariance, duplicate rows) estimated on a seeded sample of rows.",
	Flags: storeInfoFlags,
}

func storeInfoFlags(fs *flag.FlagSet) runFunc {
	dir := fs.String("store", "", "store directory")
	useSynth := fs.Bool("synth", false, "describe the synthetic corpus given by the synth flags instead of a store")
	sample := intFlag(fs, "sample", 2048, field.Bounds{Int: true, Min: 2, Max: 1 << 20}, "rows sampled for the statistics (cost grows as min(sample, d)^2 * max(sample, d))")
	valFrac := fs.Float64("val-frac", 0.1, "fraction of texts in the val split (stable hash of text_id)")
	seed := fs.Uint64("sample-seed", 0, "seed of the row sample")
	format := fs.String("format", "text", "output: text, markdown or json")
	cfg := synthFlags(fs)
	return func(ctx context.Context, args []string) error {
		if (*dir == "") == !*useSynth {
			return errors.New("store info: give exactly one of -store DIR and -synth")
		}
		var c data.Corpus
		if *useSynth {
			mc, err := synth.Generate(*cfg)
			if err != nil {
				return err
			}
			c = mc
		} else {
			s, err := store.Open(*dir)
			if err != nil {
				return err
			}
			defer s.Close()
			for _, n := range s.Notes() {
				fmt.Fprintln(os.Stderr, "note:", termtext.Escape(n))
			}
			c = s
		}
		info, err := store.ComputeInfo(ctx, c, *sample, *valFrac, *seed)
		if err != nil {
			return err
		}
		if *useSynth {
			info.DType = cfg.DType
		}
		switch *format {
		case "text":
			if *useSynth {
				fmt.Printf("%-22s %s\n", "source", cfg.String())
			}
			fmt.Print(termtext.Escape(info.String()))
		case "markdown":
			fmt.Print(termtext.Escape(info.Markdown()))
		case "json":
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(info)
		default:
			return fmt.Errorf("store info: -format %q: want text, markdown or json", *format)
		}
		return nil
	}
}

var cmdStoreValidate = &Command{
	Name:      "validate",
	UsageLine: "-store DIR",
	Short:     "check every offset, width, checksum and value (NaN/Inf) of a store",
	Long: "Check a store completely: everything opening checks (schemas against meta.json, row\n" +
		"counts, tokens grouped by text in position order, every text_id known), then a full scan\n" +
		"for NaN/Inf embeddings, negative token ids and invalid UTF-8, and every CRC-32C checksum that\n" +
		"meta.json records (per record batch and per file frame; older stores have none and get a note).\n" +
		"Progress goes to stderr.",
	Flags: storeValidateFlags,
}

func storeValidateFlags(fs *flag.FlagSet) runFunc {
	dir := fs.String("store", "", "store directory (required)")
	return func(ctx context.Context, args []string) error {
		if *dir == "" {
			return errors.New("store validate: -store is required")
		}
		p := newProgress(os.Stderr, "validate", "rows")
		notes, err := store.ValidateNotes(ctx, *dir, p.update)
		p.finish()
		if err != nil {
			return err
		}
		size, err := storeSize(*dir)
		if err != nil {
			return err
		}
		fmt.Printf("store %s: valid (%s)\n", *dir, size)
		for _, n := range notes {
			fmt.Println("note:", termtext.Escape(n))
		}
		return nil
	}
}

// progress prints a throttled one-line counter to a terminal-like writer.
type progress struct {
	w          io.Writer
	what, unit string
	last       time.Time
	printed    bool
}

func newProgress(w io.Writer, what, unit string) *progress {
	return &progress{w: w, what: what, unit: unit}
}

func (p *progress) update(done, total int64) {
	if now := time.Now(); done < total && now.Sub(p.last) < 200*time.Millisecond {
		return
	} else {
		p.last = now
	}
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	fmt.Fprintf(p.w, "\r%s: %5.1f%% (%d/%d %s)", p.what, pct, done, total, p.unit)
	p.printed = true
}

func (p *progress) println(msg string) {
	if p.printed {
		fmt.Fprintln(p.w)
		p.printed = false
	}
	fmt.Fprintln(p.w, msg)
}

func (p *progress) finish() {
	if p.printed {
		fmt.Fprintln(p.w)
		p.printed = false
	}
}

// storeSize opens the store at dir, which checks it once more after it was written or scanned, and
// describes its size: "N texts, M tokens, d=.. e=.. dtype (norm)".
func storeSize(dir string) (string, error) {
	s, err := store.Open(dir)
	if err != nil {
		return "", err
	}
	defer s.Close()
	m := s.Meta()
	return termtext.Escape(fmt.Sprintf("%d texts, %d tokens, d=%d e=%d %s (%s)", m.NumTexts, m.NumTokens, m.D, m.E, m.DType, m.Norm)), nil
}
