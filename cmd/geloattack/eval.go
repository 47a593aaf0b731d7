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
	"github.com/gelo-research/geloattack/runner"
	"github.com/gelo-research/geloattack/tasks"
)

// runEval is `geloattack eval`.
func runEval(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("eval", flag.ContinueOnError)
	ckpt := flags.String("ckpt", "", "checkpoint file (.safetensors); default: the latest checkpoint of the run directory")
	batches := flags.Int("batches", 0, "batches per split to score (0 = the config's eval.batches, 32 by default: a steadier estimate than\nthe run's own evaluations, which use train.eval_batches; pass that number to reproduce the run's final table)")
	batchSize := flags.Int("batch-size", 0, "examples per batch (0 = the config's train.batch_size)")
	out := flags.String("out", "", "write eval.json and eval.md here (default: the run directory, or beside -ckpt)")
	dev := addDeviceFlags(flags)
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "usage: geloattack eval [flags] RUN_DIR\n       geloattack eval [flags] -ckpt FILE\n\n"+
			"Scores a trained attack on fresh obfuscated batches of the train split (new mixtures of training\n"+
			"texts) and of the val split (held-out texts), with each metric's chance level computed on the same\n"+
			"examples (SPEC §6). The run config stored in the checkpoint rebuilds the store and sampler, and\n"+
			"names the device and precision unless -device or -precision say otherwise.\n\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if err := checkFlags(flags, map[string]span{"batches": {1, 1 << 20}, "batch-size": {1, 1 << 16}}); err != nil {
		return err
	}
	path := *ckpt
	dir := ""
	switch {
	case flags.NArg() == 1 && path == "":
		dir = flags.Arg(0)
		p, _, err := checkpoints.LatestPath(dir)
		if err != nil {
			return fmt.Errorf("run directory %s: %w", dir, err)
		}
		path = p
	case flags.NArg() == 0 && path != "":
		dir = filepath.Dir(path)
	default:
		flags.Usage()
		return fmt.Errorf("give a run directory or -ckpt FILE")
	}
	ck, err := checkpoints.LoadCheckpoint(path)
	if err != nil {
		return err
	}
	for _, n := range ck.Notes {
		fmt.Fprintln(os.Stderr, "note:", n)
	}
	cfg, err := runner.ConfigOf(ck)
	if err != nil {
		return err
	}
	if err := dev.apply(&cfg); err != nil {
		return err
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
	spec := tasks.EvalSpec{BatchSize: cfg.Train.BatchSize, Batches: cfg.Eval.Batches, Workers: cfg.Train.Workers, Prefetch: cfg.Train.Prefetch, Bucket: cfg.Train.SetBucket}
	if *batches > 0 {
		spec.Batches = *batches
	}
	if *batchSize > 0 {
		spec.BatchSize = *batchSize
	}
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
	if *out != "" {
		dir = *out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(map[string]any{"checkpoint": path, "step": ck.State.Step, "batches": spec.Batches, "batch_size": spec.BatchSize, "metrics": m}, "", "  ")
	if err != nil {
		return err
	}
	if err := checkpoints.WriteFileAtomic(filepath.Join(dir, "eval.json"), append(j, '\n')); err != nil {
		return err
	}
	md := fmt.Sprintf("# Evaluation of %s\n\nStep %d, %d batches of %d examples per split.\n\n%s", path, ck.State.Step, spec.Batches, spec.BatchSize, eval.MetricsMarkdown(m))
	if err := checkpoints.WriteFileAtomic(filepath.Join(dir, "eval.md"), []byte(md)); err != nil {
		return err
	}
	fmt.Print(strings.SplitN(md, "\n\n", 2)[1])
	return nil
}
