package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// fuzzName is the file name Parse is given; every error must name it.
const fuzzName = "fuzz.yaml"

// FuzzParse feeds arbitrary bytes to the run-config parser. It must never panic; every error must
// name the file and carry no raw control byte (a config of binary garbage must not be echoed to
// the terminal); and whatever it accepts must re-marshal to YAML that parses back to the same
// config (config.yaml in a run directory is that YAML, and resume reads it).
//
//	go test ./config -run '^$' -fuzz FuzzParse -fuzztime 30s
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"../configs/*.yaml", "../configs/paper/*.yaml", "../configs/sweeps/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		"",
		"# comments only\n",
		"name: x\n",
		"name: first\nz: 1\n",
		"name: first\ntrain: {steps: 3, z: 1}\n",
		"name: x\nsampler: {positives: [2, 3], shield_scale: {min: 0.25, max: 4, rand: log_uniform}}\n",
		"train: {steps: 10, lr: .nan}\n",
		"train:\n  steps: 2.5\n",
		"model: {hidden: 10000000}\n",
		"seed: 1\nseed: 2\n",
		"name: x\n---\nname: y\n",
		"- a\n- b\n",
		"a: &a [1, 1, 1]\nb: &b [*a, *a, *a]\nc: &c [*b, *b, *b]\n",
		"sampler: {positives: *x}\n",
		"store: {synth: {texts: 0}}\n",
		"name: \"\\e[31mred\"\n",
		"\x00\x1b[2J\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		r, err := Parse(fuzzName, src)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, fuzzName) {
				t.Fatalf("error does not name the file: %v", msg)
			}
			if i := strings.IndexFunc(msg, func(c rune) bool { return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f }); i >= 0 {
				t.Fatalf("error holds the raw control byte %#02x: %q", msg[i], msg)
			}
			return
		}
		out, err := r.Marshal()
		if err != nil {
			t.Fatalf("an accepted config does not marshal: %v", err)
		}
		r2, err := Parse("resolved.yaml", out)
		if err != nil {
			t.Fatalf("an accepted config re-marshals to YAML that does not parse: %v\ninput:\n%q\nmarshalled:\n%s", err, src, out)
		}
		out2, err := r2.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("the round trip changed the config\ninput:\n%q\nfirst:\n%s\nsecond:\n%s", src, out, out2)
		}
		if d := Diff(r, r2); d != "" {
			t.Fatalf("the round trip changed %s\ninput:\n%q", d, src)
		}
		// What the file says must be what runs: a document the decoder skipped would leave the
		// defaults in place (the run name among them) without an error.
		var loose map[string]any
		if yaml.Unmarshal(src, &loose) == nil {
			if n, ok := loose["name"].(string); ok && n != r.Name {
				t.Fatalf("accepted, but the file's name %q became %q: the file was not (all) read\ninput:\n%q", n, r.Name, src)
			}
		}
	})
}
