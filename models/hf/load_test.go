package hf

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// rows runs m over two texts and returns every tap's rows and, for a whole model, the logits.
func rows(t *testing.T, m *llama.Model) map[string][]float32 {
	t.Helper()
	seqs := [][]int32{{1, 7, 49, 3, 3, 20}, {0, 12}}
	dc, err := causallm.NewCPUDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	out := map[string][]float32{}
	var lg []float32
	if m.Blocks() == m.Cfg.Layers {
		lg = make([]float32, 8*m.Cfg.VocabSize)
	}
	err = dc.Forward(context.Background(), seqs, func(p llama.Point, l int, x []float32) error {
		out[p.String()+string(rune('0'+l))] = slices.Clone(x)
		return nil
	}, lg)
	if err != nil {
		t.Fatal(err)
	}
	if lg != nil {
		out["logits"] = lg
	}
	return out
}

// A BF16 or F16 directory gives, bit for bit, the rows and logits of the F32 directory of its
// values (the file converted up front): the model reads the 16-bit bytes as stored, converting
// them as it computes, and the F32 one reads its file in place.
func TestStoredEqualsConvertedFile(t *testing.T) {
	for _, dtype := range []string{BF16, F16} {
		dir, _ := writeModel(t, smallConfig(), dtype)
		half, err := Load(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer half.Close()
		// The float32 model of the same values, written as F32 and loaded back.
		up, err := llama.New(half.Cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range half.Cfg.Tensors(half.Cfg.Layers) {
			dst, err := up.Storage(tn.Part, tn.Block)
			if err != nil {
				t.Fatal(err)
			}
			if err := half.Read(tn.Part, tn.Block, dst); err != nil {
				t.Fatal(err)
			}
		}
		f32Dir := filepath.Join(t.TempDir(), "f32")
		if err := Save(f32Dir, smallConfig(), up, F32); err != nil {
			t.Fatal(err)
		}
		full, err := Load(f32Dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer full.Close()
		if half.ScratchBytes(false) == 0 || full.ScratchBytes(false) != 0 {
			t.Fatalf("%s: scratch %d bytes, F32: %d; want some and none", dtype, half.ScratchBytes(false), full.ScratchBytes(false))
		}
		want, got := rows(t, full), rows(t, half)
		for k, w := range want {
			if !slices.Equal(got[k], w) {
				t.Fatalf("%s: %s differs from the F32 file of the same values", dtype, k)
			}
		}
	}
}

// LoadWith of the first blocks gives the whole model's rows up to their output and reads nothing
// past them: a NaN in block 1 refuses the whole load, not a load of block 0. Block counts past
// the model are refused.
func TestLoadFirstBlocks(t *testing.T) {
	dir, _ := writeModel(t, smallConfig(), BF16)
	whole, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	first, err := LoadWith(dir, LoadOptions{Blocks: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if first.Blocks() != 1 {
		t.Fatalf("Blocks %d, want 1", first.Blocks())
	}
	want, got := rows(t, whole), rows(t, first)
	for _, k := range []string{"residual0", "attn-input0", "residual1"} {
		if got[k] == nil || !slices.Equal(got[k], want[k]) {
			t.Fatalf("%s of the 1-block model differs from the whole model's", k)
		}
	}
	if len(got) != 3 {
		t.Fatalf("the 1-block model tapped %d points, want 3", len(got))
	}
	for _, blocks := range []int{-1, 3} {
		if _, err := LoadWith(dir, LoadOptions{Blocks: blocks}); err == nil || !strings.Contains(err.Error(), "blocks 0..1") {
			t.Errorf("Blocks %d: %v", blocks, err)
		}
	}
	// A NaN in block 1's down_proj.
	path := filepath.Join(dir, WeightsFile)
	setElement(t, path, "model.layers.1.mlp.down_proj.weight", 0x7fc0)
	_, err = Load(dir, nil)
	wantErr(t, err, path, "model.layers.1.mlp.down_proj.weight", "element 0 is NaN")
	m, err := LoadWith(dir, LoadOptions{Blocks: 1})
	if err != nil {
		t.Fatalf("block 0 alone: %v", err)
	}
	m.Close()
}

// setElement overwrites the first element of a BF16 tensor in the file at path.
func setElement(t *testing.T, path, name string, bits uint16) {
	t.Helper()
	h, err := safetensors.ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h.Tensors {
		if e.Name == name {
			binary.LittleEndian.PutUint16(raw[h.DataStart+int64(e.Begin):], bits)
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s has no tensor %s", path, name)
}

// EstimateLoad reads the headers alone and predicts what the load holds and converts: BF16
// converts through a scratch of the largest matrix and F32 (also split over shards) through
// none, exactly the loaded model's; a file truncated after its header is still estimated, and
// refused only by the load.
func TestEstimateLoad(t *testing.T) {
	c := smallConfig()
	for _, dtype := range []string{F32, BF16} {
		dir, _ := writeModel(t, c, dtype)
		for _, blocks := range []int{1, 0} {
			m, err := LoadWith(dir, LoadOptions{Blocks: blocks})
			if err != nil {
				t.Fatal(err)
			}
			fp, err := EstimateLoad(dir, m.Cfg, blocks)
			if err != nil {
				t.Fatal(err)
			}
			size := int64(4)
			if dtype != F32 {
				size = 2
			}
			if fp.Blocks != m.Blocks() || fp.Weights != size*m.Cfg.LoadedParams(m.Blocks()) || !slices.Equal(fp.DTypes, []string{dtype}) ||
				fp.Scratch != m.ScratchBytes(false) {
				t.Errorf("%s, %d blocks: estimate %+v; the model holds %d blocks, %d parameters, scratch %d",
					dtype, blocks, fp, m.Blocks(), m.Cfg.LoadedParams(m.Blocks()), m.ScratchBytes(false))
			}
			m.Close()
		}
	}
	// Shards by name parity put q_proj, k_proj and v_proj in different files.
	dir, _ := writeModel(t, c, F32)
	shard(t, dir)
	m, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fp, err := EstimateLoad(dir, m.Cfg, 0)
	if err != nil || fp.Scratch != 0 || m.ScratchBytes(false) != 0 || fp.Weights != 4*m.Cfg.Params() {
		t.Fatalf("sharded F32: %+v (%v), the model's scratch %d", fp, err, m.ScratchBytes(false))
	}
	// Truncated after the header: the estimate stands, the load refuses.
	dir, _ = writeModel(t, c, BF16)
	path := filepath.Join(dir, WeightsFile)
	h, err := safetensors.ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, h.DataStart+16); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fp, err := EstimateLoad(dir, cfg, 0); err != nil || fp.Weights != 2*cfg.Params() {
		t.Fatalf("truncated data: estimate %+v, %v", fp, err)
	}
	_, err = Load(dir, nil)
	wantErr(t, err, path, "truncated")
}

// shard rewrites dir's model.safetensors as two shards by name parity, with an index.
func shard(t *testing.T, dir string) {
	t.Helper()
	all, err := ReadTensors(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(mapsKeys(all))
	weightMap := map[string]string{}
	parts := [2][]string{}
	for i, n := range names {
		parts[i%2] = append(parts[i%2], n)
	}
	for p, ns := range parts {
		file := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[p]
		writeTensors(t, filepath.Join(dir, file), ns, all)
		for _, n := range ns {
			weightMap[n] = file
		}
	}
	if err := os.Remove(filepath.Join(dir, WeightsFile)); err != nil {
		t.Fatal(err)
	}
	idx, _ := json.Marshal(map[string]any{"weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644); err != nil {
		t.Fatal(err)
	}
}
