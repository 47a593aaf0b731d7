package config

import (
	"strconv"

	"errors"
	"github.com/gelo-research/geloattack/internal/field"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/configs"
)

func TestEmbeddedQuickstartParses(t *testing.T) {
	src, err := configs.Read(configs.Quickstart)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse("quickstart.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "quickstart" || r.Store.Synth.D != 256 || r.Model.Hidden != 128 {
		t.Fatalf("unexpected resolved config: %+v", r)
	}
	if r.Sampler.Seed != r.Seed {
		t.Fatalf("sampler seed %d should default to the run seed %d", r.Sampler.Seed, r.Seed)
	}
	// The resolved config saved in a run directory must parse back to the same values.
	out, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Parse("resolved.yaml", out)
	if err != nil {
		t.Fatalf("resolved config does not parse back: %v\n%s", err, out)
	}
	a, _ := r.Marshal()
	b, _ := r2.Marshal()
	if string(a) != string(b) {
		t.Fatalf("round trip changed the config:\n%s\nvs\n%s", a, b)
	}
}

// Load refuses a file that sets nothing (Parse, for sweeps and code, still reads it as defaults).
func TestLoadRefusesAnEmptyFile(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{"empty.yaml": "", "blank.yaml": "\n  \n", "comments.yaml": "# nothing\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "sets nothing") {
			t.Errorf("%s: %v, want a refusal naming the file", name, err)
		}
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory as config: %v", err)
	}
}

// Every numeric field of a run config (seeds aside) has exactly one rule, every rule names a real
// field, and the defaults are within every rule.
func TestEveryNumericFieldHasOneRule(t *testing.T) {
	rules := map[string]field.Bounds{}
	for _, r := range Rules() {
		if _, dup := rules[r.Path]; dup {
			t.Errorf("two rules for %s", r.Path)
		}
		rules[r.Path] = r.Bounds
	}
	def := Default()
	def.Model.InputDim, def.Model.CandidateDim = 1, 1
	for _, f := range Fields(def) {
		v, err := strconv.ParseFloat(strings.Trim(f.Value, "[]"), 64)
		if strings.HasSuffix(f.Path, "seed") || err != nil && !strings.HasPrefix(f.Value, "[") {
			continue // a seed, a string or a boolean
		}
		b, ok := rules[f.Path]
		if !ok {
			t.Errorf("numeric field %s (default %s) has no rule", f.Path, f.Value)
			continue
		}
		delete(rules, f.Path)
		if err == nil && !b.Allows(v) {
			t.Errorf("default %s = %s is outside its rule (%s)", f.Path, f.Value, b.Want())
		}
	}
	for p := range rules {
		t.Errorf("rule for %s names no numeric field", p)
	}
}

// Binary garbage never reaches the terminal: control bytes in a message are escaped.
func TestErrorEscapesControlBytes(t *testing.T) {
	e := &Error{File: "x.yaml", Msg: "bad \x1b[31mred\x00 \xff"}
	got := e.Error()
	for _, r := range got {
		if r < 0x20 && r != '\n' && r != '\t' {
			t.Fatalf("control byte %#x in %q", r, got)
		}
	}
	if !strings.Contains(got, `\x1b`) || !strings.Contains(got, `\xff`) {
		t.Errorf("escaped message %q lost the bytes' names", got)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	r, err := Parse("empty.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Train != Default().Train {
		t.Fatal("empty file should give the defaults")
	}
}

// Each bad config must give one line naming the file, the line, the key and what is allowed.
func TestBadConfigsNameKeyLineAndRange(t *testing.T) {
	cases := []struct {
		name, src string
		line      string // "file:line:" prefix expected
		want      []string
	}{
		{"unknown key", "name: x\nsampler:\n  shield_fraction: 0.5\n", "bad.yaml:3:3:", []string{`unknown field "shield_fraction"`}},
		{"wrong type", "train:\n  steps: many\n", "bad.yaml:2:10:", []string{"train.steps", "many", "want an integer"}},
		{"fraction above 1", "sampler:\n  shield_frac: 0.2\n  obs_rows: 1.5\n", "bad.yaml:3:", []string{"sampler.obs_rows", "1.5", "[1e-06, 1]"}},
		{"kappa below 1", "sampler:\n  mix: non_orthogonal\n  mix_cond: 0.5\n", "bad.yaml:3:", []string{"sampler.mix_cond", "0.5"}},
		{"min above max", "sampler:\n  shield_scale: [2.0, 1.0]\n", "bad.yaml:2:", []string{"sampler.shield_scale", "2"}},
		{"heads do not divide", "model:\n  hidden: 100\n  heads: 3\n", "bad.yaml:3:", []string{"model.heads", "3", "100"}},
		{"negative lr", "train:\n  lr: -0.1\n", "bad.yaml:2:", []string{"train.lr", "-0.1", "[1e-12, 1]"}},
		{"fractional integer", "train:\n  workers: 2.9\n", "bad.yaml:2:12:", []string{"train.workers", "2.9", "want an integer"}},
		{"quoted integer", "train:\n  steps: '10'\n", "bad.yaml:2:10:", []string{"train.steps", "want an integer"}},
		{"null value", "sampler:\n  seed:\n", "bad.yaml:", []string{"sampler.seed", "no value"}},
		{"bad range bound", "sampler:\n  shield_scale: [1, x]\n", "bad.yaml:2:17:", []string{"sampler.shield_scale", "not a number"}},
		{"range unknown key", "sampler:\n  shield_frac: {min: 0.1, max: 0.5, foo: 1}\n", "bad.yaml:2:16:", []string{"sampler.shield_frac", "foo"}},
		{"dot name", "name: ..\n", "bad.yaml:1:", []string{"name", `".."`}},
		{"bad device", "device: tpu\n", "bad.yaml:1:", []string{"device", "tpu", "auto, cpu, cuda or cuda:N"}},
		{"bad cuda ordinal", "name: x\ndevice: cuda:x\n", "bad.yaml:2:", []string{"device", "cuda:x", "auto, cpu, cuda or cuda:N"}},
		{"empty device", "device: ''\n", "bad.yaml:1:", []string{"device", `""`, "cuda:N"}},
		{"hidden far too large", "model:\n  hidden: 10000000\n  heads: 2\n", "bad.yaml:2:", []string{"model.hidden", "10000000", "[1, 32768]"}},
		{"batch far too large", "train:\n  batch_size: 1000000000\n", "bad.yaml:2:", []string{"train.batch_size", "1000000000", "[1, 65536]"}},
		{"synthetic texts far too many", "store:\n  synth:\n    texts: 1000000000\n", "bad.yaml:3:", []string{"store.synth.texts", "1000000000", "[1, 4194304]"}},
		{"positives range too large", "sampler:\n  positives: [2, 100000]\n", "bad.yaml:2:", []string{"sampler.positives", "[2, 100000]", "[1, 65536]"}},
		{"zero synthetic texts", "store:\n  synth:\n    texts: 0\n", "bad.yaml:3:", []string{"store.synth.texts", ": 0, want an integer in [1, 4194304]"}},
		{"zero synthetic d", "store:\n  synth: {d: 0}\n", "bad.yaml:2:", []string{"store.synth.d", ": 0, want an integer in [2, 65536]"}},
		{"control byte", "name: x\n\x1b[2Jtrain: {}\n", "bad.yaml:2:", []string{"control byte 0x1b", "offset 8"}},
		{"invalid utf-8", "name: \xff\xfe\n", "bad.yaml:1:", []string{"invalid UTF-8 byte 0xff"}},
		{"bad precision", "name: x\nprecision: fp16\n", "bad.yaml:2:12:", []string{"precision", "fp16", "fp32, tf32 or bf16"}},
		{"empty precision", "precision: ''\n", "bad.yaml:1:", []string{"precision", `""`, "fp32, tf32 or bf16"}},
		{"null precision", "precision:\n", "bad.yaml:1:", []string{"precision", "no value"}},
		{"bad sinkhorn eps", "loss:\n  unmix:\n    eps: 0\n", "bad.yaml:3:", []string{"loss.unmix.eps", "0"}},
		{"bad synth", "store:\n  synth:\n    d: -4\n", "bad.yaml:3:", []string{"store.synth.d", "-4"}},
		// The key named is the one at fault, though the message mentions another (issue 24).
		{"pr above d", "store:\n  synth: {d: 32, pr: 100}\n", "bad.yaml:2:", []string{"store.synth.pr: participation ratio 100, want at most d = 32"}},
		{"tiny temperature", "model:\n  temperature: 1.0e-300\n", "bad.yaml:2:", []string{"model.temperature", "1e-300", "[0.0001, 10000]"}},
		{"tiny norm_mean", "store:\n  synth:\n    norm_mean: 1.0e-300\n", "bad.yaml:3:", []string{"store.synth.norm_mean", "1e-300"}},
		{"infinite zipf", "store:\n  synth:\n    zipf_s: .inf\n", "bad.yaml:3:", []string{"store.synth.zipf_s", "(1, 10]"}},
		{"eval tau NaN", "eval:\n  tau: .nan\n", "bad.yaml:2:", []string{"eval.tau", "NaN"}},
		{"unknown task", "model:\n  task: lmx\n", "bad.yaml:2:", []string{"model.task", "lmx", "retrieval, unmix or lm"}},
		{"lm without texts", "model: {task: lm}\nlm:\n  tokenizer: t.json\n", "bad.yaml:3:", []string{"lm.texts", "empty"}},
		{"lm with a store", "model: {task: lm}\nstore: {path: /s}\nlm: {texts: x, tokenizer: t.json}\n", "bad.yaml:2:", []string{"store.path", "lm.texts"}},
		{"lm odd head dim", "model: {task: lm}\nlm:\n  texts: x\n  tokenizer: t\n  model: {hidden: 30, heads: 2}\n", "bad.yaml:5:", []string{"lm.model.heads", "15", "even"}},
		{"lm val_frac 1", "model: {task: lm}\nlm:\n  texts: x\n  tokenizer: t\n  val_frac: 1\n", "bad.yaml:5:", []string{"lm.val_frac", "(0, 1)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(c.src))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
			if !strings.Contains(msg, c.line) {
				t.Errorf("error %q does not locate %q", msg, c.line)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error is %T, want *config.Error", err)
			}
		})
	}
}

// Every config shipped in configs/ must parse and validate, so a user never starts from a broken one.
func TestShippedConfigsParse(t *testing.T) {
	paths, err := filepath.Glob("../configs/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../configs/*/*.yaml")
	for _, p := range more {
		// Sweep files are a base config plus axes: package sweep checks them.
		if filepath.Base(filepath.Dir(p)) != "sweeps" {
			paths = append(paths, p)
		}
	}
	if len(paths) < 5 {
		t.Fatalf("found only %d configs: %v", len(paths), paths)
	}
	for _, p := range paths {
		r, err := Load(p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if base := strings.TrimSuffix(filepath.Base(p), ".yaml"); !strings.HasSuffix(r.Name, base) {
			t.Errorf("%s: name %q does not match the file name", p, r.Name)
		}
	}
}

func TestShieldFractionAboveOneRejected(t *testing.T) {
	_, err := Parse("f.yaml", []byte("sampler:\n  shield_frac: [0.5, 1.5]\n"))
	if err == nil || !strings.Contains(err.Error(), "f.yaml:2:") || !strings.Contains(err.Error(), "[0, 1]") {
		t.Fatalf("got %v", err)
	}
}

func TestSecondDocumentRejected(t *testing.T) {
	_, err := Parse("m.yaml", []byte("name: a\n---\nname: b\ntrain:\n  steps: -5\n"))
	if err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Fatalf("got %v", err)
	}
}

// device takes auto, cpu, cuda and cuda:N; precision fp32, tf32 and bf16, default fp32.
func TestDeviceAndPrecision(t *testing.T) {
	d := Default()
	if d.Device != "auto" || d.Precision != "fp32" {
		t.Fatalf("defaults: device %q precision %q, want auto and fp32", d.Device, d.Precision)
	}
	for _, dev := range []string{"auto", "cpu", "cuda", "cuda:0", "cuda:3"} {
		for _, p := range []string{"fp32", "tf32", "bf16"} {
			r, err := Parse("ok.yaml", []byte("device: "+dev+"\nprecision: "+p+"\n"))
			if err != nil {
				t.Errorf("device %s precision %s: %v", dev, p, err)
				continue
			}
			if r.Device != dev || r.Precision != p {
				t.Errorf("parsed device %q precision %q, want %q %q", r.Device, r.Precision, dev, p)
			}
			// The resolved config parses back with both keys.
			out, err := r.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if r2, err := Parse("resolved.yaml", out); err != nil || r2.Device != dev || r2.Precision != p {
				t.Errorf("round trip: %v, device %q precision %q", err, r2.Device, r2.Precision)
			}
		}
	}
}

// Diff ignores the device (a run resumes on another one) but not the precision (bf16 GEMMs train
// other numbers than fp32 ones; runner.Train lets a resumed run change it explicitly).
func TestDiffDeviceAndPrecision(t *testing.T) {
	a := Default()
	b := a
	b.Device = "cuda:1"
	if d := Diff(a, b); d != "" {
		t.Errorf("device change reported: %s", d)
	}
	b.Precision = "bf16"
	if d := Diff(a, b); d != "precision: fp32 -> bf16" {
		t.Errorf("precision change: Diff = %q", d)
	}
}

// A UTF-8 byte-order mark (some editors write one) is not part of the document, and a range bound
// reads the YAML float forms a float field reads: 1e1 like lr's 1e-3 (issue 24 class 8).
func TestBOMAndExponentForms(t *testing.T) {
	r, err := Parse("bom.yaml", []byte("\ufeffname: x\nsampler:\n  shield_scale: 1e1\n  shield_frac: [5e-2, 1e-1]\ntrain:\n  lr: 1e-3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "x" || r.Sampler.ShieldScale.Max != 10 || r.Sampler.ShieldFrac.Min != 0.05 || r.Train.LR != 1e-3 {
		t.Fatalf("parsed name %q shield_scale %v shield_frac %v lr %v", r.Name, r.Sampler.ShieldScale, r.Sampler.ShieldFrac, r.Train.LR)
	}
}

// YAML anchors and aliases are refused at their line, naming the key (they were read as the text
// "*a" in a typed field).
func TestAnchorsRefused(t *testing.T) {
	for _, src := range []string{"train:\n  steps: &s 10\n", "x: &a 3\ntrain:\n  steps: *a\n"} {
		_, err := Parse("a.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "anchors and aliases") || !strings.Contains(err.Error(), "a.yaml:") {
			t.Errorf("%q: %v, want a refusal of the anchor with its line", src, err)
		}
	}
}
