package assess

import (
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/baselines/attacks"
)

// The battery is the registry's: every attack attacks.Assessed lists has an implementation whose
// Name is that name, in the registry's order; every implementation is one the registry assesses;
// and what an implementation claims agrees with the registry's output kind (a ranked guess claims
// nothing, proof claims say what they prove).
func TestBatteryIsTheRegistrys(t *testing.T) {
	want := attacks.Names(attacks.Assessed())
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("battery %v, want the registry's assessed attacks %v (an assessed name without an implementation?)", got, want)
	}
	seen := map[string]bool{}
	for _, a := range implementations() {
		if seen[a.Name()] {
			t.Errorf("two implementations named %q", a.Name())
		}
		seen[a.Name()] = true
		r, ok := attacks.Lookup(a.Name())
		switch {
		case !ok:
			t.Errorf("implementation %q is not in baselines/attacks", a.Name())
		case r.Assess == 0:
			t.Errorf("implementation %q is not in the registry's battery (its Assess is 0)", a.Name())
		case r.Output == attacks.RankedGuess && a.Claimed() != "":
			t.Errorf("%s is a ranked guess in the registry but claims %q", a.Name(), a.Claimed())
		case r.Output == attacks.ProofClaims && a.Claimed() == "":
			t.Errorf("%s makes proof claims in the registry but says it claims nothing", a.Name())
		}
	}
	for _, name := range want {
		if a, ok := Lookup(name); !ok || a.Name() != name {
			t.Errorf("Lookup(%q) = %v, %v", name, a, ok)
		}
	}
}
