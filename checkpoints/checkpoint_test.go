package checkpoints

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// run is one training state: weights, resume state and caller metadata, tagged by a value that
// makes every tensor of one run differ from every other run's.
type run struct {
	weights []Tensor
	state   State
	meta    map[string]string
}

func makeRun(step int64, tag float32) run {
	fill := func(n int, off float32) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = tag*1000 + off + float32(i)
		}
		return d
	}
	weights := []Tensor{
		{Name: "cls", Shape: []int{4}, Data: fill(4, 0)},
		{Name: "in_proj.weight", Shape: []int{4, 3}, Data: fill(12, 100)},
		{Name: "norm.weight", Shape: []int{4}, Data: fill(4, 200)},
	}
	// The last elements are the smallest subnormal and negative zero, so resume must be bit-exact,
	// not merely close. (NaN payloads round-trip through Save and Load; a checkpoint refuses NaN.)
	weights[2].Data[2] = f32(0x00000001)
	weights[2].Data[3] = f32(0x80000000)
	moments := func(off float32) []Tensor {
		return []Tensor{
			{Name: "in_proj.weight", Shape: []int{4, 3}, Data: fill(12, off)},
			{Name: "cls", Shape: []int{4}, Data: fill(4, off+50)},
		}
	}
	return run{
		weights: weights,
		state: State{
			Step:      step,
			NextBatch: step*8 + 3,
			Seed:      math.MaxUint64 - uint64(step),
			RNG:       map[string][]byte{"dropout": {1, 2, 3, byte(step)}, "empty": {}},
			AdamM:     moments(300),
			AdamV:     moments(400),
			BestStep:  step - 1,
			Best:      map[string]float64{"val/mass": 0.1 + float64(tag), "train/mass": math.Inf(1)},
			Last:      map[string]float64{"loss": math.NaN(), "val/mass": -0.0, "tiny": 5e-324},
		},
		meta: map[string]string{MetaConfig: fmt.Sprintf(`{"layers":2,"tag":%v}`, tag)},
	}
}

// sortedByName returns a copy of ts in the order a checkpoint file holds them.
func sortedByName(ts []Tensor) []Tensor {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sameFloatMaps(t *testing.T, label string, got, want map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", label, got, want)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || math.Float64bits(g) != math.Float64bits(w) && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Fatalf("%s[%q] = %v, want %v", label, k, g, w)
		}
	}
}

// sameCheckpoint checks that ckpt holds exactly r.
func sameCheckpoint(t *testing.T, ckpt Checkpoint, r run) {
	t.Helper()
	sameTensors(t, ckpt.Weights, sortedByName(r.weights))
	sameTensors(t, ckpt.State.AdamM, sortedByName(r.state.AdamM))
	sameTensors(t, ckpt.State.AdamV, sortedByName(r.state.AdamV))
	sameMeta(t, ckpt.Metadata, r.meta)
	g, w := ckpt.State, r.state
	if g.Step != w.Step || g.NextBatch != w.NextBatch || g.Seed != w.Seed || g.BestStep != w.BestStep {
		t.Fatalf("scalars: got step %d next %d seed %d best %d, want %d %d %d %d",
			g.Step, g.NextBatch, g.Seed, g.BestStep, w.Step, w.NextBatch, w.Seed, w.BestStep)
	}
	if !maps.EqualFunc(g.RNG, w.RNG, bytes.Equal) {
		t.Fatalf("RNG: got %v, want %v", g.RNG, w.RNG)
	}
	sameFloatMaps(t, "Best", g.Best, w.Best)
	sameFloatMaps(t, "Last", g.Last, w.Last)
}

func saveRun(t *testing.T, h fsHooks, dir string, r run) error {
	t.Helper()
	return h.saveCheckpoint(dir, r.state.Step, r.weights, r.state, r.meta)
}

func TestCheckpointRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := LoadLatest(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty run directory: error %v, want fs.ErrNotExist", err)
	}
	r := makeRun(120, 1)
	if err := SaveCheckpoint(dir, 120, r.weights, r.state, r.meta); err != nil {
		t.Fatal(err)
	}
	ckpt, err := LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, ckpt, r)
	if !ckpt.Verified || len(ckpt.Notes) != 0 {
		t.Fatalf("Verified %v, notes %q: a new checkpoint carries checksums", ckpt.Verified, ckpt.Notes)
	}
	if want := filepath.Join(dir, "ckpt-120.safetensors"); ckpt.Path != want {
		t.Fatalf("path %s, want %s", ckpt.Path, want)
	}
	pointer, err := os.ReadFile(filepath.Join(dir, LatestFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(pointer) != "ckpt-120.safetensors\n" {
		t.Fatalf("latest = %q", pointer)
	}
	// The file is an ordinary safetensors file: its weights load by name for a model, ignoring
	// nothing and hiding nothing.
	tensors, meta, err := Load(ckpt.Path)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(tensors))
	for i, ts := range tensors {
		names[i] = ts.Name
	}
	wantNames := []string{"adam.m.cls", "adam.m.in_proj.weight", "adam.v.cls", "adam.v.in_proj.weight", "cls", "in_proj.weight", "norm.weight"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("tensor names %v, want %v", names, wantNames)
	}
	if meta["format"] != "pt" || meta["geloattack.step"] != "120" || meta["geloattack.next_batch"] != "963" ||
		meta["geloattack.version"] != "2" || meta[MetaConfig] != r.meta[MetaConfig] || meta["geloattack.last"] != `{"loss":"NaN","tiny":"5e-324","val/mass":"0"}` {
		t.Fatalf("metadata %v", meta)
	}
	dst := map[string][]float32{}
	var specs []Spec
	for _, w := range r.weights {
		dst[w.Name] = make([]float32, len(w.Data))
		specs = append(specs, Spec{w.Name, w.Shape})
	}
	if err := CopyInto(ckpt.Weights, specs, dst); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointWithoutMoments(t *testing.T) {
	dir := t.TempDir()
	r := makeRun(0, 2)
	r.state = State{}
	if err := SaveCheckpoint(dir, 0, r.weights, r.state, nil); err != nil {
		t.Fatal(err)
	}
	ckpt, err := LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.meta = map[string]string{}
	r.state.RNG, r.state.Best, r.state.Last = map[string][]byte{}, map[string]float64{}, map[string]float64{}
	sameCheckpoint(t, ckpt, r)
}

func TestSaveCheckpointRejectsBadInput(t *testing.T) {
	good := makeRun(5, 1)
	cases := []struct {
		name   string
		mutate func(r *run, step *int64)
		want   string
	}{
		{"step mismatch", func(r *run, step *int64) { *step = 6 }, "state.Step is 5, not the step 6"},
		{"negative step", func(r *run, step *int64) { *step = -1; r.state.Step = -1 }, "negative step -1"},
		{"negative next batch", func(r *run, _ *int64) { r.state.NextBatch = -2 }, "NextBatch is negative"},
		{"reserved weight name", func(r *run, _ *int64) { r.weights[0].Name = "adam.m.x" }, `weight "adam.m.x"`},
		{"moment without weight", func(r *run, _ *int64) { r.state.AdamM[0].Name = "ghost" }, `moment "ghost" has no weight`},
		{"moment wrong shape", func(r *run, _ *int64) { r.state.AdamV[0].Shape = []int{3, 4} }, `moment "in_proj.weight" has shape [3 4], its weight has [4 3]`},
		{"m without v", func(r *run, _ *int64) { r.state.AdamV = r.state.AdamV[:1] }, `weight "cls" has a first moment but no second moment`},
		{"duplicate moment", func(r *run, _ *int64) { r.state.AdamM[1] = r.state.AdamM[0] }, `moment "in_proj.weight" appears twice`},
		{"reserved metadata format", func(r *run, _ *int64) { r.meta["format"] = "pt" }, `metadata key "format" is reserved`},
		{"reserved metadata prefix", func(r *run, _ *int64) { r.meta["geloattack.step"] = "1" }, `metadata key "geloattack.step" is reserved`},
		{"moment data length", func(r *run, _ *int64) { r.state.AdamM[0].Data = r.state.AdamM[0].Data[:5] }, "has 12 elements but data has 5"},
		{"bad metric name", func(r *run, _ *int64) { r.state.Best["\xff"] = 1 }, "state.Best key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := makeRun(5, 1)
			r.meta = maps.Clone(good.meta)
			step := r.state.Step
			c.mutate(&r, &step)
			err := SaveCheckpoint(dir, step, r.weights, r.state, r.meta)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Fatalf("rejected save left %v", entries)
			}
		})
	}
}

func TestLoadCheckpointRejectsDamagedState(t *testing.T) {
	r := makeRun(7, 1)
	tensors, err := checkpointTensors(r.weights, r.state)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := encodeState(r.state, r.meta)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		meta    func(m map[string]string)
		tensors func(ts []Tensor) []Tensor
		want    string
	}{
		{"plain weights file", func(m map[string]string) { delete(m, "geloattack.kind") }, nil, "not a checkpoint file"},
		{"future version", func(m map[string]string) { m["geloattack.version"] = "3" }, nil, `geloattack.version is "3"; this build reads versions 1 and 2`},
		{"unknown reserved key", func(m map[string]string) { m["geloattack.extra"] = "x" }, nil, `unknown metadata key "geloattack.extra"`},
		{"bad step", func(m map[string]string) { m["geloattack.step"] = "-3" }, nil, `geloattack.step is "-3"`},
		{"missing next batch", func(m map[string]string) { delete(m, "geloattack.next_batch") }, nil, `geloattack.next_batch is ""`},
		{"bad seed", func(m map[string]string) { m["geloattack.seed"] = "x" }, nil, `geloattack.seed is "x"`},
		{"bad rng", func(m map[string]string) { m["geloattack.rng"] = `{"a":"!!"}` }, nil, "geloattack.rng"},
		{"bad metric", func(m map[string]string) { m["geloattack.best"] = `{"a":"high"}` }, nil, `metric "a": value "high" is not a float`},
		{"wrong format", func(m map[string]string) { m["format"] = "np" }, nil, `format is "np"`},
		{"orphan moment", nil, func(ts []Tensor) []Tensor {
			return append(ts, Tensor{Name: "adam.m.ghost", Shape: []int{1}, Data: []float32{0}})
		}, `moment "ghost" has no weight`},
		{"unknown adam tensor", nil, func(ts []Tensor) []Tensor {
			return append(ts, Tensor{Name: "adam.step", Shape: []int{1}, Data: []float32{0}})
		}, `tensor "adam.step"`},
		{"missing second moment", nil, func(ts []Tensor) []Tensor {
			return slices.DeleteFunc(ts, func(t Tensor) bool { return t.Name == "adam.v.cls" })
		}, `weight "cls" has a first moment but no second moment`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, ts := maps.Clone(meta), slices.Clone(tensors)
			if c.meta != nil {
				c.meta(m)
			}
			if c.tensors != nil {
				ts = c.tensors(ts)
			}
			// Sealed after the damage, so that the checksums hold and the state checks are reached.
			m, err := seal(ts, m)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), CheckpointName(7))
			if err := Save(path, ts, m); err != nil {
				t.Fatal(err)
			}
			_, err = LoadCheckpoint(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming the file and containing %q", err, c.want)
			}
		})
	}
}

func TestLatestPointerValidation(t *testing.T) {
	r := makeRun(3, 1)
	cases := []struct {
		name    string
		pointer string
		want    string
	}{
		{"path traversal", "../../etc/passwd\n", "is not a checkpoint file name"},
		{"absolute path", "/tmp/ckpt-3.safetensors\n", "is not a checkpoint file name"},
		{"leading zero", "ckpt-03.safetensors\n", "is not a checkpoint file name"},
		{"sign", "ckpt-+3.safetensors\n", "is not a checkpoint file name"},
		{"empty", "", "is not a checkpoint file name"},
		{"two lines", "ckpt-3.safetensors\nckpt-3.safetensors\n", "is not a checkpoint file name"},
		{"huge", strings.Repeat("x", 10000), "limit of 256 bytes"},
		{"missing target", "ckpt-4.safetensors\n", "ckpt-4.safetensors, which is missing"},
		{"step disagrees with file", "ckpt-9.safetensors\n", "file name says step 9, metadata says 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := saveRun(t, fsHooks{}, dir, r); err != nil {
				t.Fatal(err)
			}
			if c.name == "step disagrees with file" {
				if err := os.Rename(filepath.Join(dir, CheckpointName(3)), filepath.Join(dir, CheckpointName(9))); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, LatestFile), []byte(c.pointer), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadLatest(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a damaged directory reads as a fresh start: %v", err)
			}
			if _, err := Prune(dir, 1); err == nil && c.name != "missing target" && c.name != "step disagrees with file" {
				t.Fatal("Prune went ahead with an unreadable pointer")
			}
		})
	}
	// A pointer without the trailing newline (hand-edited) is accepted.
	dir := t.TempDir()
	if err := saveRun(t, fsHooks{}, dir, r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, LatestFile), []byte("ckpt-3.safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadLatest(dir); err != nil {
		t.Fatal(err)
	}
}

// snapshotDir returns the name and content of every file in dir.
func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	snap := make(map[string][]byte, len(entries))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		snap[e.Name()] = b
	}
	return snap
}

func restoreDir(t *testing.T, snap map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range snap {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestKillAtAnyMoment stops a save at every step it takes (each hook point, before each buffered
// write of 64 bytes, and after the save) by copying the run directory as the process would leave it
// if killed there, then resumes from each copy: the latest pointer must always name a complete
// checkpoint equal to the old run or the new one, never a mix, and stale temporary files must not
// disturb a following save. Saving the same step again (a resume that checkpoints before its first
// update) is covered too.
func TestKillAtAnyMoment(t *testing.T) {
	for _, sameStep := range []bool{false, true} {
		t.Run(fmt.Sprintf("same step %v", sameStep), func(t *testing.T) {
			dir := t.TempDir()
			oldRun, newRun := makeRun(10, 1), makeRun(20, 2)
			if sameStep {
				newRun = makeRun(10, 2)
			}
			if err := saveRun(t, fsHooks{}, dir, oldRun); err != nil {
				t.Fatal(err)
			}
			var snaps []map[string][]byte
			var points []string
			h := fsHooks{chunk: 64, at: func(op, path string) error {
				snaps = append(snaps, snapshotDir(t, dir))
				points = append(points, op+" "+filepath.Base(path))
				return nil
			}}
			if err := saveRun(t, h, dir, newRun); err != nil {
				t.Fatal(err)
			}
			if _, err := h.prune(dir, 1); err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, snapshotDir(t, dir))
			points = append(points, "done")

			partialWrites := 0
			for _, p := range points {
				if strings.HasPrefix(p, "write ") {
					partialWrites++
				}
			}
			if partialWrites < 10 {
				t.Fatalf("only %d write points observed: %v", partialWrites, points)
			}
			sawOld, sawNew := 0, 0
			for i, snap := range snaps {
				restored := restoreDir(t, snap)
				ckpt, err := LoadLatest(restored)
				if err != nil {
					t.Fatalf("killed at %q: %v", points[i], err)
				}
				if ckpt.Metadata[MetaConfig] == oldRun.meta[MetaConfig] {
					sameCheckpoint(t, ckpt, oldRun)
					sawOld++
				} else {
					sameCheckpoint(t, ckpt, newRun)
					sawNew++
				}
				// The next save after a crash must succeed and clean up the crash's leftovers.
				if err := saveRun(t, fsHooks{}, restored, newRun); err != nil {
					t.Fatalf("killed at %q, then saving again: %v", points[i], err)
				}
				for name := range snapshotDir(t, restored) {
					if strings.HasPrefix(name, ".") {
						t.Fatalf("killed at %q: temporary file %s survived the next save", points[i], name)
					}
				}
				after, err := LoadLatest(restored)
				if err != nil {
					t.Fatal(err)
				}
				sameCheckpoint(t, after, newRun)
			}
			if sawOld == 0 || sawNew == 0 {
				t.Fatalf("old seen %d times, new %d times: the simulation did not cover the switch", sawOld, sawNew)
			}
			t.Logf("%d kill points: %d resumed the old checkpoint, %d the new", len(snaps), sawOld, sawNew)
		})
	}
}

// TestFailureAtEachStep makes each step of a checkpoint save fail in turn (a write error, a full
// disk, a failing rename...) and checks that the error is reported, the previous checkpoint file
// is byte-for-byte unchanged unless the new one already replaced it, the pointer names a complete
// checkpoint, and no temporary file remains.
func TestFailureAtEachStep(t *testing.T) {
	for _, sameStep := range []bool{false, true} {
		t.Run(fmt.Sprintf("same step %v", sameStep), func(t *testing.T) {
			oldRun, newRun := makeRun(10, 1), makeRun(20, 2)
			if sameStep {
				newRun = makeRun(10, 2)
			}
			base := t.TempDir()
			if err := saveRun(t, fsHooks{}, base, oldRun); err != nil {
				t.Fatal(err)
			}
			// A leftover from an earlier crash, so the cleanup step is among those that fail.
			if err := os.WriteFile(filepath.Join(base, ".ckpt-20.safetensors.tmp-1"), []byte("junk"), 0o644); err != nil {
				t.Fatal(err)
			}
			initial := snapshotDir(t, base)
			oldFile := initial[CheckpointName(10)]

			var points []string
			count := fsHooks{chunk: 64, at: func(op, path string) error {
				points = append(points, op+" "+filepath.Base(path))
				return nil
			}}
			if err := saveRun(t, count, restoreDir(t, initial), newRun); err != nil {
				t.Fatal(err)
			}
			injected := errors.New("injected failure")
			for k, point := range points {
				dir := restoreDir(t, initial)
				calls := 0
				h := fsHooks{chunk: 64, at: func(op, path string) error {
					calls++
					if calls == k+1 {
						return injected
					}
					return nil
				}}
				err := saveRun(t, h, dir, newRun)
				if !errors.Is(err, injected) {
					t.Fatalf("failing at %q: error %v, want the injected one", point, err)
				}
				ckpt, err := LoadLatest(dir)
				if err != nil {
					t.Fatalf("failing at %q: %v", point, err)
				}
				snap := snapshotDir(t, dir)
				// The new checkpoint is what resumes exactly when the failing step comes after the
				// rename that makes it visible: of the pointer, or of the file itself when it
				// replaces the checkpoint the pointer already names.
				visibleAfter := slices.Index(points, "rename "+LatestFile)
				if sameStep {
					visibleAfter = slices.Index(points, "rename "+CheckpointName(10))
				}
				if visibleAfter < 0 {
					t.Fatalf("rename point missing from %v", points)
				}
				if k > visibleAfter {
					sameCheckpoint(t, ckpt, newRun)
				} else {
					sameCheckpoint(t, ckpt, oldRun)
				}
				replaced := sameStep && k > visibleAfter
				if !replaced && !bytes.Equal(snap[CheckpointName(10)], oldFile) {
					t.Fatalf("failing at %q: the old checkpoint file changed", point)
				}
				for name := range snap {
					if strings.HasPrefix(name, ".") && !(strings.HasPrefix(point, "remove") && name == ".ckpt-20.safetensors.tmp-1") {
						t.Fatalf("failing at %q: temporary file %s left behind", point, name)
					}
				}
			}
			t.Logf("%d failure points checked", len(points))
		})
	}
}

func TestSaveFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	old := []Tensor{{Name: "a", Shape: []int{2}, Data: []float32{1, 2}}}
	if err := Save(path, old, nil); err != nil {
		t.Fatal(err)
	}
	oldBytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("disk full")
	for _, failAt := range []string{"create", "write", "sync", "close", "rename"} {
		h := fsHooks{chunk: 8, at: func(op, _ string) error {
			if op == failAt {
				return injected
			}
			return nil
		}}
		err := h.save(path, []Tensor{{Name: "b", Shape: []int{3}, Data: []float32{3, 4, 5}}}, nil)
		if !errors.Is(err, injected) || !strings.Contains(err.Error(), path) {
			t.Fatalf("failing at %s: error %v", failAt, err)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, oldBytes) {
			t.Fatalf("failing at %s: old file changed", failAt)
		}
		err = h.writeFileAtomic(path, []byte("not a safetensors file"))
		if !errors.Is(err, injected) {
			t.Fatalf("WriteFileAtomic failing at %s: error %v", failAt, err)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, oldBytes) {
			t.Fatalf("WriteFileAtomic failing at %s: old file changed", failAt)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("failing at %s: directory holds %v", failAt, entries)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	for _, content := range []string{`{"a":1}`, "", `{"b":2}`} {
		if err := WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Fatalf("got %q, want %q", got, content)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("directory holds %v", entries)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("write into a missing directory: %v", err)
	}
	if err := WriteFileAtomic(dir+string(filepath.Separator), nil); err == nil {
		t.Fatal("writing to a directory path succeeded")
	}
}

func TestStaleTempsAreIgnoredAndCleaned(t *testing.T) {
	dir := t.TempDir()
	r := makeRun(4, 1)
	if err := saveRun(t, fsHooks{}, dir, r); err != nil {
		t.Fatal(err)
	}
	stale := []string{".ckpt-5.safetensors.tmp-123", ".latest.tmp-9"}
	kept := []string{".hidden", "notes.txt", ".ckpt-x.safetensors.tmp-1", ".other.tmp-2"}
	for _, name := range append(slices.Clone(stale), kept...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ckpt, err := LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, ckpt, r)
	if err := saveRun(t, fsHooks{}, dir, makeRun(5, 2)); err != nil {
		t.Fatal(err)
	}
	snap := snapshotDir(t, dir)
	for _, name := range stale {
		if _, ok := snap[name]; ok {
			t.Errorf("stale %s was not removed", name)
		}
	}
	for _, name := range kept {
		if _, ok := snap[name]; !ok {
			t.Errorf("unrelated %s was removed", name)
		}
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []int64{1, 2, 3, 10, 20} {
		if err := saveRun(t, fsHooks{}, dir, makeRun(step, float32(step))); err != nil {
			t.Fatal(err)
		}
	}
	// Files that look like checkpoints but are not canonical are never touched.
	for _, name := range []string{"ckpt-007.safetensors", "ckpt-1.safetensors.bak", "model.safetensors"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Prune(dir, 0); err == nil {
		t.Fatal("keep 0 accepted")
	}
	removed, err := Prune(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ckpt-3.safetensors", "ckpt-2.safetensors", "ckpt-1.safetensors"}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	// Point latest at an older checkpoint (a rewound run); pruning to 1 keeps it and the newest.
	if err := saveRun(t, fsHooks{}, dir, makeRun(3, 3)); err != nil {
		t.Fatal(err)
	}
	removed, err = Prune(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ckpt-10.safetensors"}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	var left []string
	for name := range snapshotDir(t, dir) {
		left = append(left, name)
	}
	slices.Sort(left)
	want := []string{"ckpt-007.safetensors", "ckpt-1.safetensors.bak", "ckpt-20.safetensors", "ckpt-3.safetensors", "latest", "model.safetensors"}
	if !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	ckpt, err := LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, ckpt, makeRun(3, 3))

	// Without a pointer, pruning keeps the newest.
	if err := os.Remove(filepath.Join(dir, LatestFile)); err != nil {
		t.Fatal(err)
	}
	if removed, err = Prune(dir, 1); err != nil || !slices.Equal(removed, []string{"ckpt-3.safetensors"}) {
		t.Fatalf("removed %v, %v", removed, err)
	}
}

func TestCheckpointNames(t *testing.T) {
	for _, step := range []int64{0, 1, 42, math.MaxInt64} {
		got, ok := parseCheckpointName(CheckpointName(step))
		if !ok || got != step {
			t.Errorf("step %d: parsed %d, %v", step, got, ok)
		}
	}
	for _, name := range []string{"ckpt-.safetensors", "ckpt-01.safetensors", "ckpt--1.safetensors", "ckpt-1.safetensor",
		"ckpt-9223372036854775808.safetensors", "xckpt-1.safetensors", "ckpt-1a.safetensors", "ckpt- 1.safetensors"} {
		if step, ok := parseCheckpointName(name); ok {
			t.Errorf("%q parsed as step %d", name, step)
		}
	}
}
