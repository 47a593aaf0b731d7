package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gelo-research/geloattack/runner"
	"github.com/gelo-research/geloattack/train"
)

// runTrain is `geloattack train`.
func runTrain(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("train", flag.ContinueOnError)
	cfgPath := flags.String("config", "", "run config (YAML); empty = the embedded configs/quickstart.yaml")
	out := flags.String("out", "", "run directory; empty = the config's out_dir, else runs/<name>")
	resume := flags.Bool("resume", false, "continue the run in the run directory from its latest checkpoint")
	steps := flags.Int("steps", 0, "override train.steps (0 = keep the config's)")
	workers := flags.Int("workers", 0, "override train.workers, the example-generating goroutines (0 = keep)")
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "usage: geloattack train [-config FILE] [-out DIR] [-resume] [-steps N] [-workers N]\n\n"+
			"Trains a learned attack on obfuscated batches sampled on the fly, evaluates it on train and val\n"+
			"with chance levels, and writes config.yaml, metrics.jsonl, checkpoints and report.{json,md}\n"+
			"to the run directory. SIGINT/SIGTERM writes a checkpoint and exits; -resume continues.\n\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags go before nothing else; see -h)", flags.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *steps > 0 {
		cfg.Train.Steps = *steps
	}
	if *workers > 0 {
		cfg.Train.Workers = *workers
	}
	dir := runDir(cfg.OutDir, cfg.Name, *out)
	res, err := runner.Train(ctx, cfg, dir, *resume, os.Stderr)
	if errors.Is(err, train.ErrInterrupted) {
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("final evaluation after %d steps (%s):\n%s\nreport: %s\n", res.Steps, dir,
		train.MetricsMarkdown(res.Final), filepath.Join(dir, "report.md"))
	return nil
}

// runDir is -out, else the config's out_dir, else runs/<name>.
func runDir(cfgOut, name, flagOut string) string {
	switch {
	case flagOut != "":
		return flagOut
	case cfgOut != "":
		return cfgOut
	}
	return filepath.Join("runs", name)
}
