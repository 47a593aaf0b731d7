package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/shard"
	"github.com/gelo-research/geloattack/internal/termtext"
	"github.com/gelo-research/geloattack/models/settransformer/modelcfg"
	"github.com/gelo-research/geloattack/sweep"
	"github.com/gelo-research/geloattack/sweep/report"
)

var cmdSweep = &Command{
	Name:      "sweep",
	UsageLine: "-config FILE [-out DIR] [-shard i/N | -shards N | -cells LABEL,...] [flags]",
	Short:     "run a grid of training runs over shield settings",
	Long: "Runs every cell of a sweep (a grid over config fields) as a training run in DIR/<cell>, one after\n" +
		"another. Finished cells are skipped, interrupted ones resume from their checkpoint, and a failed\n" +
		"cell does not stop the others. SIGINT/SIGTERM checkpoints the running cell and stops; run the same\n" +
		"command again to continue. As a Slurm job array (SLURM_ARRAY_TASK_ID/COUNT) or a Kubernetes\n" +
		"Indexed Job (JOB_COMPLETION_INDEX with -shards N) each task runs its own shard. -cells R4,R7 runs\n" +
		"only the cells of those labels (or of the names -list prints), skipping and resuming them as a\n" +
		"whole sweep does, e.g. to run single rows of the paper's tables. Then:\n" +
		"geloattack report DIR. -device and -precision apply to every cell; a cell's device may change\n" +
		"between runs of the sweep, its precision may not (cells of another precision are other runs).\n" +
		"See docs/sweeps.md.",
	Flags:            sweepFlags,
	SavesOnInterrupt: true,
}

// sweepFlags defines the flags of `geloattack sweep` and returns what runs it.
func sweepFlags(flags *flag.FlagSet) runFunc {
	cfgPath := flags.String("config", "", "sweep file (YAML): a base run config and the axes or cells to vary (required)")
	out := flags.String("out", "", "sweep directory, one run directory per cell; empty = sweeps/<sweep name>")
	shardFlag := flags.String("shard", "", "run only shard i of N (i/N, 0-based: cells i, i+N, ...); empty = from the job array's environment, else all")
	shards := intFlag(flags, "shards", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20},
		"shard count when the index comes from $JOB_COMPLETION_INDEX (Kubernetes Indexed Job); left out: $"+sweep.EnvShards)
	workers := overrideInt(flags, "workers", "train.workers", "of every cell; does not change results")
	steps := overrideInt(flags, "steps", "train.steps", "of every cell, its cosine schedule following; changes the results: give its own -out (the paper twins trained longer, say)")
	storeFlag := flags.String("store", "", "run every cell on this store instead of its store.path (the paper twins on a decoder store, say); changes the results: give its own -out")
	seedFlag := flags.String("seed", "", "seed of every cell instead of its own (and its sampler's, where that followed it); changes the results: one -out per seed gives a spread over training and draws")
	cellsFlag := flags.String("cells", "", "run only these cells: labels (R4,R7) or names as -list prints them, comma-separated, run in -list order; not with a shard")
	list := flags.Bool("list", false, "list the cells (with -cells: those only), their shard and their state, and run nothing")
	dev := addDeviceFlags(flags)
	return func(ctx context.Context, args []string) error {
		if *cfgPath == "" {
			return errors.New("-config is required: a sweep file such as configs/sweeps/cpu-retrieval.yaml")
		}
		sw, err := sweep.Load(*cfgPath)
		if err != nil {
			return err
		}
		var seed uint64
		if *seedFlag != "" {
			if seed, err = strconv.ParseUint(*seedFlag, 10, 64); err != nil {
				return fmt.Errorf("-seed %q: want an unsigned integer", *seedFlag)
			}
		}
		short := 0 // cells -steps leaves inside their warmup
		for i := range sw.Cells {
			c := &sw.Cells[i].Config
			workers.apply(&c.Train.Workers)
			steps.apply(&c.Train.Steps)
			if steps.set && c.Train.Steps <= c.Train.WarmupSteps {
				short++
			}
			if *storeFlag != "" {
				if c.Model.Task == modelcfg.TaskLM {
					return fmt.Errorf("-store: cell %s is a language model (task lm), which reads lm.texts", sw.Cells[i].Name)
				}
				c.Store.Path = *storeFlag
			}
			if *seedFlag != "" {
				if c.Sampler.Seed == c.Seed {
					c.Sampler.Seed = seed
				}
				c.Seed = seed
			}
			if err := dev.apply(c); err != nil {
				return err
			}
		}
		if short > 0 {
			// Every step of such a cell trains at a warmup learning rate: its figures sit near
			// chance, which reads as a defence when it is only too short a run.
			fmt.Fprintf(os.Stderr, "sweep: warning: -steps %d is within the warmup of %d of %d cells (their train.warmup_steps): they never reach the configured learning rate\n",
				steps.v, short, len(sw.Cells))
		}
		var chosen []int
		if isSet(flags, "cells") {
			// A shard is a job array's share of the whole sweep; which of the chosen cells each
			// task should then run has no one obvious answer, so the two are not combined.
			if *shardFlag != "" || isSet(flags, "shards") {
				return errors.New("-cells and -shard/-shards both select cells: give one (-cells runs the cells it names in this one process)")
			}
			if chosen, err = sw.SelectCells(*cellsFlag); err != nil {
				return fmt.Errorf("-%w", err)
			}
		}
		part, source := shard.All(), ""
		switch {
		case chosen != nil:
		case *shardFlag != "":
			if part, err = shard.Parse(*shardFlag); err != nil {
				return fmt.Errorf("-shard: %w", err)
			}
		default:
			if part, source, err = sweep.ShardFromEnv(os.Getenv, *shards); err != nil {
				return err
			}
		}
		dir := *out
		if dir == "" {
			dir = filepath.Join("sweeps", sw.Name)
		}
		if *list {
			return listCells(sw, dir, part, chosen)
		}
		if chosen != nil {
			if _, source, err := sweep.ShardFromEnv(os.Getenv, 0); err != nil || source != "" {
				return errors.New("-cells inside a job array (a Slurm or Kubernetes job index is set in the environment): " +
					"every task would run the same cells; run -cells as one process outside the array")
			}
		}
		if source != "" {
			fmt.Fprintf(os.Stderr, "sweep %s: shard %s from the %s environment\n", sw.Name, part, source)
		}
		_, err = sweep.Run(ctx, sw, sweep.Options{Out: dir, Shard: part, Cells: chosen, Progress: os.Stderr})
		if err != nil {
			return err
		}
		what := "shard " + part.String()
		if chosen != nil {
			what = fmt.Sprintf("%d chosen cells", len(chosen))
		}
		fmt.Printf("sweep %s: %s done in %s; merge the cells with: geloattack report %s\n", sw.Name, what, dir, dir)
		return nil
	}
}

// listCells prints every cell (or, when chosen is not nil, the chosen cells only) with the shard
// that runs it and its state in dir.
func listCells(sw *sweep.Sweep, dir string, shard sweep.Shard, chosen []int) error {
	show := chosen
	if chosen == nil {
		fmt.Printf("sweep %s: %d cells in %s (shard %s marked *)\n", sw.Name, len(sw.Cells), dir, shard)
		for i := range sw.Cells {
			show = append(show, i)
		}
	} else {
		fmt.Printf("sweep %s: %d cells in %s, %d chosen by -cells (marked *)\n", sw.Name, len(sw.Cells), dir, len(chosen))
	}
	for _, i := range show {
		c := sw.Cells[i]
		st, err := sweep.Inspect(filepath.Join(dir, c.Name))
		if err != nil {
			return err
		}
		mark := " "
		if shard.Owns(i) {
			mark = "*"
		}
		name := c.Name
		if c.Label != "" || c.Paper != nil {
			// A labelled cell's name is its label: show its settings and the paper's figures too.
			parts := make([]string, len(c.Settings))
			for k, s := range c.Settings {
				parts[k] = s.Path[strings.LastIndexByte(s.Path, '.')+1:] + "=" + s.Text
			}
			name += " " + strings.Join(parts, ",")
			if c.Paper != nil {
				name += fmt.Sprintf(" (paper train %.4f, val %.4f)", c.Paper.Train, c.Paper.Val)
			}
		}
		fmt.Printf("%s %3d  shard %d  %-60s %s\n", mark, i+1, i%shard.Count, termtext.Escape(name), termtext.Escape(st.Describe()))
	}
	return nil
}

var cmdReport = &Command{
	Name:      "report",
	UsageLine: "[-q] [-paper] DIR | DIR DIR...",
	Short:     "merge a sweep's cells into tables and plots",
	Long: "Merges the cells of the sweep in DIR (their report.json and config.yaml) into " + report.MarkdownFile + " and " + report.CSVFile + " in\n" +
		"the layout of the paper's tables, and plots val mass against shield scale (mass_vs_scale-<task>.png).\n" +
		"Cells that have not finished are listed with their state. Prints the Markdown unless -q. -paper then\n" +
		"compares the cells that carry the paper's figures with them: the share of the paper's mass above\n" +
		"chance each reaches, the pairs of cells ordered against the paper with their distance in standard\n" +
		"errors, and for unmixing the distance to the random-rows floor (docs/paper-reproduction.md).\n\n" +
		"With several DIRs (runs of one sweep with other seeds, sweep -seed N -out DIR) it writes nothing\n" +
		"and prints one table: each cell's val mass in each DIR, the mean ± SD over the DIRs where it\n" +
		"finished, the share of the paper's mass above chance the mean reaches, how many cells finished in\n" +
		"every DIR, and the pairs of those with the paper's figures whose means are ordered against the\n" +
		"paper's. The DIRs must hold one sweep (the same plan, task and base config) with distinct seeds;\n" +
		"anything else, a DIR named twice, or a cell directory that is a link is refused, naming what differs.",
	Args:  true,
	Flags: reportFlags,
}

// reportFlags defines the flags of `geloattack report` and returns what runs it.
func reportFlags(flags *flag.FlagSet) runFunc {
	quiet := flags.Bool("q", false, "do not print the Markdown report")
	paper := flags.Bool("paper", false, "print the comparison with the paper's figures (of cells that carry them) after the report")
	var paperChance float64
	floatVar(flags, &paperChance, "paper-chance", report.PaperChance, field.Bounds{Min: 0, Max: 1, MaxOpen: true},
		"the paper's chance level, subtracted from its figures by -paper (the paper's tables: 0.0625)")
	return func(ctx context.Context, args []string) error {
		if len(args) == 0 {
			return &argsError{"want a sweep directory (or several runs of one sweep)"}
		}
		if len(args) > 1 {
			if *quiet || *paper {
				return &argsError{"-q and -paper apply to one directory; several print the seeds table"}
			}
			// Only runs of one sweep that differ in their seed are merged; anything else is
			// refused naming what differs.
			rs, err := report.CollectSeeds(args)
			if err != nil {
				return err
			}
			// Cell names and labels come from the sweep files; the directories from the command line.
			fmt.Print(termtext.Escape(string(report.SeedsMarkdown(report.Seeds(rs), args, paperChance))))
			return nil
		}
		dir := args[0]
		r, files, err := report.Write(dir)
		if err != nil {
			return err
		}
		if !*quiet {
			plots := map[string]string{}
			for _, t := range r.Tasks() {
				plots[t] = report.PlotFile(t)
			}
			// Cell names and labels come from the sweep file.
			fmt.Print(termtext.Escape(string(r.Markdown(plots))))
		}
		if *paper {
			cs := r.Compare()
			if len(cs) == 0 {
				return fmt.Errorf("-paper: no finished cell of %s carries the paper's figures (a cell's paper entry in the sweep file)", dir)
			}
			if !*quiet {
				fmt.Println()
			}
			// Cell names and labels come from the sweep file.
			fmt.Print(termtext.Escape(string(report.PaperMarkdown(cs, paperChance))))
		}
		for _, f := range files {
			fmt.Fprintf(os.Stderr, "wrote %s\n", f)
		}
		return nil
	}
}

// isSet reports whether the flag was given on the command line, so that an explicitly empty value
// (-cells "" from an unset shell variable) is refused rather than taken for "not given".
func isSet(flags *flag.FlagSet, name string) bool {
	set := false
	flags.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
