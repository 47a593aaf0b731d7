// Package attacks is the one list of the attacks geloattack runs: per attack its name, a one-line
// summary, what it needs, what its output is, and where it runs (under `geloattack baseline
// -attack NAME`, as a command of its own, in `geloattack assess`'s battery). The CLI binds each
// entry to its flags and its run (cmd/geloattack's cliAttacks) and writes `baseline`'s -attack
// help, its validation and its dispatch, and the summaries of `recover` and `decode`, from this
// list; assess lists its battery from Assessed, in the explicit report order of each entry's
// Assess. The list holds no code of an attack, so it sits low enough for both to import it (the
// runs are the CLI's and assess's).
//
// The learned attacks are trained by `geloattack train` (model.task); the list holds the one that
// assess runs from a trained run (learned).
package attacks

import (
	"slices"
	"strings"
)

// Needs is what an attack needs besides the obfuscated rows it attacks.
type Needs uint8

const (
	// Store is a store of hidden states (the config's: the synthetic one by default), whose texts
	// make the examples and the candidates.
	Store Needs = 1 << iota
	// Model is the weights of the model a store was extracted with (an encoder or a decoder),
	// to compute candidates' rows as the deployer did.
	Model
	// Decoder is a decoder's weights and tokenizer (a Hugging Face directory): the attacker runs
	// its forward pass on prefixes or candidate texts.
	Decoder
	// Trained is a trained attack: a `geloattack train` run directory.
	Trained
)

// String names the needs: "a store, the store's model".
func (n Needs) String() string {
	var s []string
	if n&Store != 0 {
		s = append(s, "a store")
	}
	if n&Model != 0 {
		s = append(s, "the store's model")
	}
	if n&Decoder != 0 {
		s = append(s, "a decoder model")
	}
	if n&Trained != 0 {
		s = append(s, "a trained attack")
	}
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

// Output is the kind of answer an attack gives.
type Output uint8

const (
	// RankedGuess is a guess scored against the truth (a ranking of candidates, or an estimate of
	// the clean rows beside what a random guess reaches): the attack never claims.
	RankedGuess Output = iota + 1
	// ProofClaims is claims that U proves (under the deployer's declared recomputation error),
	// beside a ranked guess labelled as such where it cannot prove.
	ProofClaims
)

// String is the output's kind in words.
func (o Output) String() string {
	switch o {
	case RankedGuess:
		return "ranked guess"
	case ProofClaims:
		return "proof claims (and a ranked guess, labelled, where unproven)"
	}
	return "unknown"
}

// Baseline is the Command of the attacks that share `geloattack baseline`'s flags.
const Baseline = "baseline"

// Attack is one attack of the list.
type Attack struct {
	// Name is the attack's -attack value and its key in assess's attacker.attacks.
	Name string
	// Summary is one line: what the attack does (the help's summary of its command).
	Summary string
	// Needs is what it needs besides the rows it attacks.
	Needs Needs
	// Output is what it answers.
	Output Output
	// Command is where the CLI runs it: Baseline (`baseline -attack NAME`, on baseline's flags),
	// the name of a command of its own with its own flags (which `baseline -attack NAME` selects
	// too), or "" when only assess runs it.
	Command string
	// Assess is the attack's place in `geloattack assess`'s battery (1 first): its reports list
	// the attacks in this order, whatever the list's (help) order; 0: not in the battery. Each
	// assessed attack has its own place.
	Assess int
}

// all is the list, in the order the help names the attacks.
var all = []Attack{
	// rowspace's claims are exclusions, as presence's: a candidate text none of whose possible
	// samples passes the row bound every row of X meets is proven absent (baselines/presence).
	{Name: "rowspace", Needs: Store, Output: ProofClaims, Command: Baseline,
		Summary: "row-space containment retrieval: candidate texts ranked by how much of their rows lies in rowspace(U_obs), decoys proven absent by a row bound"},
	{Name: "fastica", Needs: Store, Output: RankedGuess, Command: Baseline,
		Summary: "FastICA separation of U's rows, scored by |cos| to the clean rows against random rows"},
	{Name: "jade", Needs: Store, Output: RankedGuess, Command: Baseline,
		Summary: "JADE separation of U's rows, scored by |cos| to the clean rows against random rows"},
	{Name: "fobi", Needs: Store, Output: RankedGuess, Command: Baseline,
		Summary: "FOBI separation of U's rows, scored by |cos| to the clean rows against random rows"},
	{Name: "jd", Needs: Store, Output: RankedGuess, Command: Baseline,
		Summary: "SOBI-style joint diagonalisation of U's rows, scored by |cos| to the clean rows against random rows"},
	{Name: "anchor", Needs: Store, Output: RankedGuess, Command: Baseline,
		Summary: "separation given k clean rows the attacker knows, scored by |cos| to the other clean rows"},
	// content is assessed on a decoder's rows (assess computes them from the deployment's model;
	// recover reads a store's), after presence.
	{Name: "content", Needs: Store | Model, Output: ProofClaims, Command: "recover", Assess: 3,
		Summary: "sensitive-content recovery: rank candidate secrets of a templated victim text by row-space containment (residual, leverage, top-k)"},
	{Name: "decode", Needs: Decoder, Output: ProofClaims, Command: "decode", Assess: 1,
		Summary: "prompt decoding: read whole prompts back from one GELO batch of a decoder, training-free"},
	// presence's claims are exclusions: a text with a row above a bound every row of X meets is
	// proven absent; no text is claimed present.
	{Name: "presence", Needs: Decoder, Output: ProofClaims, Assess: 2,
		Summary: "text presence: prove decoys absent by a row bound every row of the batch meets, at every scored block"},
	{Name: "learned", Needs: Decoder | Trained, Output: RankedGuess, Assess: 4,
		Summary: "learned text presence: a trained set transformer ranks each prompt among the batch's decoys"},
}

// All returns the list, in help order (a copy: the caller may keep or change it).
func All() []Attack { return slices.Clone(all) }

// Lookup returns the attack named name.
func Lookup(name string) (Attack, bool) {
	for _, a := range all {
		if a.Name == name {
			return a, true
		}
	}
	return Attack{}, false
}

// OnCLI lists the attacks `geloattack baseline -attack` selects, in help order: those with a
// Command.
func OnCLI() []Attack {
	var out []Attack
	for _, a := range all {
		if a.Command != "" {
			out = append(out, a)
		}
	}
	return out
}

// Assessed lists assess's battery, in report order (Attack.Assess).
func Assessed() []Attack {
	var out []Attack
	for _, a := range all {
		if a.Assess > 0 {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b Attack) int { return a.Assess - b.Assess })
	return out
}

// Names lists the names of as.
func Names(as []Attack) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Name
	}
	return out
}
