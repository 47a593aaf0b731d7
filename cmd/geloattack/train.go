package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/runner"
	"github.com/gelo-research/geloattack/train"
	"github.com/gelo-research/geloattack/train/trainopts"
)

var cmdTrain = &Command{
	Name:  "train",
	Short: "train a learned attack (default: configs/quickstart.yaml on the embedded synthetic store)",
	Long: "Trains a learned attack on obfuscated batches sampled on the fly, evaluates it on train and val\n" +
		"with chance levels, and writes config.yaml, metrics.jsonl, checkpoints and report.{json,md}\n" +
		"to the run directory. SIGINT/SIGTERM writes a checkpoint and exits; -resume continues (on any\n" +
		"device, and with another -precision if asked). The run header names the device.\n" +
		"A config with model.task lm (configs/lm/small.yaml) trains a decoder language model instead: next-token\n" +
		"cross-entropy over lm.texts, val perplexity beside the add-one unigram and bigram's (docs/language-model.md);\n" +
		"geloattack model export turns the run into a Hugging Face directory.",
	Flags:            trainFlags,
	SavesOnInterrupt: true,
}

// trainFlags defines the flags of `geloattack train` and returns what runs it.
func trainFlags(flags *flag.FlagSet) runFunc {
	cfgPath := flags.String("config", "", "run config (YAML); empty = the embedded configs/quickstart.yaml")
	out := flags.String("out", "", "run directory; empty = the config's out_dir, else runs/<name> (runs/<name>-2, -3, ... when that one holds an earlier run)")
	resume := flags.Bool("resume", false, "continue a run from its latest checkpoint, with the config it was made with (default directory: the last unfinished runs/<name>[-N])")
	acceptChanged := flags.Bool("accept-changed-inputs", false, "with -resume: continue a task-lm run whose lm.texts or lm.tokenizer changed since its checkpoint (refused otherwise); the run header and metrics.jsonl record it")
	steps := overrideInt(flags, "steps", "train.steps", "")
	workers := overrideInt(flags, "workers", "train.workers", "the example-generating goroutines")
	mixOn := flags.String("mix-on", "", "override train.mix_on, where each batch's U = A X is formed: "+trainopts.MixOnHelp+
		" (left out: the config's, default auto; host keeps the CPU's figures as they were, device uploads X and A and multiplies on the GPU in fp32)")
	dev := addDeviceFlags(flags)
	addSamplerOverrides(flags, "texts per example")
	// resolve applies the flags to a config: the sampler overrides, -steps and -workers (then
	// the whole config is validated), the device.
	resolve := func(ctx context.Context, cfg *config.Run) error {
		var err error
		if cfg.Sampler, err = samplerOf(ctx, flags, cfg.Sampler); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		if *mixOn != "" {
			cfg.Train.MixOn = *mixOn
		}
		if err := overrideTrain(cfg, steps, workers); err != nil {
			return err
		}
		return dev.apply(cfg)
	}
	return func(ctx context.Context, _ []string) error {
		if *acceptChanged && !*resume {
			return &argsError{"-accept-changed-inputs applies to -resume"}
		}
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		if err := resolve(ctx, &cfg); err != nil {
			return err
		}
		dir := runDir(cfg.OutDir, cfg.Name, *out)
		defaultDir := *out == "" && cfg.OutDir == ""
		switch {
		case !*resume && defaultDir:
			// The default directory of an earlier run: start a new one beside it rather than fail,
			// so the README's command works every time. Named directories are never reused silently.
			dir = freeRunDir(dir)
		case *resume && defaultDir:
			d, err := unfinishedRunDir(dir)
			if err != nil {
				return err
			}
			dir = d
		}
		if *resume && *cfgPath == "" {
			// Resume the run with the config it was made with, not the embedded default.
			if cfg, err = runner.ResumeConfig(dir); err != nil {
				return err
			}
			if err := resolve(ctx, &cfg); err != nil {
				return err
			}
		}
		res, err := runner.TrainWith(ctx, cfg, dir, runner.RunOptions{Resume: *resume, AcceptChangedInputs: *acceptChanged}, os.Stderr)
		if errors.Is(err, train.ErrInterrupted) {
			return fmt.Errorf("%w; continue with: geloattack train -resume -out %s", err, dir)
		}
		if err != nil {
			return err
		}
		fmt.Printf("final evaluation after %d steps (%s):\n%s\nreport: %s\n", res.Steps, dir,
			eval.MetricsMarkdown(res.Final), filepath.Join(dir, "report.md"))
		return nil
	}
}

// overrideTrain applies -steps and -workers when given and validates the result (with -mix-on,
// set before), so an override the config would refuse (a warmup longer than the run, ...) is
// refused too.
func overrideTrain(cfg *config.Run, steps, workers *optInt) error {
	steps.apply(&cfg.Train.Steps)
	workers.apply(&cfg.Train.Workers)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("train: with -steps %d -workers %d: %w", cfg.Train.Steps, cfg.Train.Workers, err)
	}
	return nil
}

// freeRunDir is dir when it holds no checkpoint, else the first dir-N that holds none.
func freeRunDir(dir string) string {
	cand := dir
	for i := 2; ; i++ {
		if _, _, err := checkpoints.LatestPath(cand); err != nil {
			return cand
		}
		cand = fmt.Sprintf("%s-%d", dir, i)
	}
}

// unfinishedRunDir is the last of dir, dir-2, dir-3, ... that holds a checkpoint but no final
// report: the run an interrupted `geloattack train` left behind.
func unfinishedRunDir(dir string) (string, error) {
	found := ""
	cand := dir
	for i := 2; ; i++ {
		if _, _, err := checkpoints.LatestPath(cand); err != nil {
			break
		}
		if _, err := os.Stat(filepath.Join(cand, "report.json")); err != nil {
			found = cand
		}
		cand = fmt.Sprintf("%s-%d", dir, i)
	}
	if found == "" {
		return "", fmt.Errorf("-resume: no unfinished run in %s or %s-N; name the run directory with -out", dir, dir)
	}
	return found, nil
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
