package checkpoints

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/crc"
	"github.com/gelo-research/geloattack/internal/safetensors"
)

// tinyModel is the parameter table of a 1-layer set transformer as models/settransformer builds it
// (input 4, candidates 4, hidden 4, SwiGLU 8), copied here so that this package's tests do not
// depend on the model package.
var tinyModel = []struct {
	name  string
	shape []int
}{
	{"in_proj.weight", []int{4, 4}},
	{"cls", []int{4}},
	{"layers.0.attn_norm.weight", []int{4}},
	{"layers.0.attn.q_proj.weight", []int{4, 4}},
	{"layers.0.attn.k_proj.weight", []int{4, 4}},
	{"layers.0.attn.v_proj.weight", []int{4, 4}},
	{"layers.0.attn.o_proj.weight", []int{4, 4}},
	{"layers.0.mlp_norm.weight", []int{4}},
	{"layers.0.mlp.gate_proj.weight", []int{8, 4}},
	{"layers.0.mlp.up_proj.weight", []int{8, 4}},
	{"layers.0.mlp.down_proj.weight", []int{4, 8}},
	{"norm.weight", []int{4}},
	{"retrieval_head.weight", []int{4, 4}},
}

// tinyRun is a training state shaped like a real run's: the tiny model's weights and moments, a
// run config in the metadata (with characters that JSON escapes, so that escapes are exercised),
// an RNG state and the loss window in Last, as train/ saves them.
func tinyRun(step int64) run {
	rng := rand.New(rand.NewPCG(uint64(step), 5))
	var weights, m, v []Tensor
	for _, p := range tinyModel {
		n := 1
		for _, d := range p.shape {
			n *= d
		}
		w, mm, vv := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range w {
			w[i] = float32(rng.NormFloat64() * 0.1)
			mm[i] = float32(rng.NormFloat64() * 1e-3)
			vv[i] = float32(rng.ExpFloat64() * 1e-6)
		}
		weights = append(weights, Tensor{Name: p.name, Shape: p.shape, Data: w})
		m = append(m, Tensor{Name: p.name, Shape: p.shape, Data: mm})
		v = append(v, Tensor{Name: p.name, Shape: p.shape, Data: vv})
	}
	return run{
		weights: weights,
		state: State{
			Step: step, NextBatch: step, Seed: 1234,
			RNG:   map[string][]byte{"sampler": {9, 8, 7, 6, 5, 4, 3, 2}},
			AdamM: m, AdamV: v,
			Last: map[string]float64{"train.loss_window_sum": 12.5, "train.loss_window_n": 7},
		},
		meta: map[string]string{
			MetaConfig:   `{"hidden":4,"layers":1,"heads":2,"mlp_hidden":8,"task":"retrieval"}`,
			"run_config": `{"name":"quickstart <tiny> & co","train":{"steps":400,"lr":0.001}}`,
			"device":     "cpu",
		},
	}
}

// dataStart is the offset of a safetensors file's data section.
func dataStart(b []byte) int { return 8 + int(binary.LittleEndian.Uint64(b)) }

// tensorOwners maps each data byte of a safetensors file (index from the data section's start) to
// the name of the tensor that holds it.
func tensorOwners(t *testing.T, b []byte) []string {
	t.Helper()
	f, err := safetensors.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	owners := make([]string, len(b)-dataStart(b))
	for _, r := range f.Tensors() {
		for i := range r.Bytes() {
			owners[r.Begin+i] = r.Name
		}
	}
	return owners
}

// TestEveryBitFlipIsReported flips bits of a small real checkpoint one at a time and loads each
// copy: every flip must be an error naming the file, never a silent load and never a panic.
// Every byte of the file gets one flipped bit, the bit position cycling with the offset so that
// all 8 positions occur; letters of the header also get bit 0x20, the case bit, the flip most
// likely to leave a value unchanged (a hex digit of a JSON escape; not with -short). A data flip
// must be reported as a checksum mismatch of the tensor that holds the byte, with both checksums.
// A sample of the copies also goes through the file system. Set CHECKPOINTS_ALL_BITS=1 to flip
// all 8 bits of every byte (about 66,000 loads).
func TestEveryBitFlipIsReported(t *testing.T) {
	allBits := os.Getenv("CHECKPOINTS_ALL_BITS") != ""
	dir := t.TempDir()
	r := tinyRun(400)
	if err := SaveCheckpoint(dir, 400, r.weights, r.state, r.meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CheckpointName(400))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ck, err := loadCheckpointBytes(path, orig); err != nil || !ck.Verified {
		t.Fatalf("undamaged file: verified %v, %v", ck.Verified, err)
	}
	if !strings.Contains(string(orig), `\u003ctiny\u003e`) {
		t.Fatal("the metadata holds no JSON escape: the test would not exercise them")
	}
	start := dataStart(orig)
	owners := tensorOwners(t, orig)
	kinds := map[string]int{}
	classify := func(msg string) string {
		for _, k := range []string{"checksum mismatch", "differs from the canonical encoding", "header length", "invalid header",
			"not valid UTF-8", "data_offsets", "data section", "metadata", "tensor"} {
			if strings.Contains(msg, k) {
				return k
			}
		}
		return "other"
	}
	flips := 0
	viaFile := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(viaFile, 0o755); err != nil {
		t.Fatal(err)
	}
	filePath := filepath.Join(viaFile, CheckpointName(400))
	for at := 0; at < len(orig); at++ {
		bits := []byte{1 << (at % 8)}
		switch {
		case allBits:
			bits = []byte{1, 2, 4, 8, 16, 32, 64, 128}
		case at < start && at%8 != 5 && ('a' <= orig[at]|0x20 && orig[at]|0x20 <= 'z') && !testing.Short():
			bits = append(bits, 0x20)
		}
		for _, bit := range bits {
			b := slices.Clone(orig)
			b[at] ^= bit
			flips++
			ck, err := loadCheckpointBytes(path, b)
			if err == nil {
				t.Fatalf("bit %#02x of byte %d (of %d; data from %d) flipped: loaded silently (step %d)", bit, at, len(orig), start, ck.State.Step)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Fatalf("byte %d bit %#02x: error %q does not name the file", at, bit, msg)
			}
			if at >= start {
				name := owners[at-start]
				if want := fmt.Sprintf("tensor %q: checksum mismatch (stored crc32c ", name); !strings.Contains(msg, want) {
					t.Fatalf("data byte %d bit %#02x: error %q, want %q", at, bit, msg, want)
				}
			}
			kinds[classify(msg)]++
			if at%61 == 0 {
				if err := os.WriteFile(filePath, b, 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := LoadCheckpoint(filePath); err == nil || !strings.Contains(err.Error(), filePath) {
					t.Fatalf("byte %d bit %#02x through the file system: %v", at, bit, err)
				}
			}
		}
	}
	t.Logf("%d bytes (header %d, data %d): %d flips, all reported: %v", len(orig), start, len(orig)-start, flips, kinds)
}

// TestLoadRejectsNonFiniteValues writes checkpoints whose checksums hold but whose weights or
// moments are not finite (as a buggy writer would): the error names the file, the tensor and the
// first bad element. SaveCheckpoint refuses to write them at all.
func TestLoadRejectsNonFiniteValues(t *testing.T) {
	cases := []struct {
		name   string
		damage func(r *run)
		want   string
	}{
		{"NaN weight", func(r *run) { r.weights[3].Data[13] = float32(math.NaN()) },
			`tensor "layers.0.attn.q_proj.weight": element 13 (index [3 1]) is NaN`},
		{"Inf second moment", func(r *run) { r.state.AdamV[12].Data[11] = float32(math.Inf(1)) },
			`tensor "adam.v.retrieval_head.weight": element 11 (index [2 3]) is +Inf`},
		{"NaN payload first moment", func(r *run) { r.state.AdamM[1].Data[0] = f32(0xffa00001) },
			`tensor "adam.m.cls": element 0 (index [0]) is NaN`},
	}
	for _, version := range []string{formatVersion, formatVersionNoChecksums} {
		for _, c := range cases {
			t.Run(version+"/"+c.name, func(t *testing.T) {
				r := tinyRun(5)
				c.damage(&r)
				dir := t.TempDir()
				if err := SaveCheckpoint(dir, 5, r.weights, r.state, r.meta); err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("SaveCheckpoint: error %v, want one containing %q", err, c.want)
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Fatalf("refused save left %v", entries)
				}
				path := writeUnchecked(t, dir, r, version)
				_, err := LoadCheckpoint(path)
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, path, c.want)
				}
			})
		}
	}
}

// writeUnchecked writes r as a checkpoint of the given format version without SaveCheckpoint's
// checks: version 2 sealed with valid checksums, version 1 as older builds wrote it.
func writeUnchecked(t *testing.T, dir string, r run, version string) string {
	t.Helper()
	tensors, err := checkpointTensors(r.weights, r.state)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := encodeState(r.state, r.meta)
	if err != nil {
		t.Fatal(err)
	}
	meta[keyVersion] = version
	if version == formatVersion {
		if meta, err = seal(tensors, meta); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, CheckpointName(r.state.Step))
	if err := Save(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOldCheckpointLoadsWithNote loads a version 1 checkpoint (written before checksums): it
// loads with all its values, Verified false and a note naming the file. A version 1 file that
// carries checksum keys is not one that an older build wrote, and a version 2 file without them
// is damaged.
func TestOldCheckpointLoadsWithNote(t *testing.T) {
	dir := t.TempDir()
	r := tinyRun(300)
	path := writeUnchecked(t, dir, r, formatVersionNoChecksums)
	if err := WriteFileAtomic(filepath.Join(dir, LatestFile), []byte(CheckpointName(300)+"\n")); err != nil {
		t.Fatal(err)
	}
	ck, err := LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, ck, r)
	want := fmt.Sprintf("checkpoint %s has no checksums (written by an older geloattack): not verified", path)
	if ck.Verified || !slices.Equal(ck.Notes, []string{want}) {
		t.Fatalf("Verified %v, notes %q; want false and %q", ck.Verified, ck.Notes, want)
	}

	tensors, _ := checkpointTensors(r.weights, r.state)
	meta, _ := encodeState(r.state, r.meta)
	sealed, err := seal(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		meta map[string]string
		want string
	}{
		{"version 1 with checksums", func() map[string]string {
			m := maps.Clone(sealed)
			m[keyVersion] = formatVersionNoChecksums
			return m
		}(), `unknown metadata key "geloattack.crc32c" in a version 1 checkpoint`}, // keys in sorted order
		{"version 2 without header checksum", func() map[string]string {
			m := maps.Clone(sealed)
			delete(m, keyHeaderCRC)
			return m
		}(), "metadata geloattack.header_crc32c is missing"},
		{"version 2 without tensor checksums", func() map[string]string {
			m := maps.Clone(meta)
			m[keyCRC] = "{}"
			m, _ = seal(nil, m) // a header checksum over a table of no tensors: wrong anyway
			return m
		}(), "header checksum mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), CheckpointName(300))
			if err := Save(p, tensors, c.meta); err != nil {
				t.Fatal(err)
			}
			_, err := LoadCheckpoint(p)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v, want one naming the file and containing %q", err, c.want)
			}
		})
	}
}

// TestChecksumErrorNamesTensor checks the message of a damaged tensor against the documented
// form, with the stored and the computed checksum.
func TestChecksumErrorNamesTensor(t *testing.T) {
	dir := t.TempDir()
	r := tinyRun(400)
	if err := SaveCheckpoint(dir, 400, r.weights, r.state, r.meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CheckpointName(400))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := f.Tensor("layers.0.attn.q_proj.weight")
	var sums map[string]string
	if err := json.Unmarshal([]byte(f.Metadata()[keyCRC]), &sums); err != nil {
		t.Fatal(err)
	}
	at := dataStart(b) + q.Begin + 4*5 // low byte of element 5: a tiny change of value
	b[at] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got := crc.Hex(crc32.Checksum(q.Bytes(), crc.Castagnoli)) // q's bytes are b's, now damaged
	_, err = LoadCheckpoint(path)
	want := fmt.Sprintf("checkpoints: load %s: tensor %q: checksum mismatch (stored crc32c %s, data %s)", path, q.Name, sums[q.Name], got)
	if err == nil || err.Error() != want {
		t.Fatalf("error\n %v\nwant\n %s", err, want)
	}
	if _, err := LoadLatest(dir); err == nil || err.Error() != want {
		t.Fatalf("LoadLatest: %v", err)
	}
}

// TestLoadLatestGood damages checkpoints of a run directory in turn and checks which one is
// resumed and what is reported as skipped.
func TestLoadLatestGood(t *testing.T) {
	// save writes checkpoints 100, 200, 300 (the pointer names 300).
	save := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "run")
		for _, step := range []int64{100, 200, 300} {
			r := tinyRun(step)
			if err := SaveCheckpoint(dir, step, r.weights, r.state, r.meta); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	damage := func(t *testing.T, dir string, step int64) {
		path := filepath.Join(dir, CheckpointName(step))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-3] ^= 0x10
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		edit    func(t *testing.T, dir string)
		want    int64    // step loaded; -1 for an error
		skipped []string // substrings of each skipped entry, in order
	}{
		{"all good", func(*testing.T, string) {}, 300, nil},
		{"latest damaged", func(t *testing.T, dir string) { damage(t, dir, 300) }, 200,
			[]string{"ckpt-300.safetensors: tensor"}},
		{"two damaged", func(t *testing.T, dir string) { damage(t, dir, 300); damage(t, dir, 200) }, 100,
			[]string{"ckpt-300.safetensors: tensor", "ckpt-200.safetensors: tensor"}},
		{"pointer garbage", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, LatestFile), "ckpt-3x\n") }, 300,
			[]string{"latest: content"}},
		{"pointer names a missing file", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, LatestFile), CheckpointName(400)+"\n")
		}, 300, []string{"ckpt-400.safetensors, which is missing"}},
		{"pointer names an older one", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, LatestFile), CheckpointName(100)+"\n")
		}, 100, nil},
		{"no pointer", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, LatestFile)) }, 300, nil},
		{"renamed file", func(t *testing.T, dir string) {
			damage(t, dir, 300)
			if err := os.Rename(filepath.Join(dir, CheckpointName(100)), filepath.Join(dir, CheckpointName(900))); err != nil {
				t.Fatal(err)
			}
		}, 200, []string{"ckpt-300.safetensors: tensor", "ckpt-900.safetensors: file name says step 900, metadata says 100"}},
		{"truncated latest", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, CheckpointName(300)), 100); err != nil {
				t.Fatal(err)
			}
		}, 200, []string{"ckpt-300.safetensors: header length"}},
		{"all damaged", func(t *testing.T, dir string) {
			damage(t, dir, 100)
			damage(t, dir, 200)
			damage(t, dir, 300)
		}, -1, []string{"ckpt-300", "ckpt-200", "ckpt-100"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := save(t)
			c.edit(t, dir)
			ck, skipped, err := LoadLatestGood(dir)
			if c.want < 0 {
				if err == nil {
					t.Fatalf("loaded %s, want an error", ck.Path)
				}
				for _, s := range c.skipped {
					if !strings.Contains(err.Error(), s) {
						t.Fatalf("error %q does not list %q", err, s)
					}
				}
				if errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("damaged run reads as a fresh start: %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if ck.State.Step != c.want || ck.Path != filepath.Join(dir, CheckpointName(c.want)) || !ck.Verified {
				t.Fatalf("loaded %s (step %d, verified %v), want step %d", ck.Path, ck.State.Step, ck.Verified, c.want)
			}
			if len(skipped) != len(c.skipped) {
				t.Fatalf("skipped %v, want %d entries like %q", skipped, len(c.skipped), c.skipped)
			}
			for i, s := range c.skipped {
				if !strings.Contains(skipped[i].String(), s) || !strings.Contains(skipped[i].String(), dir) {
					t.Fatalf("skipped[%d] = %q, want it to name %s and contain %q", i, skipped[i], dir, s)
				}
			}
		})
	}
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		if _, skipped, err := LoadLatestGood(dir); !errors.Is(err, fs.ErrNotExist) || len(skipped) != 0 {
			t.Fatalf("%s: error %v, skipped %v; want fs.ErrNotExist and nothing skipped", dir, err, skipped)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDamageToNaNIsNamed writes a NaN over a weight of a saved checkpoint, as damage would: the
// error is the tensor's checksum mismatch and also names the NaN it produced.
func TestDamageToNaNIsNamed(t *testing.T) {
	dir := t.TempDir()
	r := tinyRun(400)
	if err := SaveCheckpoint(dir, 400, r.weights, r.state, r.meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CheckpointName(400))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	up, _ := f.Tensor("layers.0.mlp.up_proj.weight")
	binary.LittleEndian.PutUint32(b[dataStart(b)+up.Begin+4*13:], math.Float32bits(float32(math.NaN())))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadCheckpoint(path)
	want := `tensor "layers.0.mlp.up_proj.weight": checksum mismatch (stored crc32c `
	wantNaN := "; the damaged data holds element 13 (index [3 1]) is NaN"
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) || !strings.HasSuffix(err.Error(), wantNaN) {
		t.Fatalf("error %v, want one naming %s, containing %q and ending %q", err, path, want, wantNaN)
	}
}
