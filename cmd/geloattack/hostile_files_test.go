// The hostile-files suite (issue 24) extends the hostile-input suite of hostile_test.go, with its
// fixture, runner and common checks, to the file system, resume and sweep classes, each as a
// generated family:
//
//   - class 1, writes out of the run directory: every file train, train -resume, eval and sweep
//     write (metrics.jsonl, .lock, config.yaml, report.*, identity.json, latest, checkpoints,
//     eval.*, sweep.json, a cell's files, a new store's temporaries) planted as a symbolic link
//     to a victim file outside;
//   - class 2, -resume of a checkpoint that is not the run's: another model's or another
//     config's checkpoint copied in, and checkpoints forged to claim absurd steps;
//   - class 3, damaged metrics.jsonl lines: every kind of damage at every position must be kept
//     in a side file with a warning, and every valid line kept;
//   - class 4, blocking and unbounded reads and writes: every file a command opens (run, store,
//     config and sweep files) as a FIFO, a link to /dev/zero or a directory;
//   - class 5, synthetic-store float fields × {NaN, ±Inf, 1e300, 1e-300}: refused naming the key,
//     or a run that completes;
//   - class 7, sweep cells: a nested section merges into the base, a field set dotted and nested
//     is a conflict, a sweep name cannot leave sweeps/.
//
// Every case also gets the common checks (no hang, no panic, no raw control byte, no existing
// file changed, the victim included). GELOATTACK_HOSTILE_BIN runs the cases against another
// binary (a build of an older commit, to see them fail there).
//
//	go test ./cmd/geloattack -run TestHostileFiles -v
package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/internal/safefile/safefiletest"
	"github.com/gelo-research/geloattack/sweep"
)

// victimFile is the file outside every run, store and sweep directory that planted links point
// at; the common checks see any change to it.
const victimFile = "victim.txt"

// hostileKinds are what a file a command opens is replaced by.
var hostileKinds = []string{"symlink", "fifo", "devzero", "dir"}

// classCase is a case with the class of issue 24 it belongs to, for the count per class.
type classCase struct {
	class int
	hostileCase
}

func TestHostileFiles(t *testing.T) {
	start := time.Now()
	fx := buildFixture(t)
	if bin := os.Getenv("GELOATTACK_HOSTILE_BIN"); bin != "" {
		fx.bin, fx.env = bin, nil
	}
	cases := hostileFileCases(t, fx)
	count := map[int]int{}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("duplicate case name %q", c.name)
		}
		seen[c.name] = true
		count[c.class]++
	}
	t.Run("case", func(t *testing.T) {
		for _, c := range cases {
			t.Run(fmt.Sprintf("class%d/%s", c.class, c.name), func(t *testing.T) {
				t.Parallel()
				runHostileCase(t, fx, c.hostileCase)
			})
		}
	})
	var per []string
	for _, k := range []int{1, 2, 3, 4, 5, 7} {
		per = append(per, fmt.Sprintf("class %d: %d", k, count[k]))
	}
	t.Logf("%d cases (%s) in %s", len(cases), strings.Join(per, ", "), time.Since(start).Round(100*time.Millisecond))
}

// plantIn replaces dir/name by an entry of kind: a link to the victim file (two levels up from a
// cell, one from a run), a FIFO, a link to /dev/zero or an empty directory.
func plantIn(t *testing.T, caseDir, dir, name, kind string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(caseDir, victimFile)
	if _, err := os.Stat(victim); err != nil {
		hWriteFile(t, victim, []byte("victim\n"))
	}
	rel, err := filepath.Rel(filepath.Dir(p), victim) // a relative link, as a user would plant
	if err != nil {
		t.Fatal(err)
	}
	safefiletest.Plant(t, kind, p, rel)
}

// planted checks that the entry planted at rel is still of its kind (a command that replaced a
// link by a file of its own hid the attempt, and could as well have written through it).
func planted(rel, kind string) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(fx *hostileFixture, dir string, r hostileResult) []string {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			return []string{fmt.Sprintf("the planted %s %s is gone: %v", kind, rel, err)}
		}
		m := fi.Mode()
		ok := map[string]bool{
			"symlink": m&os.ModeSymlink != 0, "devzero": m&os.ModeSymlink != 0,
			"fifo": m&os.ModeNamedPipe != 0, "dir": m.IsDir(),
		}[kind]
		if !ok {
			return []string{fmt.Sprintf("the planted %s %s was replaced (now %s)", kind, rel, m)}
		}
		return nil
	}
}

// inRun plants name in the fixture run copied to victimRun.
func inRun(name, kind string) func(t *testing.T, fx *hostileFixture, dir string) {
	return func(t *testing.T, fx *hostileFixture, dir string) {
		hCopyDir(t, fx.run, filepath.Join(dir, victimRun))
		plantIn(t, dir, filepath.Join(dir, victimRun), name, kind)
	}
}

// inDir plants name in a new directory sub of the case.
func inDir(sub, name, kind string) func(t *testing.T, fx *hostileFixture, dir string) {
	return func(t *testing.T, fx *hostileFixture, dir string) {
		plantIn(t, dir, filepath.Join(dir, sub), name, kind)
	}
}

// kindClass is the class a planted kind tests: links are class 1 (writes out of the directory),
// the others class 4 (blocking and unbounded opens).
func kindClass(kind string) int {
	if kind == "symlink" {
		return 1
	}
	return 4
}

// hostileCellSweep is the sweep file of the sweep-directory cases: two cells on the fixture's
// base config.
var hostileCellSweep = hostileSweep("axes:\n  seed: [1, 2]\n")

func hostileFileCases(t *testing.T, fx *hostileFixture) []classCase {
	var cases []classCase
	add := func(class int, c hostileCase) { cases = append(cases, classCase{class, c}) }
	resume := []string{"train", "-resume", "-out", victimRun, "-steps", "9", "-device", "cpu"}
	fresh := "fresh-run"
	sw, err := sweep.Parse(hostileSweepFile, []byte(hostileCellSweep))
	if err != nil {
		t.Fatal(err)
	}
	cell := sw.Cells[0].Name

	// Classes 1 and 4: every file a command writes or reads in its directory × every kind.
	for _, kind := range hostileKinds {
		for _, name := range []string{"metrics.jsonl", ".lock", "config.yaml", "report.json", "report.md", "identity.json",
			"latest", victimCkpt, "ckpt-9.safetensors"} {
			add(kindClass(kind), hostileCase{name: "train -resume, " + name + " is a " + kind, setup: inRun(name, kind), args: resume,
				want: []string{name}, check: planted(filepath.Join(victimRun, name), kind)})
		}
		for _, name := range []string{"metrics.jsonl", ".lock", "config.yaml", "report.json", "report.md", "identity.json",
			"latest", victimPrevCkpt, victimCkpt} {
			add(kindClass(kind), hostileCase{name: "train fresh, " + name + " is a " + kind, setup: setups(withConfig(hostileBaseConfig), inDir(fresh, name, kind)),
				args: []string{"train", "-config", hostileCfg, "-out", fresh, "-device", "cpu"},
				want: []string{name + "|already holds checkpoints"}, check: planted(filepath.Join(fresh, name), kind)})
		}
		for _, name := range []string{"eval.json", "eval.md"} {
			add(kindClass(kind), hostileCase{name: "eval, " + name + " is a " + kind, setup: inRun(name, kind),
				args: []string{"eval", "-device", "cpu", victimRun}, want: []string{name}, check: planted(filepath.Join(victimRun, name), kind)})
		}
		add(kindClass(kind), hostileCase{name: "eval -ckpt FILE, the file is a " + kind, setup: inRun(victimCkpt, kind),
			args: []string{"eval", "-ckpt", filepath.Join(victimRun, victimCkpt), "-device", "cpu"}, want: []string{victimCkpt}})
		sweepArgs := []string{"sweep", "-config", hostileSweepFile, "-out", "victim-sweep", "-device", "cpu"}
		add(kindClass(kind), hostileCase{name: "sweep, " + sweep.PlanFile + " is a " + kind,
			setup: setups(withSweep(hostileCellSweep), inDir("victim-sweep", sweep.PlanFile, kind)),
			args:  sweepArgs, want: []string{sweep.PlanFile}, check: planted(filepath.Join("victim-sweep", sweep.PlanFile), kind)})
		for _, name := range []string{"metrics.jsonl", ".lock", "config.yaml", "report.json", "error.txt"} {
			rel := filepath.Join("victim-sweep", cell, name)
			add(kindClass(kind), hostileCase{name: "sweep, cell " + name + " is a " + kind,
				setup: setups(withSweep(hostileCellSweep), inDir(filepath.Join("victim-sweep", cell), name, kind)),
				args:  sweepArgs, want: []string{name}, check: planted(rel, kind)})
		}
		for _, name := range []string{".tokens.arrow.tmp", ".texts.arrow.tmp", ".meta.json.tmp"} {
			add(kindClass(kind), hostileCase{name: "store synth -out, " + name + " is a " + kind, setup: inDir("new-store", name, kind),
				args: []string{"store", "synth", "-out", "new-store", "-texts", "10", "-min-tokens", "4", "-max-tokens", "8", "-d", "16", "-e", "8"},
				want: []string{name}, check: planted(filepath.Join("new-store", name), kind)})
		}
		// Read-only inputs: the store's files, the config and the sweep file.
		for _, name := range []string{"meta.json", "tokens.arrow", "texts.arrow"} {
			for _, sub := range []string{"info", "validate"} {
				add(kindClass(kind), hostileCase{name: "store " + sub + ", " + name + " is a " + kind,
					setup: withStore(func(t *testing.T, s string) { plantIn(t, filepath.Dir(s), s, name, kind) }),
					args:  []string{"store", sub, "-store", victimStore}, want: []string{name}})
			}
		}
		add(kindClass(kind), hostileCase{name: "train -config FILE, the file is a " + kind,
			setup: func(t *testing.T, fx *hostileFixture, dir string) { plantIn(t, dir, dir, hostileCfg, kind) },
			args:  []string{"train", "-config", hostileCfg, "-out", "new-run", "-device", "cpu"}, want: []string{hostileCfg}})
		add(kindClass(kind), hostileCase{name: "sweep -config FILE, the file is a " + kind,
			setup: func(t *testing.T, fx *hostileFixture, dir string) { plantIn(t, dir, dir, hostileSweepFile, kind) },
			args:  sweepArgs, want: []string{hostileSweepFile}})
		add(kindClass(kind), hostileCase{name: "sweep base_config, the file is a " + kind,
			setup: setups(withSweep("base_config: base.yaml\naxes:\n  seed: [1, 2]\n"),
				func(t *testing.T, fx *hostileFixture, dir string) { plantIn(t, dir, dir, "base.yaml", kind) }),
			args: sweepArgs, want: []string{"base.yaml"}})
	}

	// Class 2: a checkpoint of another run copied into the run directory, resumed without
	// -config (the run's config is then the one the checkpoint recorded).
	for _, other := range [][2]string{
		{"model.hidden", "16"}, {"model.layers", "2"}, {"model.mlp_hidden", "32"}, {"store.synth.d", "32"},
		{"sampler.shield_frac", "0.5"}, {"seed", "8"}, {"train.batch_size", "8"}, {"sampler.tokens_per_text", "3"},
	} {
		add(2, hostileCase{name: "resume a checkpoint of a run with " + other[0] + " " + other[1],
			setup: setups(withRun(nil), func(t *testing.T, fx *hostileFixture, dir string) {
				hWriteFile(t, filepath.Join(dir, "other.yaml"), []byte(cfgWith(other[0], other[1])))
				if r := fx.cmd(dir, "train", "-config", "other.yaml", "-out", "other-run", "-device", "cpu"); r.code != 0 {
					t.Fatalf("other run: exit %d\n%s", r.code, r.out)
				}
				hWriteFile(t, filepath.Join(dir, victimRun, victimCkpt), hReadFile(t, filepath.Join(dir, "other-run", victimCkpt)))
			}),
			args: resume, want: []string{victimCkpt, "another model|another run|seed"}})
	}
	for _, step := range []int64{math.MaxInt64, 1 << 62, 1000, 7} {
		add(2, hostileCase{name: "resume a checkpoint claiming step " + strconv.FormatInt(step, 10),
			setup: withRun(func(t *testing.T, run string) {
				ck, err := checkpoints.LoadCheckpoint(filepath.Join(run, victimCkpt))
				if err != nil {
					t.Fatal(err)
				}
				st := ck.State
				st.Step = step
				if err := checkpoints.SaveCheckpoint(run, step, ck.Weights, st, ck.Metadata); err != nil {
					t.Fatal(err)
				}
			}),
			args: []string{"train", "-resume", "-out", victimRun, "-device", "cpu"},
			want: []string{checkpoints.CheckpointName(step), "claims step"}})
	}

	// Class 2: -resume of a run whose lock another training holds before its first checkpoint
	// names the holder (it said "no checkpoint to resume from").
	add(2, hostileCase{name: "resume a held run that has no checkpoint yet",
		setup: withConfig(cfgWith("train.steps", "1000000", "train.ckpt_every", "1000000", "train.log_every", "1000000",
			"train.eval_every", "1000000")),
		exec: resumeWhileHeld, want: []string{"in use by pid"}})

	// Class 3: damaged metrics lines, kept aside with a warning.
	damage := map[string]string{
		"garbage": "this is not json", "control bytes": "\x00\x1b[2J\x07", "no step": `{"loss":0.5}`,
		"array": `[1,2,3]`, "cut": `{"step":4,"lo`, "empty": "",
	}
	for _, kind := range slices.Sorted(func(yield func(string) bool) {
		for k := range damage {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, at := range []string{"first", "middle", "last"} {
			bad := damage[kind]
			if bad == "" && at == "last" {
				continue // an empty last line is the file's final newline, not damage
			}
			add(3, hostileCase{name: "resume, metrics.jsonl with a " + kind + " line " + at,
				setup: withRun(func(t *testing.T, run string) {
					p := filepath.Join(run, "metrics.jsonl")
					lines := strings.Split(strings.TrimSuffix(string(hReadFile(t, p)), "\n"), "\n")
					i := map[string]int{"first": 0, "middle": len(lines) / 2, "last": len(lines)}[at]
					lines = slices.Insert(lines, i, bad)
					src := strings.Join(lines, "\n")
					if at != "last" {
						src += "\n" // the last one is cut: no newline after it
					}
					hWriteFile(t, p, []byte(src))
				}),
				args: resume, recovers: true, check: damagedKept(fx, bad, at)})
		}
	}

	// Class 5 (data part): every synthetic-store float field × non-finite and extreme values.
	for _, key := range []string{"norm_mean", "norm_cv", "pr", "zipf_s", "zipf_v", "frozen_mass",
		"weights.mean", "weights.outlier", "weights.text", "weights.token", "weights.noise"} {
		for _, v := range []string{".nan", ".inf", "-.inf", "1.0e300", "1.0e-300"} {
			path := "store.synth." + key
			add(5, hostileCase{name: path + " " + v, setup: withConfig(cfgWith(path, v)), args: trainCfg, recovers: true,
				check: refusedNaming(path, key[strings.LastIndexByte(key, '.')+1:])})
			if strings.HasPrefix(key, "weights.") {
				// cfgWith cannot add a nested section: give the weights as one flow mapping.
				w := map[string]string{"mean": "0.25", "outlier": "0.15", "text": "0.3", "token": "0.15", "noise": "0.15"}
				w[strings.TrimPrefix(key, "weights.")] = v
				cases[len(cases)-1].setup = withConfig(cfgWith("store.synth.weights", fmt.Sprintf("{mean: %s, outlier: %s, text: %s, token: %s, noise: %s}",
					w["mean"], w["outlier"], w["text"], w["token"], w["noise"])))
			}
		}
	}

	// Class 7: sweep cells do what they say.
	for _, c := range [][3]string{
		{"train", "{steps: 4}", "train.steps=4"},
		{"sampler", "{tokens_per_text: 3}", "sampler.tokens_per_text=3"},
		{"store", "{synth: {texts: 50}}", "store.synth.texts=50"},
		{"model", "{hidden: 16}", "model.hidden=16"},
		{"train", "{steps: 4, log_every: 1}", "train.steps=4,train.log_every=1"},
	} {
		add(7, hostileCase{name: "sweep cell {" + c[0] + ": " + c[1] + "} merges into the base",
			setup: withSweep(hostileSweep("cells:\n  - {" + c[0] + ": " + c[1] + "}\n")),
			args:  []string{"sweep", "-config", hostileSweepFile, "-out", "victim-sweep", "-device", "cpu"}, recovers: true,
			check: cellMerged(c[2])})
	}
	for _, f := range [][3]string{
		{"train.steps", "train", "steps"}, {"train.batch_size", "train", "batch_size"}, {"store.synth.texts", "store", "synth: {texts"},
		{"sampler.tokens_per_text", "sampler", "tokens_per_text"}, {"model.hidden", "model", "hidden"},
	} {
		nested := "{" + f[1] + ": {" + f[2] + ": 5}}"
		if strings.Contains(f[2], "{") {
			nested = "{" + f[1] + ": {" + f[2] + ": 5}}}"
		}
		for _, order := range []string{"dotted first", "nested first"} {
			cellSrc := f[0] + ": 4, " + f[1] + ": " + strings.TrimSuffix(strings.TrimPrefix(nested, "{"+f[1]+": "), "}")
			if order == "nested first" {
				cellSrc = f[1] + ": " + strings.TrimSuffix(strings.TrimPrefix(nested, "{"+f[1]+": "), "}") + ", " + f[0] + ": 4"
			}
			add(7, hostileCase{name: "sweep cell sets " + f[0] + " dotted and nested, " + order,
				setup: withSweep(hostileSweep("cells:\n  - {" + cellSrc + "}\n")),
				args:  []string{"sweep", "-config", hostileSweepFile, "-out", "victim-sweep", "-device", "cpu"},
				want:  []string{hostileSweepFile, f[0], "set twice"}})
		}
	}
	for _, n := range []string{"..", ".", "../escape", ".hidden", "a/b", "-dash"} {
		add(7, hostileCase{name: "sweep named " + strconv.Quote(n) + " without -out",
			setup: func(t *testing.T, fx *hostileFixture, dir string) {
				hWriteFile(t, filepath.Join(dir, "inner", hostileSweepFile),
					[]byte(strings.Replace(hostileSweep("axes:\n  seed: [1, 2]\n"), "name: hostile", "name: "+strconv.Quote(n), 1)))
			},
			args: []string{"sweep", "-config", filepath.Join("inner", hostileSweepFile), "-device", "cpu"},
			want: []string{"name"}, check: onlyEntries("inner")})
	}
	return cases
}

// damagedKept checks a resume over a damaged metrics.jsonl: it warned naming the side file, the
// line and the count, the side file holds the damaged line, and the log still starts with every
// valid line of the fixture's, in order.
func damagedKept(fx *hostileFixture, bad, at string) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(_ *hostileFixture, dir string, r hostileResult) []string {
		var problems []string
		if r.code != 0 {
			return []string{fmt.Sprintf("exit %d: a damaged line stopped the resume", r.code)}
		}
		side := "metrics.jsonl.damaged-1"
		if !strings.Contains(r.out, side) || !regexp.MustCompile(`1 damaged or cut line\(s\) \(line \d+\)`).MatchString(r.out) {
			problems = append(problems, "no warning naming "+side+", the line number and the count")
		}
		if b, err := os.ReadFile(filepath.Join(dir, victimRun, side)); err != nil || string(b) != bad+"\n" {
			problems = append(problems, fmt.Sprintf("%s holds %q (%v), want the damaged line %q", side, b, err, bad))
		}
		orig, _ := os.ReadFile(filepath.Join(fx.run, "metrics.jsonl"))
		got, _ := os.ReadFile(filepath.Join(dir, victimRun, "metrics.jsonl"))
		if !bytes.HasPrefix(got, orig) || !bytes.Contains(got, []byte(`"step":9`)) {
			problems = append(problems, "metrics.jsonl lost valid lines of the run (or did not reach step 9)")
		}
		return problems
	}
}

// refusedNaming accepts a run that completed, or a refusal naming the key (the dotted path's
// section and its last element).
func refusedNaming(path, last string) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(fx *hostileFixture, dir string, r hostileResult) []string {
		if r.code == 0 {
			return nil
		}
		msg := errorLines(r.out)
		section := path[:strings.LastIndexByte(path, '.')]
		if !strings.Contains(msg, section) || !strings.Contains(msg, last) || !strings.Contains(msg, hostileCfg) {
			return []string{fmt.Sprintf("refused without naming %s (file %s, key %s)", path, hostileCfg, last)}
		}
		if _, err := os.Stat(filepath.Join(dir, victimRun, "config.yaml")); err == nil {
			return []string{"refused, but left " + victimRun + "/config.yaml behind"}
		}
		return nil
	}
}

// cellMerged checks that the one cell of the sweep ran with the base config changed at the given
// dotted settings only (key=value, comma-separated).
func cellMerged(settings string) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(fx *hostileFixture, dir string, r hostileResult) []string {
		if r.code != 0 {
			return []string{fmt.Sprintf("exit %d: the cell did not run", r.code)}
		}
		cells, _ := filepath.Glob(filepath.Join(dir, "victim-sweep", "*", sweep.ConfigFile))
		if len(cells) != 1 {
			return []string{fmt.Sprintf("%d cells ran, want 1", len(cells))}
		}
		got, err := config.Load(cells[0])
		if err != nil {
			return []string{err.Error()}
		}
		var kv []string
		for _, s := range strings.Split(settings, ",") {
			k, v, _ := strings.Cut(s, "=")
			kv = append(kv, k, v)
		}
		want, err := config.Parse("want.yaml", []byte(cfgWith(kv...)))
		if err != nil {
			return []string{err.Error()}
		}
		got.Name, want.Name = "", ""
		if d := config.Diff(got, want); d != "" {
			return []string{"the cell's config is not the base with its settings: " + d}
		}
		return nil
	}
}

// onlyEntries checks that the case directory holds only the given entries (and the victim): a
// refused sweep wrote nothing beside its file.
func onlyEntries(names ...string) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(fx *hostileFixture, dir string, r hostileResult) []string {
		ents, _ := os.ReadDir(dir)
		var extra []string
		for _, e := range ents {
			if !slices.Contains(names, e.Name()) && e.Name() != victimFile {
				extra = append(extra, e.Name())
			}
		}
		inner, _ := os.ReadDir(filepath.Join(dir, "inner"))
		for _, e := range inner {
			if e.Name() != hostileSweepFile {
				extra = append(extra, filepath.Join("inner", e.Name()))
			}
		}
		if len(extra) > 0 {
			return []string{fmt.Sprintf("the sweep wrote %v outside sweeps/", extra)}
		}
		return nil
	}
}

// resumeWhileHeld starts a long training in victimRun, waits until it holds the lock (its record
// is in .lock), runs `train -resume` on the directory, and stops the training.
func resumeWhileHeld(t *testing.T, fx *hostileFixture, dir string) hostileResult {
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	holder := fx.start(ctx, dir, trainCfg...)
	var hout cappedBuffer
	holder.Stdout, holder.Stderr = &hout, &hout
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		holder.Process.Kill()
		holder.Wait()
	}()
	lock := filepath.Join(dir, victimRun, ".lock")
	for {
		if b, err := os.ReadFile(lock); err == nil && bytes.Contains(b, []byte("pid ")) {
			break
		}
		if ctx.Err() != nil {
			return hostileResult{code: -1, timedOut: true, out: "the holder never took the lock:\n" + hout.String()}
		}
		time.Sleep(10 * time.Millisecond) // polling the condition, not a guess at a duration
	}
	r := fx.cmd(dir, "train", "-resume", "-out", victimRun, "-device", "cpu")
	if pid := strconv.Itoa(holder.Process.Pid); r.code != 0 && !strings.Contains(r.out, pid) {
		r.problems = append(r.problems, "the refusal does not name the holder's pid "+pid)
	}
	return r
}
