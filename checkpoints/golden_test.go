package checkpoints

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// updateGolden rewrites testdata/*.safetensors from the current writer. The files were produced
// by the writer built on github.com/nlpodyssey/safetensors, before checkpoints moved to
// internal/safetensors, so this test pins that what is written did not change by a byte.
var updateGolden = flag.Bool("update-golden", false, "rewrite checkpoints/testdata golden files")

// goldenFiles writes each golden case into dir and returns its file names.
func goldenFiles(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	save := func(name string, tensors []Tensor, meta map[string]string) {
		if err := Save(filepath.Join(dir, name), tensors, meta); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	// Names out of order, a scalar, an empty tensor, special values (a NaN payload, the smallest
	// subnormal, -0, infinities), non-ASCII names and metadata that JSON escapes.
	special := []float32{f32(0x7fa00001), f32(0x00000001), f32(0x80000000), f32(0x7f800000), f32(0xff800000), 1.5}
	save("weights.safetensors", []Tensor{
		{Name: "z.last", Shape: []int{2, 3}, Data: special},
		{Name: "a.scalar", Shape: []int{}, Data: []float32{-3.25}},
		{Name: "m.empty", Shape: []int{0, 4}, Data: []float32{}},
		{Name: "é.ünïcode", Shape: []int{1}, Data: []float32{7}},
		{Name: "B.upper", Shape: []int{2}, Data: []float32{1e-40, -65504}},
	}, map[string]string{MetaConfig: `{"h":2,"s":"<tag> & \"q\""}`, MetaFormat: "pt", "ü": "\u2028\t"})
	save("no-metadata.safetensors", []Tensor{{Name: "w", Shape: []int{2, 3}, Data: knownValues}}, nil)
	save("empty.safetensors", nil, nil)
	for _, c := range []struct {
		name string
		r    run
		step int64
	}{{"ckpt-small", makeRun(7, 1), 7}, {"ckpt-tiny", tinyRun(400), 400}} {
		sub := filepath.Join(dir, c.name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := SaveCheckpoint(sub, c.step, c.r.weights, c.r.state, c.r.meta); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(sub, CheckpointName(c.step)))
		if err != nil {
			t.Fatal(err)
		}
		name := c.name + ".safetensors"
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// TestWriterGolden compares what Save and SaveCheckpoint write with files written before the
// writer was replaced: checkpoints written by any version are byte-identical, and so are their
// checksums.
func TestWriterGolden(t *testing.T) {
	dir := t.TempDir()
	for _, name := range goldenFiles(t, dir) {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", name)
		if *updateGolden {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: %d bytes differ from the golden %d bytes at byte %d", name, len(got), len(want), i)
		}
		// What was written loads back.
		if _, _, err := LoadAny(golden); err != nil {
			t.Errorf("%s: %v", golden, err)
		}
	}
}
