package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/termtext"
	"github.com/gelo-research/geloattack/runner"
	"github.com/gelo-research/geloattack/tasks"
)

var cmdEval = &Command{
	Name:      "eval",
	UsageLine: "[flags] RUN_DIR\n       geloattack eval [flags] -ckpt FILE",
	Short:     "evaluate a run directory or checkpoint: metrics with chance levels",
	Long: "Scores a trained attack on fresh obfuscated batches of the train split (new mixtures of training\n" +
		"texts) and of the val split (held-out texts), with each metric's chance level computed on the same\n" +
		"examples (SPEC §6). The run config stored in the checkpoint rebuilds the store and sampler, and\n" +
		"names the device and precision unless -device or -precision say otherwise. The config's\n" +
		"eval.batches (32 by default) gives a steadier estimate than the run's own evaluations, which use\n" +
		"train.eval_batches: pass that number to -batches to reproduce the run's final table.",
	Args:  true,
	Flags: evalFlags,
}

// evalFlags defines the flags of `geloattack eval` and returns what runs it.
func evalFlags(flags *flag.FlagSet) runFunc {
	ckpt := flags.String("ckpt", "", "checkpoint file (.safetensors); default: the latest checkpoint of the run directory")
	batches := overrideInt(flags, "batches", "eval.batches", "the batches per split to score")
	batchSize := overrideInt(flags, "batch-size", "train.batch_size", "the examples per batch")
	out := flags.String("out", "", "write eval.json and eval.md here (default: the run directory; with -ckpt, eval-<checkpoint>.json and .md beside it)")
	dev := addDeviceFlags(flags)
	addSamplerOverrides(flags, "texts per example")
	return func(ctx context.Context, args []string) error {
		path := *ckpt
		dir := ""
		switch {
		case len(args) == 1 && path == "":
			dir = args[0]
			p, _, err := checkpoints.LatestPath(dir)
			if err != nil {
				return fmt.Errorf("run directory %s: %w", dir, err)
			}
			path = p
		case len(args) == 0 && path != "":
			dir = filepath.Dir(path)
		default:
			return &argsError{"give a run directory or -ckpt FILE"}
		}
		// eval.json and eval.md are the run's evaluation of its latest checkpoint; one of a
		// checkpoint named by -ckpt goes beside it under the checkpoint's name, so evaluating an
		// older checkpoint does not replace the run's figures. Both are checked before the work:
		// a link or FIFO planted there is refused now, not after the evaluation.
		outDir, name := dir, "eval"
		if *out != "" {
			outDir = *out
		} else if *ckpt != "" {
			name = "eval-" + strings.TrimSuffix(filepath.Base(path), ".safetensors")
		}
		for _, ext := range []string{".json", ".md"} {
			if err := safefile.CheckTarget(filepath.Join(outDir, name+ext)); err != nil {
				return err
			}
		}
		ck, err := checkpoints.LoadCheckpoint(path)
		if err != nil {
			return err
		}
		for _, n := range ck.Notes {
			fmt.Fprintln(os.Stderr, "note:", termtext.Escape(n))
		}
		cfg, err := runner.ConfigOf(ck)
		if err != nil {
			return err
		}
		if err := dev.apply(&cfg); err != nil {
			return err
		}
		// The sampler overrides evaluate the attack under another GELO setting than it was trained
		// on: eval.json and eval.md say which, and with what values.
		overrides := givenSamplerFlags(flags)
		if cfg.Sampler, err = samplerOf(ctx, flags, cfg.Sampler); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		if len(overrides) > 0 {
			fmt.Fprintf(os.Stderr, "note: the run's sampler changed by %s\n", overrides)
		}
		runtime.LockOSThread() // the CUDA context is current per OS thread (see runner.Train)
		defer runtime.UnlockOSThread()
		sess, err := runner.Open(cfg)
		if err != nil {
			return err
		}
		for _, l := range sess.DeviceLog {
			fmt.Fprintln(os.Stderr, l)
		}
		defer sess.Close()
		if err := sess.LoadWeights(ck); err != nil {
			return err
		}
		spec := tasks.EvalSpec{BatchSize: cfg.Train.BatchSize, Batches: cfg.Eval.Batches, Workers: cfg.Train.Workers, Prefetch: cfg.Train.Prefetch, Bucket: cfg.Train.SetBucket,
			MixOnDevice: tasks.MixOnDevice(cfg.Train, sess.Backend)} // U formed where the run's evaluations formed it
		batches.apply(&spec.Batches)
		batchSize.apply(&spec.BatchSize)
		fmt.Fprintf(os.Stderr, "evaluating %s (step %d) on %d batches of %d examples per split\n", path, ck.State.Step, spec.Batches, spec.BatchSize)
		if spec.Batches != cfg.Train.EvalBatches || spec.BatchSize != cfg.Train.BatchSize {
			// Different batches give different (noisier or steadier) figures: say so, so nobody
			// takes the gap to the run's report for a bug.
			fmt.Fprintf(os.Stderr, "note: the run's own evaluations (its final table in report.md) scored train.eval_batches = %d batches of %d; "+
				"these figures are a different sample: -batches %d -batch-size %d reproduces that table exactly\n",
				cfg.Train.EvalBatches, cfg.Train.BatchSize, cfg.Train.EvalBatches, cfg.Train.BatchSize)
		}
		m, err := tasks.Evaluate(ctx, sess.Sampler, sess.Task, spec)
		if err != nil {
			return err
		}
		dir = outDir
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		record := map[string]any{"checkpoint": path, "step": ck.State.Step, "batches": spec.Batches, "batch_size": spec.BatchSize, "metrics": m}
		if len(overrides) > 0 {
			record["sampler_overrides"] = overrides
		}
		j, err := json.MarshalIndent(record, "", "  ")
		if err != nil {
			return err
		}
		if err := checkpoints.WriteFileAtomic(filepath.Join(dir, name+".json"), append(j, '\n')); err != nil {
			return err
		}
		setting := ""
		if len(overrides) > 0 {
			setting = fmt.Sprintf(" The run's sampler changed by %s.", overrides)
		}
		md := fmt.Sprintf("# Evaluation of %s\n\nStep %d, %d batches of %d examples per split.%s\n\n%s", path, ck.State.Step, spec.Batches, spec.BatchSize, setting, eval.MetricsMarkdown(m))
		if err := checkpoints.WriteFileAtomic(filepath.Join(dir, name+".md"), []byte(md)); err != nil {
			return err
		}
		fmt.Print(strings.SplitN(md, "\n\n", 2)[1])
		return nil
	}
}
