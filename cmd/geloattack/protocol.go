package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/protocol/equality"
	"github.com/gelo-research/geloattack/protocol/overhead"
)

var cmdProtocol = &Command{
	Name:  "protocol",
	Short: "the GELO protocol itself: overhead benchmark (bench) and functional equality (equality)",
	Long: "The GELO protocol itself, the paper's Tables 1-3 on your hardware and model: what it costs and\n" +
		"whether it changes the model's outputs (docs/protocol.md has our tables beside the paper's).",
	Commands: []*Command{cmdProtocolBench, cmdProtocolEquality},
}

var cmdProtocolBench = &Command{
	Name:  "bench",
	Short: "time A generation, mix, offloaded GEMM and unmix against the plain GEMM, for n = 64 ... 8192",
	Long: "Times one GELO-protected linear layer against the plain one, for each n: generating A (Haar QR;\n" +
		"or non-orthogonal with cond(A) = kappa, its inverse included), the mix U = A H (n x n by n x d), the\n" +
		"offloaded GEMM Y = U W (n x d by d x p), the unmix A^-1 Y, and the baseline H W. Medians over repeats,\n" +
		"with min and max. Prints the paper's layout (n, overhead %, GELO total, baseline) beside the paper's\n" +
		"Llama-2 figures, the breakdown at one n, and writes a plot of overhead against n with -out. On the\n" +
		"CPU there is no host-device copy (the paper's ~14 ms copy dominates its totals); on a GPU (-device)\n" +
		"the uploads and downloads are timed as the copy.",
	Flags: protocolBenchFlags,
}

var cmdProtocolEquality = &Command{
	Name:  "equality",
	Short: "run a real encoder with GELO on its Q, K, V and O projections and compare it with the plain forward",
	Long: "Runs the BERT forward of store extract (all-MiniLM-L6-v2 by default) over real texts twice: plain,\n" +
		"and with GELO applied to the query, key, value and output projections of the chosen layers. Each\n" +
		"projection call draws a fresh A (Haar-orthogonal, or non-orthogonal with cond(A) = kappa) and optional\n" +
		"shield rows, the accelerator stores U = A[X; S] and Y = U W in the chosen precision (fp32, bf16 or\n" +
		"fp16), and the trusted side unmixes, drops the shields' rows and adds the bias. Reports the error of\n" +
		"the final hidden states and sentence embeddings and how often each text's nearest neighbour is\n" +
		"unchanged (this model has no LM head: the analogue of the paper's top-1 token equality), against the\n" +
		"plain fp32 forward and against the same rounding without GELO, beside the paper's Llama-2 figures.",
	Flags: protocolEqualityFlags,
}

// protocolBenchFlags defines the flags of `geloattack protocol bench` and returns what runs it.
func protocolBenchFlags(fs *flag.FlagSet) runFunc {
	def := overhead.DefaultConfig()
	ns := fs.String("n", intsText(def.Ns), "comma-separated n (rows of H, size of A), each 2..65536")
	d := intFlag(fs, "d", def.D, field.Bounds{Int: true, Min: 1, Max: overhead.MaxDim}, "row width d of H")
	p := intFlag(fs, "p", 0, field.Bounds{Int: true, Min: 1, Max: overhead.MaxDim, Zero: "d, a square projection like Q, K, V, O"}, "projection width p, the columns of W")
	repeats := intFlag(fs, "repeats", def.Repeats, field.Bounds{Int: true, Min: 1, Max: overhead.MaxRepeats}, "measured rounds per n (medians over them)")
	kappa := fs.Float64("kappa", def.Kappa, "cond(A) of the non-orthogonal mix (>= 1)")
	mixes := fs.String("mixes", mixText(def.Mixes), "comma-separated kinds of A to time: orthogonal, kappa")
	breakdown := intFlag(fs, "breakdown", 0, field.Bounds{Int: true, Min: 1, Max: overhead.MaxDim, Zero: "512, or the n nearest it"}, "n of the breakdown table; must be one of -n")
	seed := fs.Uint64("seed", def.Seed, "seed of H, W and every A")
	threads := intFlag(fs, "threads", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 10, Zero: "GOMAXPROCS"}, "BLAS threads")
	maxTime := fs.Duration("max-time-per-n", 0, "stop the rounds at an n once they have taken this long (at least one round; 0: all -repeats)")
	dev := fs.String("device", device.CPU, "where the GEMMs run: cpu, auto, cuda or cuda:N (A is generated on the host either way)")
	precision := fs.String("precision", device.FP32, "GEMM precision on a GPU: fp32, tf32 or bf16")
	out := fs.String("out", "", "also write protocol-bench.md, .csv and the overhead plot (.png) into this directory")
	return func(ctx context.Context, args []string) error {
		cfg := overhead.Config{D: *d, P: *p, Repeats: *repeats, Kappa: *kappa, BreakdownN: *breakdown, Seed: *seed,
			Threads: *threads, MaxTimePerN: *maxTime}
		var err error
		if cfg.Ns, err = intList(*ns); err != nil {
			return fmt.Errorf("protocol bench: -n: %w", err)
		}
		for _, m := range splitList(*mixes) {
			cfg.Mixes = append(cfg.Mixes, overhead.MixKind(m))
		}
		if _, err := device.ParseSpec(*dev); err != nil {
			return fmt.Errorf("protocol bench: -device: %w", err)
		}
		if err := device.ValidPrecision(*precision); err != nil {
			return fmt.Errorf("protocol bench: -precision: %w", err)
		}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("protocol bench: %w", err)
		}
		if *dev != device.CPU {
			// The CUDA context is current per OS thread: open, run and close on this one.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			be, err := device.Open(*dev, *precision, func(l string) { fmt.Fprintln(os.Stderr, l) })
			if err != nil {
				return fmt.Errorf("protocol bench: %w", err)
			}
			defer device.Close(be)
			if _, onCPU := be.(*cpu.Backend); !onCPU {
				cfg.Backend = be
			}
		}
		res, err := overhead.Run(ctx, cfg, os.Stderr)
		if err != nil {
			return fmt.Errorf("protocol bench: %w", err)
		}
		md := res.Markdown()
		os.Stdout.Write(md)
		if *out != "" {
			if err := os.MkdirAll(*out, 0o755); err != nil {
				return err
			}
			if err := checkpoints.WriteFileAtomic(filepath.Join(*out, "protocol-bench.md"), md); err != nil {
				return err
			}
			if err := checkpoints.WriteFileAtomic(filepath.Join(*out, "protocol-bench.csv"), res.CSV()); err != nil {
				return err
			}
			if err := res.Plot(filepath.Join(*out, "protocol-bench.png")); err != nil {
				return err
			}
		}
		return nil
	}
}

// intsText writes integers as a comma-separated flag default.
func intsText(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// mixText writes mix kinds as a comma-separated flag default.
func mixText(ms []overhead.MixKind) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ",")
}

// protocolEqualityFlags defines the flags of `geloattack protocol equality` and returns what runs it.
func protocolEqualityFlags(fs *flag.FlagSet) runFunc {
	def := equality.DefaultConfig()
	cfg := def
	fs.StringVar(&cfg.ModelDir, "model", def.ModelDir, "BERT model directory (config.json, tokenizer.json, *.safetensors); fetch with scripts/fetch-data.sh")
	fs.StringVar(&cfg.TextsSource, "texts", def.TextsSource, "SOURCE of the texts, as for store extract: a fetch-data.sh corpus directory, a .jsonl file or one text per line")
	corpora := fs.String("corpora", "", "comma-separated corpora of a corpus directory (fortunes, wordnet, sotu); empty: all present")
	intVar(fs, &cfg.Texts, "count", def.Texts, field.Bounds{Int: true, Min: 3, Max: 1 << 20},
		"number of texts evaluated (the first of SOURCE in its order); with 2 each text's nearest neighbour is the other one, so their equality would be 1 whatever GELO did")
	intVar(fs, &cfg.MaxTokens, "max-tokens", def.MaxTokens, field.Bounds{Int: true, Min: 2, Max: 1 << 16}, "truncate each text to this many tokens, [CLS] and [SEP] included")
	layers := fs.String("layers", "", "comma-separated blocks (1..num_hidden_layers) whose Q, K, V and O go through GELO; empty: all")
	precisions := fs.String("precisions", strings.Join(def.Precisions, ","), "comma-separated storage precisions of U and Y on the accelerator: fp32, bf16, fp16")
	fs.BoolVar(&cfg.Orthogonal, "orthogonal", def.Orthogonal, "include the Haar-orthogonal mix (-orthogonal=false to leave it out)")
	kappas := fs.String("kappas", floatList(def.Kappas), "comma-separated cond(A) of the non-orthogonal mixes (each >= 1); empty: none")
	fs.Float64Var(&cfg.ShieldFrac, "shield-frac", def.ShieldFrac, "shield rows per real row of a text, in [0, 1] (0: no shields; the paper recommends about 0.05)")
	fs.Float64Var(&cfg.ShieldScale, "shield-scale", def.ShieldScale, "shield rows' norm relative to the mean input row norm (> 0; the paper recommends 4-10)")
	fs.Uint64Var(&cfg.Seed, "seed", def.Seed, "seed of every A and shield drawn")
	fs.StringVar(&cfg.Trusted, "trusted", def.Trusted, "precision of the trusted side's A, mix and unmix: fp64 or fp32")
	fs.BoolVar(&cfg.RoundWeights, "round-weights", def.RoundWeights, "also round W to the storage precision (a model held in bf16/fp16)")
	intVar(fs, &cfg.BatchTokens, "batch-tokens", def.BatchTokens, field.Bounds{Int: true, Min: 2, Max: 1 << 24}, "token budget of one forward batch")
	intVar(fs, &cfg.Workers, "workers", def.Workers, field.Bounds{Int: true, Min: 1, Max: 1 << 10, Zero: "GOMAXPROCS"}, "goroutines")
	out := fs.String("out", "", "also write equality.md and equality.csv into this directory")
	return func(ctx context.Context, args []string) error {
		var err error
		if *corpora != "" {
			cfg.Corpora = splitList(*corpora)
		}
		if cfg.Layers, err = intList(*layers); err != nil {
			return fmt.Errorf("protocol equality: -layers: %w", err)
		}
		cfg.Precisions = splitList(*precisions)
		if cfg.Kappas, err = floats(*kappas); err != nil {
			return fmt.Errorf("protocol equality: -kappas: %w", err)
		}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("protocol equality: %w", err)
		}
		res, err := equality.Run(ctx, cfg, os.Stderr)
		if err != nil {
			return fmt.Errorf("protocol equality: %w", err)
		}
		md := res.Markdown()
		fmt.Print(md)
		if *out != "" {
			if err := os.MkdirAll(*out, 0o755); err != nil {
				return err
			}
			if err := checkpoints.WriteFileAtomic(filepath.Join(*out, "equality.md"), []byte(md)); err != nil {
				return err
			}
			if err := checkpoints.WriteFileAtomic(filepath.Join(*out, "equality.csv"), []byte(res.CSV())); err != nil {
				return err
			}
		}
		return nil
	}
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// intList parses a comma-separated list of integers ("" is none).
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// floats parses a comma-separated list of numbers ("" is none).
func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range splitList(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// floatList writes numbers as a comma-separated flag default.
func floatList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}
