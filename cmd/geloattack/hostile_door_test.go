// The hostile-door suite (issue 37, items 1 and 2) runs the cases of the file door through the
// hostile-input harness of hostile_test.go: a link, FIFO, /dev/zero or directory planted in a
// model directory being written (model init -out, model export -out) or given as any input the
// decoder side reads (-like, config.json, the shard index, model.safetensors, tokenizer.json,
// tokenizer_config.json, -texts, lm.texts, lm.tokenizer, model init -tokenizer); an output that is
// the command's own input; an output path that cannot be written, refused before the work; and
// failures that must leave no half-written directory behind.
//
//	go test ./cmd/geloattack -run TestHostileDoor -v
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newModelDir is the directory model init and model export write in the door cases.
const newModelDir = "new-model"

// victimLMRun is the task-lm run model export reads in the door cases.
const victimLMRun = "victim-lm-run"

// doorFixture adds to the hostile fixture a finished task-lm run (for model export) and a small
// valid tokenizer.json (for decoder directories).
type doorFixture struct {
	*hostileFixture
	lmRun     string
	tokenizer string
}

func TestHostileDoor(t *testing.T) {
	start := time.Now()
	fx := &doorFixture{hostileFixture: buildFixture(t)}
	if bin := os.Getenv("GELOATTACK_HOSTILE_BIN"); bin != "" {
		fx.bin, fx.env = bin, nil
	}
	root := t.TempDir()
	cfg := writeTinyLM(t, root, "5")
	fx.tokenizer = filepath.Join(root, "tokenizer.json")
	fx.lmRun = filepath.Join(root, "lm-run")
	if r := fx.cmd(root, "train", "-config", cfg, "-out", fx.lmRun, "-device", "cpu"); r.code != 0 {
		t.Fatalf("lm fixture run: exit %d\n%s", r.code, r.out)
	}
	// The cases' baseline: model export of the fixture run into a new directory works, so each
	// refusal below is the planted entry's doing.
	if r := fx.cmd(root, "model", "export", "-run", fx.lmRun, "-out", "exported"); r.code != 0 {
		t.Fatalf("model export of the fixture run: exit %d\n%s", r.code, r.out)
	}
	cases := doorCases(fx)
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("duplicate case name %q", c.name)
		}
		seen[c.name] = true
	}
	t.Run("case", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				runHostileCase(t, fx.hostileFixture, c)
			})
		}
	})
	t.Logf("%d cases in %s", len(cases), time.Since(start).Round(100*time.Millisecond))
}

// withTokenizer copies the fixture's tokenizer.json to rel in the case directory.
func (fx *doorFixture) withTokenizer(rel string) func(t *testing.T, _ *hostileFixture, dir string) {
	return func(t *testing.T, _ *hostileFixture, dir string) {
		hWriteFile(t, filepath.Join(dir, rel), hReadFile(t, fx.tokenizer))
	}
}

// withDecoderTok is withDecoder with the fixture's tokenizer.json in the directory.
func (fx *doorFixture) withDecoderTok() func(t *testing.T, h *hostileFixture, dir string) {
	return setups(withDecoder(nil), fx.withTokenizer(filepath.Join(victimModel, "tokenizer.json")))
}

// withLMRun copies the fixture's task-lm run to victimLMRun.
func (fx *doorFixture) withLMRun() func(t *testing.T, _ *hostileFixture, dir string) {
	return func(t *testing.T, _ *hostileFixture, dir string) {
		hCopyDir(t, fx.lmRun, filepath.Join(dir, victimLMRun))
	}
}

// plantAt plants kind at rel in the case directory (a link points at the victim file).
func plantAt(rel, kind string) func(t *testing.T, _ *hostileFixture, dir string) {
	return func(t *testing.T, _ *hostileFixture, dir string) {
		plantIn(t, dir, filepath.Join(dir, filepath.Dir(rel)), filepath.Base(rel), kind)
	}
}

// nothingLeft checks that a refused or failed command left no trace of the directory rel it was
// to write: neither rel nor a temporary sibling of it.
func nothingLeft(rel string) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(_ *hostileFixture, dir string, r hostileResult) []string {
		var problems []string
		if _, err := os.Lstat(filepath.Join(dir, rel)); err == nil {
			problems = append(problems, fmt.Sprintf("%s was left behind", rel))
		}
		ents, _ := os.ReadDir(filepath.Join(dir, filepath.Dir(rel)))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "."+filepath.Base(rel)+".tmp-") {
				problems = append(problems, fmt.Sprintf("the temporary %s was left behind", e.Name()))
			}
		}
		return problems
	}
}

// notStarted checks that the command was refused before its work: its output holds none of the
// lines the work prints.
func notStarted(lines ...string) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(_ *hostileFixture, _ string, r hostileResult) []string {
		for _, l := range lines {
			if strings.Contains(r.out, l) {
				return []string{fmt.Sprintf("the work started (the output holds %q) before the output path was refused", l)}
			}
		}
		return nil
	}
}

// checks runs several checks and joins their problems.
func checks(fns ...func(fx *hostileFixture, dir string, r hostileResult) []string) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(fx *hostileFixture, dir string, r hostileResult) []string {
		var out []string
		for _, f := range fns {
			out = append(out, f(fx, dir, r)...)
		}
		return out
	}
}

// inputKinds are what an input file is replaced by: a link is a legitimate way to name an input,
// the others must be refused at once.
var inputKinds = []string{"fifo", "devzero", "dir"}

func doorCases(fx *doorFixture) []hostileCase {
	var cases []hostileCase
	add := func(c hostileCase) { cases = append(cases, c) }
	small := []string{"-like", "llama2-7b", "-layers", "1", "-hidden", "32", "-vocab", "300"}
	initArgs := func(extra ...string) []string {
		return append(append([]string{"model", "init"}, small...), extra...)
	}
	extract := []string{"store", "extract", "-model", victimModel, "-texts", "texts.txt", "-out", victimStore, "-layer", "1", "-quiet"}
	export := []string{"model", "export", "-run", victimLMRun, "-out", newModelDir}

	// Item 1: entries planted in the directory model init and model export write.
	for _, kind := range hostileKinds {
		for _, name := range []string{"tokenizer.json", "config.json", "model.safetensors", "model.safetensors.tmp", "tokenizer_config.json"} {
			rel := filepath.Join(newModelDir, name)
			add(hostileCase{name: "model init -out, " + name + " is a " + kind,
				setup: setups(fx.withTokenizer("tok/tokenizer.json"), fx.withTokenizer("tok/tokenizer_config.json"), plantAt(rel, kind)),
				args:  initArgs("-out", newModelDir, "-tokenizer", "tok/tokenizer.json"),
				want:  []string{newModelDir, name}, check: planted(rel, kind)})
			add(hostileCase{name: "model export -out, " + name + " is a " + kind,
				setup: setups(fx.withLMRun(), plantAt(rel, kind)), args: export,
				want: []string{newModelDir, name}, check: planted(rel, kind)})
		}
		if kind != "dir" { // an empty directory is a new one
			add(hostileCase{name: "store extract -out is a " + kind, setup: setups(fx.withDecoderTok(), plantAt(victimStore, kind)),
				args: extract, want: []string{victimStore}, check: planted(victimStore, kind)})
		}
	}

	// Item 1: every input of the decoder side as a FIFO, /dev/zero or a directory.
	for _, kind := range inputKinds {
		add(hostileCase{name: "model init -like FILE, the file is a " + kind, setup: plantAt("like.json", kind),
			args: []string{"model", "init", "-like", "like.json", "-out", newModelDir}, want: []string{"like.json"},
			check: nothingLeft(newModelDir)})
		add(hostileCase{name: "model init -tokenizer FILE, the file is a " + kind, setup: plantAt("tok/tokenizer.json", kind),
			args: initArgs("-out", newModelDir, "-tokenizer", "tok/tokenizer.json"), want: []string{"tokenizer.json"},
			check: nothingLeft(newModelDir)})
		add(hostileCase{name: "model init -tokenizer, tokenizer_config.json beside it is a " + kind,
			setup: setups(fx.withTokenizer("tok/tokenizer.json"), plantAt("tok/tokenizer_config.json", kind)),
			args:  initArgs("-out", newModelDir, "-tokenizer", "tok/tokenizer.json"), want: []string{"tokenizer_config.json"},
			check: nothingLeft(newModelDir)})
		for _, name := range []string{"config.json", "model.safetensors.index.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
			rel := filepath.Join(victimModel, name)
			add(hostileCase{name: "store extract -model, " + name + " is a " + kind, setup: setups(fx.withDecoderTok(), plantAt(rel, kind)),
				args: extract, want: []string{name}, check: nothingLeft(victimStore)})
			add(hostileCase{name: "decode -model, " + name + " is a " + kind, setup: setups(fx.withDecoderTok(), plantAt(rel, kind)),
				args: []string{"decode", "-model", victimModel, "-texts", "texts.txt"}, want: []string{name}})
		}
		add(hostileCase{name: "store extract -texts FILE, the file is a " + kind, setup: setups(fx.withDecoderTok(), plantAt("texts.txt", kind)),
			args: extract, want: []string{"texts.txt"}, check: nothingLeft(victimStore)})
		add(hostileCase{name: "decode -texts FILE, the file is a " + kind, setup: setups(fx.withDecoderTok(), plantAt("texts.txt", kind)),
			args: []string{"decode", "-model", victimModel, "-texts", "texts.txt"}, want: []string{"texts.txt"}})
		for _, name := range []string{"texts.txt", "tokenizer.json", "tokenizer_config.json"} {
			key := map[string]string{"texts.txt": "lm.texts", "tokenizer.json": "lm.tokenizer", "tokenizer_config.json": "lm.tokenizer"}[name]
			add(hostileCase{name: "train task lm, " + key + " (" + name + ") is a " + kind,
				setup: func(t *testing.T, h *hostileFixture, dir string) {
					writeTinyLM(t, dir, "5")
					plantAt(name, kind)(t, h, dir)
				},
				args: []string{"train", "-config", "lm.yaml", "-out", "new-run", "-device", "cpu"}, want: []string{key, name}})
		}
	}
	add(hostileCase{name: "model init -tokenizer /dev/zero", args: initArgs("-out", newModelDir, "-tokenizer", "/dev/zero"),
		want: []string{"/dev/zero"}, check: nothingLeft(newModelDir)})
	add(hostileCase{name: "model init -tokenizer names the output's own tokenizer.json",
		setup: fx.withTokenizer(filepath.Join(newModelDir, "tokenizer.json")),
		args:  initArgs("-out", newModelDir, "-tokenizer", filepath.Join(newModelDir, "tokenizer.json")),
		want:  []string{newModelDir, "tokenizer.json"}})
	add(hostileCase{name: "decode -out names its own -texts", setup: fx.withDecoderTok(),
		args: []string{"decode", "-model", victimModel, "-texts", "texts.txt", "-out", "texts.txt"}, want: []string{"-texts", "input"},
		check: notStarted("texts of at most")})

	// Item 2: output paths checked before the work.
	for _, c := range []struct {
		name string
		args []string
	}{
		{"decode -out", []string{"decode", "-model", victimModel, "-texts", "texts.txt", "-out", "nosuch/r.json"}},
		{"recover -out", []string{"recover", "-out", "nosuch/r.json"}},
		{"recover -table", []string{"recover", "-grid", "-table", "nosuch/t.md"}},
		{"baseline -out", []string{"baseline", "-attack", "rowspace", "-out", "nosuch/r.json"}},
	} {
		add(hostileCase{name: c.name + " into a missing directory", setup: fx.withDecoderTok(), args: c.args,
			want: []string{"nosuch", "does not exist"}, check: notStarted("texts of at most")})
	}

	// Item 2: a failure leaves nothing half-written, and a rerun is not refused.
	add(hostileCase{name: "model init with a missing -tokenizer leaves nothing",
		args: initArgs("-out", newModelDir, "-tokenizer", "missing/tokenizer.json"), want: []string{"missing/tokenizer.json"},
		check: nothingLeft(newModelDir)})
	add(hostileCase{name: "model init into a missing parent with a bad -like leaves nothing",
		args: []string{"model", "init", "-like", "nosuch-preset", "-out", "a/b/" + newModelDir}, want: []string{"nosuch-preset"},
		check: nothingLeft("a")})
	add(hostileCase{name: "model export of a run without checkpoints leaves nothing",
		setup: func(t *testing.T, _ *hostileFixture, dir string) {
			hWriteFile(t, filepath.Join(dir, "empty-run", "note"), nil)
		},
		args: []string{"model", "export", "-run", "empty-run", "-out", newModelDir}, want: []string{"empty-run"},
		check: nothingLeft(newModelDir)})
	add(hostileCase{name: "store extract with a bad tokenizer leaves nothing",
		setup: setups(withDecoder(nil), func(t *testing.T, _ *hostileFixture, dir string) {
			hWriteFile(t, filepath.Join(dir, victimModel, "tokenizer.json"), []byte(`{"model": {"type": "Unigram"}}`))
		}),
		args: extract, want: []string{"tokenizer.json"}, check: nothingLeft(victimStore)})
	add(hostileCase{name: "model init into a directory that holds a file",
		setup: func(t *testing.T, _ *hostileFixture, dir string) {
			hWriteFile(t, filepath.Join(dir, newModelDir, "notes.txt"), []byte("mine\n"))
		},
		args: initArgs("-out", newModelDir), want: []string{newModelDir, "notes.txt", "not overwriting"}})
	return cases
}

// A failed model init leaves nothing, so the same command succeeds once its input is fixed;
// model init, model export and store extract write a directory whole into a new or empty one.
func TestDoorDirectoriesWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := writeTinyLM(t, dir, "5")
	out := filepath.Join(dir, "m")
	initArgs := []string{"model", "init", "-like", "llama2-7b", "-layers", "1", "-hidden", "32", "-vocab", "300", "-out", out}
	bad := append(append([]string{}, initArgs...), "-tokenizer", filepath.Join(dir, "missing.json"))
	if b, err := cli(t, bad...).CombinedOutput(); err == nil {
		t.Fatalf("model init with a missing tokenizer succeeded:\n%s", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Fatalf("the failed model init left %v", ents)
	}
	good := append(append([]string{}, initArgs...), "-tokenizer", filepath.Join(dir, "tokenizer.json"))
	if b, err := cli(t, good...).CombinedOutput(); err != nil {
		t.Fatalf("the rerun was refused: %v\n%s", err, b)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	// An empty directory is a new one.
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	run := filepath.Join(dir, "run")
	if b, err := cli(t, "train", "-config", cfg, "-out", run, "-device", "cpu").CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, b)
	}
	if b, err := cli(t, "model", "export", "-run", run, "-out", empty).CombinedOutput(); err != nil {
		t.Fatalf("model export into an empty directory: %v\n%s", err, b)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "geloattack-run.json"} {
		if _, err := os.Stat(filepath.Join(empty, f)); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 6 {
		t.Fatalf("the directory holds %v: a temporary build was left behind", ents)
	}
}
