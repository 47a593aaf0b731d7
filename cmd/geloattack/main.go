// Command geloattack measures how much privacy GELO obfuscation gives: it generates obfuscated
// batches from a store of hidden states, trains learned attacks, runs training-free baselines and
// reports how far each gets above chance.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"syscall"

	"github.com/gelo-research/geloattack/train"
)

// command is one subcommand: its one-line summary and the function that parses its own flags.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"train":    {"train a learned attack (default: configs/quickstart.yaml on the embedded synthetic store)", runTrain},
		"eval":     {"evaluate a run directory or checkpoint: metrics with chance levels", runEval},
		"store":    {"stores of hidden states: synth | import | info | validate | extract", runStore},
		"baseline": {"training-free attacks: rowspace | fastica | jade | fobi | jd | anchor | content", runBaseline},
		"recover":  {"sensitive-content recovery: rank candidate secrets of a templated victim text by row-space containment", runRecover},
		"bench":    {"throughput benchmarks: data generation and training steps", runBench},
		"sweep":    {"run a grid of training runs over shield settings", runSweep},
		"report":   {"merge a sweep's cells into tables and plots", runReport},
		"model":    {"decoder models: init (a random-init Hugging Face directory like llama2-7b, llama3-8b, qwen3-8b, ...)", runModel},
		"protocol": {"the GELO protocol itself: overhead benchmark (bench) and functional equality (equality)", runProtocol},
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: geloattack <command> [flags]\n\ncommands:\n")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'geloattack <command> -h' for the flags of a command. Start with 'geloattack train': it trains\n"+
		"the text-presence attack on the embedded synthetic store in about a minute and prints its metrics.\n")
}

func main() {
	if len(os.Args) < 2 {
		// People type the bare name to see what it does: show the commands rather than start a
		// training run (the main job on the embedded default is `geloattack train`).
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "--help" || name == "help" {
		usage()
		return
	}
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "geloattack: unknown command %q\n\n", name)
		usage()
		os.Exit(2)
	}
	setGCPercent()
	// The first SIGINT/SIGTERM cancels the context so long work can checkpoint and exit cleanly;
	// a second one kills the process the usual way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		if errors.Is(err, train.ErrInterrupted) {
			// Distinct from failure (1) and success (0): schedulers requeue the job and the run
			// resumes from the checkpoint just written. 130 is the shell's code for SIGINT.
			fmt.Fprintf(os.Stderr, "geloattack %s: %v\n", name, err)
			os.Exit(130)
		}
		fmt.Fprintf(os.Stderr, "geloattack %s: %v\n", name, err)
		os.Exit(1)
	}
}

// defaultGCPercent is the garbage collector's target when GOGC is not set. A training process's
// heap is mostly long-lived and pointer-free (parameters, AdamW moments, the activation arena, the
// gradient pool), while the pipeline discards every batch it hands out. With Go's default of 100
// the garbage may grow to the size of all the live memory before a collection (a paper-size run
// would creep from 7 GiB to 14 GiB); at 20 it is held to a fifth, and a collection, which scans
// almost nothing in pointer-free memory, costs about 10 ms.
const defaultGCPercent = 20

// setGCPercent applies defaultGCPercent unless the user chose with GOGC.
func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}
