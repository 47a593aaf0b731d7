package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/train"
)

// runEval is `geloattack eval`.
func runEval(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("eval", flag.ContinueOnError)
	ckpt := flags.String("ckpt", "", "checkpoint file (.safetensors); default: the latest checkpoint of the run directory")
	batches := flags.Int("batches", 0, "batches per split to score (0 = the config's eval.batches)")
	batchSize := flags.Int("batch-size", 0, "examples per batch (0 = the config's train.batch_size)")
	out := flags.String("out", "", "write eval.json and eval.md here (default: the run directory, or beside -ckpt)")
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "usage: geloattack eval [flags] RUN_DIR\n       geloattack eval [flags] -ckpt FILE\n\n"+
			"Scores a trained attack on fresh obfuscated batches of the train split (new mixtures of training\n"+
			"texts) and of the val split (held-out texts), with each metric's chance level computed on the same\n"+
			"examples (SPEC §6). The run config stored in the checkpoint rebuilds the store and sampler.\n\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
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
	raw, ok := ck.Metadata[metaRunConfig]
	if !ok {
		return fmt.Errorf("checkpoint %s: no %q metadata: not written by geloattack train", path, metaRunConfig)
	}
	var cfg config.Run
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("checkpoint %s: %s metadata: %w", path, metaRunConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("checkpoint %s: run config: %w", path, err)
	}
	sess, err := newSession(cfg)
	if err != nil {
		return err
	}
	defer sess.close()
	if err := loadWeights(sess, ck); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	spec := train.EvalSpec{BatchSize: cfg.Train.BatchSize, Batches: cfg.Eval.Batches, Workers: cfg.Train.Workers, Prefetch: cfg.Train.Prefetch}
	if *batches > 0 {
		spec.Batches = *batches
	}
	if *batchSize > 0 {
		spec.BatchSize = *batchSize
	}
	fmt.Fprintf(os.Stderr, "evaluating %s (step %d) on %d batches of %d examples per split\n", path, ck.State.Step, spec.Batches, spec.BatchSize)
	m, err := train.Evaluate(ctx, sess.sampler, sess.task, spec)
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
	md := fmt.Sprintf("# Evaluation of %s\n\nStep %d, %d batches of %d examples per split.\n\n%s", path, ck.State.Step, spec.Batches, spec.BatchSize, train.MetricsMarkdown(m))
	if err := checkpoints.WriteFileAtomic(filepath.Join(dir, "eval.md"), []byte(md)); err != nil {
		return err
	}
	fmt.Print(strings.SplitN(md, "\n\n", 2)[1])
	return nil
}

// loadWeights copies a checkpoint's weights into the session's model, checking names and shapes.
func loadWeights(s *session, ck checkpoints.Checkpoint) error {
	var want []checkpoints.Spec
	dst := map[string][]float32{}
	views := s.task.Params().Views()
	for _, pv := range views {
		want = append(want, checkpoints.Spec{Name: pv.Name, Shape: pv.Shape})
		dst[pv.Name] = make([]float32, pv.Size)
	}
	if err := checkpoints.CopyInto(ck.Weights, want, dst); err != nil {
		return err
	}
	for _, pv := range views {
		if err := pv.Tensor.CopyFrom(dst[pv.Name]); err != nil {
			return err
		}
	}
	return nil
}
