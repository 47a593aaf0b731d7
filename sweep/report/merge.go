package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/gelo-research/geloattack/sweep"
)

// seedFree are the config fields that may differ between runs of one sweep with other seeds: the
// seeds themselves (the sampler's follows the run's where the sweep file left it so), the names
// the sweep gives a cell and its directory, and the settings that do not change results (as in
// config.Diff).
var seedFree = map[string]bool{
	"seed": true, "sampler.seed": true, "name": true, "out_dir": true,
	"train.workers": true, "train.prefetch": true, "device": true,
}

// CollectSeeds collects the sweep directories dirs (see Collect) for the seeds table (Seeds), after
// checking that they are runs of one sweep that differ only in their seed (`sweep -seed N -out
// DIR`): no directory named twice; the same plan (sweep name, cells, their settings, labels and
// paper figures); every finished cell's config equal to the same cell's in the other directories
// in every field but the seeds (so the same task and base); the fields no cell sets equal across
// all directories (the base, also between cells finished in different directories); and distinct
// seeds: a cell finished in two directories has two seeds, and where the seed is a base field,
// each directory's cells share one and no two directories have the same. Anything else is refused,
// naming the directories, the cell and the field with both values.
func CollectSeeds(dirs []string) ([]*Report, error) {
	if err := distinctDirs(dirs); err != nil {
		return nil, err
	}
	rs := make([]*Report, len(dirs))
	for i, d := range dirs {
		r, err := Collect(d)
		if err != nil {
			return nil, err
		}
		rs[i] = r
	}
	for _, r := range rs[1:] {
		if d := planDiff(rs[0], r); d != "" {
			return nil, fmt.Errorf("report: %s and %s are not runs of one sweep: %s", rs[0].dir, r.dir, d)
		}
	}
	if err := checkSeeds(rs); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return rs, nil
}

// distinctDirs refuses a directory named twice, under any spelling.
func distinctDirs(dirs []string) error {
	infos := make([]os.FileInfo, len(dirs))
	for i, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		for j := range i {
			if os.SameFile(infos[j], fi) {
				return fmt.Errorf("report: %s and %s are the same directory: each seed of the sweep is its own -out", dirs[j], d)
			}
		}
		infos[i] = fi
	}
	return nil
}

// planDiff says how the plan of b differs from a's, "" when it does not.
func planDiff(a, b *Report) string {
	switch {
	case a.hasPlan != b.hasPlan:
		has, not := a, b
		if b.hasPlan {
			has, not = b, a
		}
		return fmt.Sprintf("%s holds a plan (%s), %s none", has.dir, sweep.PlanFile, not.dir)
	case a.hasPlan && a.plan.Sweep != b.plan.Sweep:
		return fmt.Sprintf("sweep %q in %s, %q in %s", a.plan.Sweep, a.dir, b.plan.Sweep, b.dir)
	}
	for i := range max(len(a.plan.Cells), len(b.plan.Cells)) {
		if i >= len(a.plan.Cells) || i >= len(b.plan.Cells) {
			return fmt.Sprintf("%d cells in %s, %d in %s", len(a.plan.Cells), a.dir, len(b.plan.Cells), b.dir)
		}
		ca, cb := a.plan.Cells[i], b.plan.Cells[i]
		if ca.Name != cb.Name {
			return fmt.Sprintf("cell %d is %s in %s, %s in %s", i+1, ca.Name, a.dir, cb.Name, b.dir)
		}
		ja, _ := json.Marshal(ca)
		jb, _ := json.Marshal(cb)
		if !bytes.Equal(ja, jb) {
			return fmt.Sprintf("cell %s is %s in %s, %s in %s", ca.Name, ja, a.dir, jb, b.dir)
		}
	}
	return ""
}

// finished is one finished cell of one directory, with its config's fields by path.
type finished struct {
	dir, cell string
	seed      uint64
	fields    map[string]string
	order     []string // the paths in declaration order
}

func finishedOf(r *Report, row Row) finished {
	f := finished{dir: r.dir, cell: row.Cell, seed: row.cfg.Seed, fields: map[string]string{}}
	for _, x := range sweep.Fields(row.cfg) {
		f.fields[x.Path] = x.Value
		f.order = append(f.order, x.Path)
	}
	return f
}

// firstDiff is the first field (in declaration order) other than the seed-free ones and, when
// only is not nil, among those only accepts, where a and b differ: "path is X in A, Y in B".
func firstDiff(a, b finished, only func(path string) bool) string {
	for _, p := range a.order {
		if seedFree[p] || only != nil && !only(p) {
			continue
		}
		if va, vb := a.fields[p], b.fields[p]; va != vb {
			return fmt.Sprintf("%s is %s in %s, %s in %s", p, va, a.dir, vb, b.dir)
		}
	}
	return ""
}

// checkSeeds holds the finished cells of rs to one sweep with distinct seeds (see CollectSeeds).
func checkSeeds(rs []*Report) error {
	// The plan's settings: a field some cell sets is the cell's, every other one the base's.
	// Without a plan, the fields that differ between the finished cells of a directory.
	set := map[string]bool{}
	for _, c := range rs[0].plan.Cells {
		for _, s := range c.Settings {
			set[s.Path] = true
		}
	}
	if !rs[0].hasPlan {
		for _, r := range rs {
			var fields [][]sweep.Field
			for _, row := range r.Rows {
				fields = append(fields, sweep.Fields(row.cfg))
			}
			for _, p := range varyingPaths(fields) {
				set[p] = true
			}
		}
	}
	isBase := func(path string) bool {
		for p := path; ; {
			if set[p] {
				return false
			}
			i := strings.LastIndexByte(p, '.')
			if i < 0 {
				return true
			}
			p = p[:i]
		}
	}
	byCell := map[string]finished{} // the first directory's finished cell of each name
	var base *finished              // the first finished cell of all
	dirSeed := make([]*finished, len(rs))
	for i, r := range rs {
		for _, row := range r.Rows {
			f := finishedOf(r, row)
			// The same cell first, whose message is the most specific; then the base.
			if ref, ok := byCell[row.Cell]; ok {
				if d := firstDiff(ref, f, nil); d != "" {
					return fmt.Errorf("%s and %s are not runs of one sweep with other seeds: cell %s: %s", ref.dir, f.dir, row.Cell, d)
				}
				if ref.seed == f.seed {
					return fmt.Errorf("%s and %s both hold cell %s with seed %d: the same seed twice is not a spread over seeds",
						ref.dir, f.dir, row.Cell, f.seed)
				}
			} else {
				byCell[row.Cell] = f
			}
			if base == nil {
				base = &f
			} else if d := firstDiff(*base, f, isBase); d != "" {
				return fmt.Errorf("%s and %s are not runs of one sweep with other seeds: cells %s and %s differ in the base: %s",
					base.dir, f.dir, base.cell, f.cell, d)
			}
			if !isBase("seed") {
				continue
			}
			if s := dirSeed[i]; s == nil {
				dirSeed[i] = &f
			} else if s.seed != f.seed {
				return fmt.Errorf("cells %s and %s of %s have seeds %d and %d: a run of the sweep with one seed has one seed in every cell",
					s.cell, f.cell, r.dir, s.seed, f.seed)
			}
		}
		for j := range i {
			if a, b := dirSeed[j], dirSeed[i]; a != nil && b != nil && a.seed == b.seed {
				return fmt.Errorf("%s and %s both ran the sweep with seed %d: the same seed twice is not a spread over seeds", a.dir, b.dir, a.seed)
			}
		}
	}
	return nil
}

// varyingPaths lists the paths whose values differ between cells (of one config schema).
func varyingPaths(cells [][]sweep.Field) []string {
	if len(cells) < 2 {
		return nil
	}
	var out []string
	for k, f := range cells[0] {
		for _, c := range cells[1:] {
			if c[k].Value != f.Value {
				out = append(out, f.Path)
				break
			}
		}
	}
	return out
}
