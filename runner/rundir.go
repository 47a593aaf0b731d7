package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// RunFiles are the files a run writes in its directory beside its checkpoints
// (ckpt-<step>.safetensors and their temporaries) and the damaged-metrics side files; a task-lm
// run also keeps its tokenizer there.
var RunFiles = []string{"config.yaml", "metrics.jsonl", IdentityFile, "report.json", "report.md", "latest", "eval.json", "eval.md",
	RunTokenizerFile, RunTokenizerConfigFile}

// CheckRunDir refuses a run directory where one of the files a run writes (RunFiles, a
// checkpoint, a metrics side file, or one of extra) is a symbolic link, FIFO, device or directory,
// naming it. Train checks before it writes anything, so such a directory is left exactly as it
// was rather than half rewritten; the writes refuse them too (see safefile.CheckTarget).
func CheckRunDir(dir string, extra ...string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run directory %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() || !isRunFile(e.Name(), extra) {
			continue
		}
		if err := safefile.CheckTarget(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("run directory %s: %w", dir, err)
		}
	}
	return nil
}

// isRunFile reports whether name is a file a run (or the caller, extra) writes.
func isRunFile(name string, extra []string) bool {
	for _, f := range append(RunFiles, extra...) {
		if name == f {
			return true
		}
	}
	return strings.HasPrefix(name, "ckpt-") && strings.HasSuffix(name, ".safetensors") ||
		strings.HasPrefix(name, "metrics.jsonl.damaged-")
}
