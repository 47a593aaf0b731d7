package main

import (
	"context"
	"flag"

	"github.com/gelo-research/geloattack/baselines/attacks"
)

// cliAttack is how the CLI runs one attack of the registry (baselines/attacks, which says what
// each needs and answers and where it runs): an attack on baseline's flags defines its own flags
// beside them and returns its run; an attack that is a command of its own is that command.
type cliAttack struct {
	// flags defines the attack's own flags on fs and returns its run (attacks.Baseline).
	flags func(fs *flag.FlagSet) baselineRun
	// command is the attack's own command (its registry Command names it).
	command *Command
}

// baselineRun runs one attack on baseline's shared setting and returns its result (written by
// -out).
type baselineRun func(ctx context.Context, env *baselineEnv) (any, error)

// cliAttacks binds every attack the registry runs from the CLI to its flags and run, by name. A
// new attack is its registry entry and one line here; baseline's -attack help, its validation and
// dispatch, and the summaries of the attacks' own commands follow from the two.
var cliAttacks = map[string]cliAttack{
	"rowspace": {flags: rowspaceFlags},
	"fastica":  {flags: bssFlags("fastica")},
	"jade":     {flags: bssFlags("jade")},
	"fobi":     {flags: bssFlags("fobi")},
	"jd":       {flags: bssFlags("jd")},
	"anchor":   {flags: anchorFlags},
	"content":  {command: cmdRecover},
	"decode":   {command: cmdDecode},
}

// attackSummary is the registry's summary of the attack named name: the Short of its own command.
func attackSummary(name string) string {
	a, _ := attacks.Lookup(name)
	return a.Summary
}
