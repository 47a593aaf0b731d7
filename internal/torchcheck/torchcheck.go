// Package torchcheck gives tests the PyTorch oracle scripts of bench/ (written apart from the Go
// code, from the published equations): a test that needs one is skipped when the script or
// /usr/bin/python3's torch is missing, unless GELOATTACK_REQUIRE_TORCH=1 (CI) makes that a failure.
package torchcheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Python is the interpreter the oracles run under (Debian's python3-torch installs there).
const Python = "/usr/bin/python3"

// Script returns the absolute path of the script at rel (relative to the test's package
// directory, e.g. "../../bench/torch_lm.py"), skipping or failing t as the package says when it
// cannot run.
func Script(t testing.TB, rel string) string {
	t.Helper()
	script, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	skip := func(why string) {
		if os.Getenv("GELOATTACK_REQUIRE_TORCH") == "1" {
			t.Fatalf("GELOATTACK_REQUIRE_TORCH=1 but %s", why)
		}
		t.Skip(why)
	}
	if _, err := os.Stat(script); err != nil {
		skip(fmt.Sprintf("%s not present: %v", rel, err))
	}
	if out, err := exec.Command(Python, "-c", "import torch").CombinedOutput(); err != nil {
		skip(fmt.Sprintf("%s has no torch (%v: %s)", Python, err, strings.TrimSpace(string(out))))
	}
	return script
}
