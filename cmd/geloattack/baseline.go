package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/runner"
)

var cmdBaseline = &Command{
	Name:      "baseline",
	UsageLine: "-attack NAME [-config FILE] [flags]",
	Short:     "training-free attacks: rowspace | fastica | jade | fobi | jd | anchor | content",
	Long: "Runs a training-free attack (SPEC §7) on examples drawn by the config's sampler, the same stream the\n" +
		"learned attacks are evaluated on. rowspace ranks candidate texts by how much of their rows lies in\n" +
		"rowspace(U_obs) and reports retrieval mass, top-1 and recall@|P| with chance; fastica, jade, fobi and\n" +
		"jd (SOBI-style joint diagonalisation) separate U and report p95 and mean |cos| to the clean rows after\n" +
		"Hungarian matching and the Gram error (SPEC §6), beside the same figures for as many random rows of\n" +
		"the split (what a random guess of rows reaches); anchor gives the attacker k clean rows. content is\n" +
		"geloattack recover, with its flags (geloattack recover -h).",
	Flags: baselineFlags,
	Delegate: func(args []string) (*Command, []string, bool) {
		rest, ok := contentAttack(args)
		return cmdRecover, rest, ok
	},
}

// baselineFlags defines the flags of `geloattack baseline` and returns what runs it.
func baselineFlags(flags *flag.FlagSet) runFunc {
	attack := flags.String("attack", "rowspace", "rowspace | fastica | jade | fobi | jd | anchor | content (sensitive-content recovery: the flags of geloattack recover -h)")
	cfgPath := flags.String("config", "", "run config whose store and sampler draw the examples; empty = the embedded quickstart")
	splitName := flags.String("split", "val", "split the examples and candidates come from: train or val")
	examples := intFlag(flags, "examples", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20},
		"examples to score; left out: train.eval_batches x train.batch_size for rowspace, 2 otherwise")
	batch := overrideInt(flags, "batch", "train.batch_size", "rowspace: examples whose positives form one candidate set (the learned attacks' in-batch pools)")
	extra := overrideInt(flags, "extra-negatives", "loss.extra_negatives", "rowspace: random texts added to each candidate set")
	bestRow := flags.Bool("best-row", false, "rowspace: score a candidate by its best-contained row instead of its rows' energy inside the row space")
	anchors := intFlag(flags, "anchors", 8, field.Bounds{Int: true, Min: 1, Max: 1 << 16}, "anchor: number k of clean rows the attacker knows")
	anchorMethod := flags.String("anchor-method", "subtract", "anchor: subtract | project | constrained")
	obsRows := flags.Float64("obs-rows", 0, "override sampler.obs_rows, the observed fraction of U's rows (0 = keep)")
	dtype := flags.String("observe-dtype", "", "override sampler.observe_dtype: none | bf16 | fp16 (empty = keep)")
	out := flags.String("out", "", "also write the result as JSON to this file")
	return func(ctx context.Context, args []string) error {
		split, err := data.ParseSplit(*splitName)
		if err != nil {
			return fmt.Errorf("-split: %w", err)
		}
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		if *obsRows != 0 {
			cfg.Sampler.ObsRows = *obsRows
		}
		if *dtype != "" {
			cfg.Sampler.ObserveDtype = gelo.ObserveDtype(*dtype)
		}
		if err := cfg.Sampler.Validate(); err != nil {
			return err
		}
		corpus, closeFn, err := runner.OpenCorpus(cfg)
		if err != nil {
			return err
		}
		defer closeFn()
		s, err := gelo.NewSampler(corpus, cfg.Sampler)
		if err != nil {
			return err
		}

		var result any
		switch *attack {
		case "rowspace":
			opts := baselines.RowSpaceOptions{Split: split, Examples: *examples, Batch: cfg.Train.BatchSize,
				ExtraNegatives: cfg.Loss.ExtraNegatives, Seed: cfg.Seed}
			batch.apply(&opts.Batch)
			extra.apply(&opts.ExtraNegatives)
			if opts.Examples == 0 {
				opts.Examples = cfg.Train.EvalBatches * cfg.Train.BatchSize
			}
			if *bestRow {
				opts.Aggregate = baselines.BestRow
			}
			row, err := baselines.RowSpaceRetrieval(ctx, s, opts)
			if err != nil {
				return err
			}
			fmt.Printf("row-space containment on %s, obs_rows %g, observe_dtype %s, %.1f candidates per set:\n"+
				"  mass   %v\n  top1   %v\n  recall %v\n  median source residual %.3g\n",
				row.Split, row.ObsRows, row.ObserveDtype, row.Candidates, row.Mass, row.Top1, row.Recall, row.SourceResidual)
			fmt.Print(rowspaceMassNote)
			result = row
		case "fastica", "jade", "fobi", "jd":
			method := bssMethod(*attack, cfg.Seed)
			row, err := baselines.BSSEval(ctx, s, method, baselines.BSSOptions{Split: split, Examples: *examples, Seed: cfg.Seed})
			if err != nil {
				return err
			}
			fmt.Print(row.Table())
			result = row
		case "anchor":
			m, err := baselines.ParseAnchorMethod(*anchorMethod)
			if err != nil {
				return fmt.Errorf("-anchor-method: %w", err)
			}
			row, err := baselines.AnchorEval(ctx, s, baselines.AnchorEvalOptions{Split: split, Examples: *examples,
				Anchors: *anchors, Anchor: baselines.AnchorOptions{Method: m, ICA: baselines.FastICAOptions{Seed: cfg.Seed}}, Seed: cfg.Seed})
			if err != nil {
				return err
			}
			fmt.Print(row.Table())
			result = row
		default:
			return fmt.Errorf("-attack %q: want rowspace, fastica, jade, fobi, jd or anchor", *attack)
		}
		if *out != "" {
			b, err := json.MarshalIndent(result, "", "  ")
			if err != nil {
				return err
			}
			if err := checkpoints.WriteFileAtomic(*out, append(b, '\n')); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
		}
		return nil
	}
}

// rowspaceMassNote explains why the row-space mass sits far below its top-1: the scores are
// log-odds of containment at no learned scale, and a candidate is scored on all its rows while an
// example holds only tokens_per_text of them, so the positives lead without dominating the softmax.
const rowspaceMassNote = "  (mass is the softmax, at temperature 1, of each candidate's containment log-odds over all its rows,\n" +
	"  of which an example holds only tokens_per_text: the positives can rank first (top1, recall 1) and\n" +
	"  still hold little of the softmax. Compare mass between row-space runs; top1 and recall with the\n" +
	"  learned attacks.)\n"

// bssMethod names a separation method for BSSEval.
func bssMethod(name string, seed uint64) baselines.BSSMethod {
	run := map[string]baselines.BSSFunc{
		"fastica": func(ctx context.Context, u *mat.Dense) (baselines.Separation, error) {
			return baselines.FastICA(ctx, u, baselines.FastICAOptions{Seed: seed})
		},
		"jade": func(ctx context.Context, u *mat.Dense) (baselines.Separation, error) {
			return baselines.JADE(ctx, u, baselines.JADEOptions{})
		},
		"fobi": func(ctx context.Context, u *mat.Dense) (baselines.Separation, error) {
			return baselines.FOBI(ctx, u, baselines.FOBIOptions{})
		},
		"jd": func(ctx context.Context, u *mat.Dense) (baselines.Separation, error) {
			return baselines.SOBI(ctx, u, baselines.SOBIOptions{})
		},
	}
	return baselines.BSSMethod{Name: name, Run: run[name]}
}

// contentAttack reports whether args select -attack content and returns them without that flag:
// the content attack has flags of its own (`geloattack recover`).
func contentAttack(args []string) ([]string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		switch a {
		case "-attack=content", "--attack=content":
			return append(append([]string(nil), args[:i]...), args[i+1:]...), true
		case "-attack", "--attack":
			if i+1 < len(args) && args[i+1] == "content" {
				return append(append([]string(nil), args[:i]...), args[i+2:]...), true
			}
		}
	}
	return nil, false
}
