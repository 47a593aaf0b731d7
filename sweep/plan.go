package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/runner"
)

// Files a sweep and its cells hold, by name.
const (
	// PlanFile, in a sweep's output directory, lists every cell of the sweep, so that a report
	// can name the cells that have not finished rather than silently leave them out.
	PlanFile = "sweep.json"
	// ReportFile, in a cell's directory, marks a finished cell (written last by runner.Train).
	ReportFile = "report.json"
	// ConfigFile, in a cell's directory, is the cell's resolved run config.
	ConfigFile = "config.yaml"
	// ErrorFile, in a cell's directory, holds the error of the cell's last failed attempt.
	ErrorFile = "error.txt"
)

// Plan is what PlanFile holds: the sweep's name and its cells in expansion order. It depends only
// on the sweep file, so every shard writes the same bytes.
type Plan struct {
	// Sweep is the sweep's name.
	Sweep string `json:"sweep"`
	// Cells are the cells in expansion order.
	Cells []PlanCell `json:"cells"`
}

// PlanCell is one cell of a Plan.
type PlanCell struct {
	// Name is the cell's directory name.
	Name string `json:"name"`
	// Settings are the fields the cell overrides, in the cell's order.
	Settings []PlanSetting `json:"settings"`
	// Label is the cell's label (e.g. "R7"), absent when it has none.
	Label string `json:"label,omitempty"`
	// Paper is the paper's figures for the cell's setting, absent when the cell has none.
	Paper *Reference `json:"paper,omitempty"`
}

// PlanSetting is one overridden field.
type PlanSetting struct {
	// Path is the dotted YAML path.
	Path string `json:"path"`
	// Value is the value, numbers as float64 and mappings as objects.
	Value any `json:"value"`
}

// Plan returns the sweep's plan.
func (sw *Sweep) Plan() Plan {
	p := Plan{Sweep: sw.Name, Cells: make([]PlanCell, len(sw.Cells))}
	for i, c := range sw.Cells {
		pc := PlanCell{Name: c.Name, Settings: []PlanSetting{}, Label: c.Label, Paper: c.Paper}
		for _, s := range c.Settings {
			pc.Settings = append(pc.Settings, PlanSetting{Path: s.Path, Value: Canonical(s.Value)})
		}
		p.Cells[i] = pc
	}
	return p
}

func (p Plan) encode() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("sweep plan: %w", err)
	}
	return append(b, '\n'), nil
}

// writePlan records the plan in dir, or checks that dir already holds this sweep's plan: a
// directory of another sweep (or of an edited one, whose cells changed) is refused rather than
// mixed into one report.
func writePlan(dir string, p Plan) error {
	b, err := p.encode()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, PlanFile)
	old, err := safefile.ReadNoFollow(path, safefile.SweepState)
	switch {
	case err == nil && bytes.Equal(old, b):
		return nil
	case err == nil:
		return fmt.Errorf("%s holds the plan of a different sweep (or of this one before its cells changed); "+
			"choose another -out, or delete %s to adopt the new plan (finished cells whose config is unchanged are kept)", path, path)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sweep plan: %w", err)
	}
	return checkpoints.WriteFileAtomic(path, b)
}

// ReadPlan reads the plan of the sweep in dir.
func ReadPlan(dir string) (Plan, error) {
	path := filepath.Join(dir, PlanFile)
	b, err := safefile.Read(path, safefile.SweepState)
	if err != nil {
		return Plan{}, fmt.Errorf("sweep plan: %w", err)
	}
	var p Plan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("sweep plan %s: %w", path, err)
	}
	for i, c := range p.Cells {
		if c.Name == "" || strings.ContainsAny(c.Name, `/\`) || c.Name == "." || c.Name == ".." {
			return Plan{}, fmt.Errorf("sweep plan %s: cell %d has an invalid name %q", path, i+1, c.Name)
		}
	}
	return p, nil
}

// Status is what a cell's directory says about the cell.
type Status struct {
	// Exists is whether the directory exists.
	Exists bool
	// Finished is whether report.json is present.
	Finished bool
	// Checkpoint is the step of the latest checkpoint, -1 when there is none.
	Checkpoint int64
	// Failure is the first line of error.txt, the error of the last failed attempt, if any.
	Failure string
}

// CheckCellDir refuses a cell directory that is a symbolic link, naming it and its target: a
// sweep makes its cells as directories, so a link there was planted, and following it would
// read (or train into) a run outside the sweep. A missing directory is no error.
func CheckCellDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	target, _ := os.Readlink(dir)
	return fmt.Errorf("cell %s is a symbolic link (to %s), not a directory the sweep made: refused", dir, target)
}

// Inspect reads a cell directory's status; a cell directory that is a link is refused
// (CheckCellDir).
func Inspect(dir string) (Status, error) {
	st := Status{Checkpoint: -1}
	if err := CheckCellDir(dir); err != nil {
		return st, err
	}
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return st, nil
		}
		return st, fmt.Errorf("cell %s: %w", dir, err)
	}
	st.Exists = true
	// A cell's files are never links, FIFOs or directories: one planted there is refused
	// before it is taken for a finished report or read.
	if err := runner.CheckRunDir(dir, ErrorFile); err != nil {
		return st, fmt.Errorf("cell %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ReportFile)); err == nil {
		st.Finished = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("cell %s: %w", dir, err)
	}
	if _, step, err := checkpoints.LatestPath(dir); err == nil {
		st.Checkpoint = step
	} else if !errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("cell %s: %w", dir, err)
	}
	if b, err := safefile.Read(filepath.Join(dir, ErrorFile), safefile.SweepState); err == nil {
		st.Failure, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	}
	return st, nil
}

// Describe says in words how far the cell got.
func (st Status) Describe() string {
	switch {
	case st.Finished:
		return "finished"
	case st.Failure != "" && st.Checkpoint >= 0:
		return fmt.Sprintf("failed (checkpoint at step %d): %s", st.Checkpoint, st.Failure)
	case st.Failure != "":
		return "failed: " + st.Failure
	case st.Checkpoint >= 0:
		return fmt.Sprintf("unfinished (checkpoint at step %d)", st.Checkpoint)
	case st.Exists:
		return "started, no checkpoint yet"
	}
	return "not started"
}
