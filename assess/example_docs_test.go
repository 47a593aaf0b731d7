package assess

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The worked examples committed in docs/examples (docs/assessing.md: a random-init
// Llama-2-7B-shaped decoder and the trained decoder of configs/lm) stay the reports their
// results.jsonl give: report.md and frontier.svg are recomputed from results.jsonl and
// deployment.yaml and compared byte for byte, so a change to the report's wording or figures
// must regenerate the example (and say so) instead of leaving it stale.
func TestCommittedExampleIsItsResults(t *testing.T) {
	for _, example := range []string{"assess-llama2-256", "assess-lm-small"} {
		dir := filepath.Join("..", "docs", "examples", example)
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
				t.Errorf("%s: %s differs from the report its results.jsonl gives: regenerate the example (geloattack assess -merge, docs/examples/README.md)", example, name)
			}
		}
	}
}
