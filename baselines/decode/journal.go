package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// An output directory's results.jsonl holds one batch's result a line, appended (and fsynced) as
// the batch finishes, without its wall time, which timing.jsonl holds a line a batch: a batch's
// line is then the same bytes whichever run, resumed or sharded, computes it. A process killed in
// an append leaves at most a cut last line (no newline), which readLines reports and the next
// opening of the directory removes.

// resultLine is a batch's result as results.jsonl holds it, newline included.
func resultLine(r BatchResult) ([]byte, error) {
	r.Seconds = 0 // timing.jsonl's
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("decode: batch %d: encoding its result: %w", r.Index, err)
	}
	return append(b, '\n'), nil
}

// timing is one line of timing.jsonl: a batch's wall time.
type timing struct {
	Batch   int64   `json:"batch"`
	Seconds float64 `json:"seconds"`
}

// timingLine is batch r's line of timing.jsonl, its seconds to the millisecond.
func timingLine(r BatchResult) []byte {
	b, _ := json.Marshal(timing{Batch: r.Index, Seconds: math.Round(r.Seconds*1000) / 1000}) // finite numbers always encode
	return append(b, '\n')
}

// readLines reads a JSON-lines file: its whole lines (without their newlines), and whether a cut
// last line was left out. A missing file is no lines.
func readLines(files *safefile.Files, path string) (lines [][]byte, torn bool, err error) {
	b, err := files.ReadNoFollow(path, safefile.Metrics)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("decode: %w", err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		torn, b = true, b[:i+1]
	}
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte{'\n'})
		lines = append(lines, line)
		b = rest
	}
	return lines, torn, nil
}

// parseResult reads line n (1-based) of path as a batch's result.
func parseResult(path string, n int, line []byte) (BatchResult, error) {
	var r BatchResult
	if err := r.UnmarshalJSON(line); err != nil {
		return BatchResult{}, fmt.Errorf("decode: %s:%d: not a batch's result: %w", path, n, err)
	}
	return r, nil
}

// parseTiming reads line n (1-based) of path as a batch's wall time.
func parseTiming(path string, n int, line []byte) (timing, error) {
	var t timing
	if err := strictUnmarshal(line, &t); err != nil {
		return timing{}, fmt.Errorf("decode: %s:%d: not a batch's timing: %w", path, n, err)
	}
	return t, nil
}

// joinLines is lines, each with its newline.
func joinLines(lines [][]byte) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
