package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// metricsLog appends one JSON object per line to metrics.jsonl. The lines hold only what is
// reproducible for a given config and seed (losses, rates, metrics), never wall-clock figures, so
// an interrupted-and-resumed run writes exactly the lines of an uninterrupted one.
type metricsLog struct {
	path string
	f    *os.File
}

// openMetricsLog opens path for appending after dropping every line of a step later than
// keepThrough (lines written after the checkpoint being resumed from) and any torn last line left
// by a crash. keepThrough < 0 starts the file afresh.
func openMetricsLog(path string, keepThrough int64) (*metricsLog, error) {
	var kept []byte
	if keepThrough >= 0 {
		old, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("metrics log %s: %w", path, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(old))
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for sc.Scan() {
			var line struct {
				Step *int64 `json:"step"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Step == nil {
				break // torn line from a crash: everything after it is suspect
			}
			if *line.Step > keepThrough {
				break
			}
			kept = append(kept, sc.Bytes()...)
			kept = append(kept, '\n')
		}
	}
	if err := os.WriteFile(path, kept, 0o644); err != nil {
		return nil, fmt.Errorf("metrics log %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics log %s: %w", path, err)
	}
	return &metricsLog{path: path, f: f}, nil
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
