package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/internal/safefile"
)

// metricsLog appends one JSON object per line to metrics.jsonl. The lines hold only what is
// reproducible for a given config and seed (losses, rates, metrics), never wall-clock figures, so
// an interrupted-and-resumed run writes exactly the lines of an uninterrupted one.
type metricsLog struct {
	path string
	f    *os.File
}

// openMetricsLog opens path for appending. keepThrough < 0 starts the file afresh; otherwise it
// keeps every valid line of a step up to keepThrough (the checkpoint being resumed from) and drops
// the valid lines of later steps, which the resumed run writes again. A line that is not a JSON
// object with a step (damaged, or cut by a crash) is never dropped silently: such lines go to a
// side file metrics.jsonl.damaged-<n>, and the returned note names it, the line numbers and the
// count. The log is never written through a symbolic link: one at path is refused.
func openMetricsLog(path string, keepThrough int64) (*metricsLog, []string, error) {
	var kept []byte
	var notes []string
	if keepThrough >= 0 {
		if err := safefile.CheckTarget(path); err != nil {
			return nil, nil, fmt.Errorf("metrics log: %w", err)
		}
		old, err := safefile.ReadNoFollow(path, safefile.Metrics)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("metrics log %s: %w", path, err)
		}
		var damaged []byte
		var lines []string
		for i, line := range splitLines(old) {
			var rec struct {
				Step *int64 `json:"step"`
			}
			if json.Unmarshal(line, &rec) != nil || rec.Step == nil {
				damaged = append(append(damaged, line...), '\n')
				lines = append(lines, strconv.Itoa(i+1))
				continue
			}
			if *rec.Step <= keepThrough {
				kept = append(append(kept, line...), '\n')
			}
		}
		if len(lines) > 0 {
			side, err := saveDamaged(path, damaged)
			if err != nil {
				return nil, nil, err
			}
			notes = append(notes, fmt.Sprintf("metrics log %s: %d damaged or cut line(s) (line %s) moved to %s, not kept in the log",
				path, len(lines), strings.Join(lines, ", "), side))
		}
	}
	if err := checkpoints.WriteFileAtomic(path, kept); err != nil {
		return nil, nil, fmt.Errorf("metrics log: %w", err)
	}
	f, err := safefile.OpenAppend(path, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics log: %w", err)
	}
	return &metricsLog{path: path, f: f}, notes, nil
}

// splitLines splits b into its lines without their newlines; a last line without a newline (a
// write cut by a crash) is a line too.
func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte{'\n'})
		out = append(out, line)
		b = rest
	}
	return out
}

// saveDamaged writes damaged lines to the first free path.damaged-<n> and returns its name.
func saveDamaged(path string, damaged []byte) (string, error) {
	for n := 1; ; n++ {
		side := path + ".damaged-" + strconv.Itoa(n)
		if _, err := os.Lstat(side); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := checkpoints.WriteFileAtomic(side, damaged); err != nil {
			return "", fmt.Errorf("metrics log: keep damaged lines: %w", err)
		}
		return side, nil
	}
}

// write appends one record; encoding/json sorts map keys, so a record's bytes depend on its values
// alone.
func (l *metricsLog) write(rec map[string]any) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("metrics log %s: %w", l.path, err)
	}
	b = append(b, '\n')
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("metrics log %s: %w", l.path, err)
	}
	return nil
}

func (l *metricsLog) close() error { return l.f.Close() }
