package attacks

import (
	"slices"
	"strings"
	"testing"
)

// The list as the help and assess read it: the CLI's attacks in help order (baseline's six, then
// the two commands of their own), assess's battery in report order, every entry complete.
func TestListIsTheCLIsAndAssesssOrder(t *testing.T) {
	if got, want := Names(OnCLI()), []string{"rowspace", "fastica", "jade", "fobi", "jd", "anchor", "content", "decode"}; !slices.Equal(got, want) {
		t.Errorf("OnCLI %v, want %v", got, want)
	}
	// content comes before decode in the help and after presence in the reports: the order is
	// the entries' Assess, not their place in the list.
	if got, want := Names(Assessed()), []string{"decode", "presence", "content", "learned"}; !slices.Equal(got, want) {
		t.Errorf("Assessed %v, want %v", got, want)
	}
	seen, places := map[string]bool{}, map[int]string{}
	for _, a := range All() {
		switch {
		case a.Name == "" || seen[a.Name]:
			t.Errorf("%q: a name empty or taken twice", a.Name)
		case a.Summary == "" || strings.Contains(a.Summary, "\n"):
			t.Errorf("%s: summary %q, want one line", a.Name, a.Summary)
		case a.Needs == 0 || a.Needs.String() == "nothing":
			t.Errorf("%s needs nothing: every attack needs a store or a model", a.Name)
		case a.Output != RankedGuess && a.Output != ProofClaims:
			t.Errorf("%s: output %v", a.Name, a.Output)
		case a.Command == "" && a.Assess == 0:
			t.Errorf("%s runs nowhere: no command and not in assess", a.Name)
		case a.Assess < 0:
			t.Errorf("%s: assess place %d", a.Name, a.Assess)
		case a.Assess > 0 && places[a.Assess] != "":
			t.Errorf("%s and %s share assess's place %d", places[a.Assess], a.Name, a.Assess)
		}
		if a.Assess > 0 {
			places[a.Assess] = a.Name
		}
		seen[a.Name] = true
		if b, ok := Lookup(a.Name); !ok || b != a {
			t.Errorf("Lookup(%q) = %+v, %v", a.Name, b, ok)
		}
	}
	if _, ok := Lookup("pca"); ok {
		t.Error("Lookup found an attack the list does not hold")
	}
}

// All hands out a copy: changing it changes no later answer.
func TestAllIsACopy(t *testing.T) {
	as := All()
	as[0].Name, as[0].Command = "changed", ""
	if All()[0].Name != "rowspace" || Names(OnCLI())[0] != "rowspace" {
		t.Error("All returned the list itself")
	}
}

// What each kind of need and output says, as reports print it.
func TestNeedsAndOutputInWords(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{(Store | Model).String(), "a store, the store's model"},
		{Decoder.String(), "a decoder model"},
		{(Decoder | Trained).String(), "a decoder model, a trained attack"},
		{Needs(0).String(), "nothing"},
		{RankedGuess.String(), "ranked guess"},
		{ProofClaims.String(), "proof claims (and a ranked guess, labelled, where unproven)"},
		{Output(0).String(), "unknown"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if a, _ := Lookup("content"); a.Output != ProofClaims || a.Needs != Store|Model || a.Command != "recover" {
		t.Errorf("content: %+v", a)
	}
}
