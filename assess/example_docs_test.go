package assess

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The worked example committed in docs/examples (docs/assessing.md) stays the report its
// results.jsonl gives: report.md and frontier.svg are recomputed from results.jsonl and
// deployment.yaml and compared byte for byte, so a change to the report's wording or figures
// must regenerate the example (and say so) instead of leaving it stale.
func TestCommittedExampleIsItsResults(t *testing.T) {
	dir := filepath.Join("..", "docs", "examples", "assess-llama2-256")
	s, err := ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{ReportMD: s.Markdown(false), FrontierSVG: s.FrontierSVG()} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the report its results.jsonl gives: regenerate the example (geloattack assess -merge, docs/examples/README.md)", name)
		}
	}
}
