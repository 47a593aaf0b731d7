package main

import (
	"strings"
	"testing"
)

// TestBaselineBSSTableExplainsRandomRows: the classical BSS table names its comparison column as
// random rows with the number drawn per example, says what it means (the figure a random guess
// of rows reaches; above it = recovery), and reports the Gram error of SPEC §6 beside the |cos|
// figures.
func TestBaselineBSSTableExplainsRandomRows(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "10")
	out, err := cli(t, "baseline", "-attack", "fastica", "-config", cfg, "-examples", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("baseline: %v\n%s", err, out)
	}
	for _, want := range []string{
		"| figure ", "| fastica ", " draws per example) |",
		"random rows: the figure a random guess of rows reaches; above it = recovery",
		"| p95 |cos| ", "| mean |cos| ", "| Gram error ", "| Gram error, rows rescaled ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("baseline output lacks %q:\n%s", want, out)
		}
	}
}
