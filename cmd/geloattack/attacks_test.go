package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/attacks"
)

// cliAttacks binds exactly the registry's CLI attacks: each attack on baseline's flags has flags
// and a run, each attack that is a command of its own is that command of the tree, its summary
// the registry's; no binding names an attack the registry does not run from the CLI.
func TestCLIAttacksBindTheRegistry(t *testing.T) {
	onCLI := attacks.Names(attacks.OnCLI())
	for name := range cliAttacks {
		if !slices.Contains(onCLI, name) {
			t.Errorf("cliAttacks binds %q, which the registry does not run from the CLI", name)
		}
	}
	for _, a := range attacks.OnCLI() {
		b, ok := cliAttacks[a.Name]
		switch {
		case !ok:
			t.Errorf("%s: no binding in cliAttacks", a.Name)
		case a.Command == attacks.Baseline && (b.flags == nil || b.command != nil):
			t.Errorf("%s runs on baseline's flags: want flags and no command", a.Name)
		case a.Command != attacks.Baseline && (b.command == nil || b.flags != nil):
			t.Errorf("%s is command %s: want the command and no flags", a.Name, a.Command)
		case a.Command != attacks.Baseline:
			if b.command.Name != a.Command || !slices.Contains(root.Commands, b.command) || b.command.Short != a.Summary {
				t.Errorf("%s: command %q (in the tree: %v), summary %q; want %q with the registry's summary",
					a.Name, b.command.Name, slices.Contains(root.Commands, b.command), b.command.Short, a.Summary)
			}
		}
	}
}

// baseline's help, its -attack validation and its dispatch come from the registry: the summary
// and the -attack help name every CLI attack, an unknown attack is refused naming them all, an
// attack's own flag is refused with another -attack, and -attack NAME of a command of its own
// is that command's help page, with -attack among its flags.
func TestBaselineFollowsTheRegistry(t *testing.T) {
	names := attacks.Names(attacks.OnCLI())
	var page bytes.Buffer
	if err := root.run(context.Background(), root.Name, []string{"baseline", "-h"}, &page); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("baseline -h: %v", err)
	}
	if !strings.Contains(cmdBaseline.Short, strings.Join(names, " | ")) || !strings.Contains(page.String(), strings.Join(names, " | ")+" (") {
		t.Errorf("baseline's summary %q or -attack help does not list %v:\n%s", cmdBaseline.Short, names, page.String())
	}
	err := root.run(context.Background(), root.Name, []string{"baseline", "-attack", "pca"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `"pca": want `+orList(names)) {
		t.Errorf("baseline -attack pca: %v", err)
	}
	for _, c := range []struct{ args, want string }{
		{"-attack fastica -anchors 3", "-anchors applies to -attack anchor, not fastica"},
		{"-attack anchor -best-row", "-best-row applies to -attack rowspace, not anchor"},
		{"-anchor-method project", "-anchor-method applies to -attack anchor, not rowspace"},
	} {
		err := root.run(context.Background(), root.Name, append([]string{"baseline"}, strings.Fields(c.args)...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("baseline %s: %v, want %q", c.args, err, c.want)
		}
	}
	for _, a := range attacks.OnCLI() {
		if a.Command == attacks.Baseline {
			continue
		}
		var out bytes.Buffer
		err := root.run(context.Background(), root.Name, []string{"baseline", "-attack=" + a.Name, "-h"}, &out)
		if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out.String(), "usage: geloattack "+a.Command+" ") ||
			!strings.Contains(out.String(), "\n  -attack string\n") || !strings.Contains(out.String(), `(default "`+a.Name+`")`) {
			t.Errorf("baseline -attack=%s -h: %v, want %s's help with -attack:\n%s", a.Name, err, a.Command, out.String())
		}
	}
}

// An attack reached through baseline -attack has its output files checked before it runs, as
// its own command has: a copy of the command is still that command to outputFlags.
func TestBaselineDelegateChecksOutputs(t *testing.T) {
	for _, args := range [][]string{
		{"recover", "-store", "x", "-out", "/nonexistent/r.json"},
		{"baseline", "-attack", "content", "-store", "x", "-out", "/nonexistent/r.json"},
		{"baseline", "-attack", "decode", "-model", "x", "-deployer-texts", "/nonexistent/t.jsonl"},
	} {
		err := root.run(context.Background(), root.Name, args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/") || !strings.HasPrefix(err.Error(), "-") {
			t.Errorf("%v: %v, want the output flag refused before any work", args, err)
		}
	}
}
