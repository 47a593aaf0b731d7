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
	"strings"
	"syscall"
	"time"

	"github.com/gelo-research/geloattack/train"
)

// root is the command tree: geloattack and every command below it.
var root = &Command{
	Name: "geloattack",
	Long: "Measures how much privacy GELO obfuscation gives: generates obfuscated batches from a store of hidden\n" +
		"states, trains learned attacks, runs training-free baselines and reports how far each gets above chance.\n" +
		"Start with 'geloattack train': it trains the text-presence attack on the embedded synthetic store in\n" +
		"about a minute and prints its metrics.",
}

func init() {
	// Set here rather than in root's literal: the commands refer to root (for their help) through
	// their own variables.
	root.Commands = []*Command{cmdTrain, cmdEval, cmdStore, cmdBaseline, cmdRecover, cmdDecode, cmdBench, cmdSweep, cmdReport, cmdModel, cmdProtocol, cmdAssess}
}

func main() {
	if len(os.Args) < 2 {
		// People type the bare name to see what it does: show the commands rather than start a
		// training run (the main job on the embedded default is `geloattack train`).
		root.usage(os.Stderr, root.Name, nil)
		os.Exit(2)
	}
	setGCPercent()
	// Errors are prefixed with the command named, as "geloattack store: ...".
	name := root.Name
	if cmd := root.lookup(os.Args[1:2]); cmd != root {
		name += " " + cmd.Name
	}
	leaf := root.lookup(os.Args[1:])
	// One signal context for every command: the first SIGINT/SIGTERM cancels it. A command that
	// saves its work on cancellation (train's checkpoint, sweep's running cell) is given the time it
	// needs; any other command is given interruptGrace to return (removing what it was writing)
	// and is then ended, so that no command ignores the first signal. A second signal kills the
	// process the usual way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		stop()
		if leaf.SavesOnInterrupt {
			return
		}
		select {
		case <-done:
		case <-time.After(interruptGrace):
			fmt.Fprintf(os.Stderr, "%s: interrupted\n", name)
			os.Exit(130)
		}
	}()
	err := root.run(ctx, root.Name, os.Args[1:], os.Stderr)
	close(done)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	if ctx.Err() != nil && !leaf.SavesOnInterrupt {
		// The command stopped because of the signal: say so rather than "context canceled".
		fmt.Fprintf(os.Stderr, "%s: interrupted\n", name)
		os.Exit(130)
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, errorText(err, leaf.Name))
	switch {
	case errors.Is(err, train.ErrInterrupted):
		// Distinct from failure (1) and success (0): schedulers requeue the job and the run
		// resumes from the checkpoint just written. 130 is the shell's code for SIGINT.
		os.Exit(130)
	case errors.As(err, new(*usageError)):
		os.Exit(2)
	}
	os.Exit(1)
}

// interruptGrace is how long a command that saves nothing on interruption has, after the first
// signal, to return by itself (an extraction removes its partial store) before it is ended.
const interruptGrace = 3 * time.Second

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

// errorText is err's message without a leading "<command>: " that the prefix main prints already
// names ("geloattack decode: decode: ..." reads as a stutter).
func errorText(err error, command string) string {
	msg := err.Error()
	for command != "" && strings.HasPrefix(msg, command+": ") {
		msg = msg[len(command)+2:]
	}
	return msg
}
