package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/hf"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/models/causallm/lmcfg"
)

// A budget over the host memory is refused with every part named and the way to run anyway;
// GELOATTACK_SKIP_PREFLIGHT makes it a warning. A budget that fits passes.
func TestBudgetRefusesByPart(t *testing.T) {
	if _, _, err := hostAvailable(); err != nil {
		t.Skipf("no available memory to compare with: %v", err)
	}
	t.Setenv(SkipPreflightEnv, "")
	b := Budget{What: "decode -model m", Reduce: "-max-texts"}
	b.Add(Part{"weights (float32, 32 blocks)", 1 << 50}, Part{"KV caches", 1 << 30}, Part{"nothing", 0})
	_, err := b.Check()
	if err == nil {
		t.Fatal("a 1 PiB budget was accepted")
	}
	for _, want := range []string{"resource pre-flight: decode -model m needs about 1048577 GiB of host memory but", "MemAvailable",
		"weights (float32, 32 blocks) 1048576 GiB", "KV caches 1.0 GiB", "reduce -max-texts", SkipPreflightEnv + "=1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "nothing") {
		t.Errorf("refusal %q names an empty part", err)
	}
	t.Setenv(SkipPreflightEnv, "1")
	if warn, err := b.Check(); err != nil || !strings.HasPrefix(warn, "warning: resource pre-flight:") {
		t.Errorf("with %s set: warning %q, error %v", SkipPreflightEnv, warn, err)
	}
	t.Setenv(SkipPreflightEnv, "")
	small := Budget{What: "x"}
	small.Add(Part{"weights", 1 << 20})
	if warn, err := small.Check(); err != nil || warn != "" {
		t.Errorf("1 MiB: warning %q, error %v", warn, err)
	}
	// Parts saturate instead of overflowing.
	huge := Budget{What: "x"}
	huge.Add(Part{"a", 1 << 62}, Part{"b", 1 << 62}, Part{"c", Product(1<<40, 1<<40)})
	if m := huge.Memory(); m != maxBytes {
		t.Errorf("saturated memory %d, want %d", m, int64(maxBytes))
	}
}

// A budget that writes more than the disk holds is refused, naming the directory.
func TestBudgetRefusesDisk(t *testing.T) {
	dir := t.TempDir()
	if _, ok := diskFree(dir); !ok {
		t.Skip("free disk space unknown here")
	}
	t.Setenv(SkipPreflightEnv, "")
	b := Budget{What: "model init -out m", Disk: 1 << 60, DiskPath: dir}
	if _, err := b.Check(); err == nil || !strings.Contains(err.Error(), "writes 1073741824 GiB but") || !strings.Contains(err.Error(), dir) {
		t.Errorf("1 EiB on disk: %v", err)
	}
}

// The language model's pre-flight: its shapes are bounded as products (the tokenizer's ids x
// hidden), and a shape within the bounds but beyond the machine is refused with its parts.
func TestEstimateLM(t *testing.T) {
	t.Setenv(SkipPreflightEnv, "")
	cfg := config.Run{LM: lmcfg.Default()}
	cfg.Train.BatchSize = 4
	if _, err := LMConfig(cfg, 300); err != nil {
		t.Fatal(err)
	}
	b, err := EstimateLM(cfg, 300, 400, 8000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Check(); err != nil {
		t.Errorf("the default lm model over 400 texts: %v", err)
	}
	wide := cfg
	wide.LM.Model.Hidden, wide.LM.Model.Heads = 1<<13, 64
	if _, err := EstimateLM(wide, 1<<20, 400, 8000); err == nil || !strings.Contains(err.Error(), "vocab_size x hidden_size = 1048576 x 8192") {
		t.Errorf("2^20 ids x hidden 8192: %v", err)
	}
	deep := cfg
	deep.LM.Model.Hidden, deep.LM.Model.Heads, deep.LM.Model.Layers, deep.LM.Model.MLP = 1<<12, 32, 1024, 1<<14
	b, err = EstimateLM(deep, 32000, 400, 8000)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := hostAvailable(); err == nil {
		if _, err := b.Check(); err == nil || !strings.Contains(err.Error(), "weights+grads+AdamW+checkpoint") || !strings.Contains(err.Error(), "task lm") {
			t.Errorf("a 2.7e11-parameter lm: %v", err)
		}
	}
}

// The stored weights' estimate reads the headers alone: a bfloat16 directory counts 2 bytes a
// parameter of the blocks loaded and a scratch of the largest matrix; a directory whose data is
// truncated after the header is still estimated (and refused by the memory before any load);
// without weight files every tensor counts as float32.
func TestStoredWeights(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	cfg, err := hf.Init(hf.InitOptions{Like: "llama3-8b", Layers: 3, Hidden: 64, Vocab: 300, Seed: 1, DType: hf.BF16, Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	parts := StoredWeights(dir, cfg, 2)
	want := []Part{{"weights (bfloat16, blocks 0..1 of 3)", 2 * cfg.LoadedParams(2)},
		{"float32 conversion buffers (one block's matrices)", cfg.ScratchBytes()}}
	if !slices.Equal(parts, want) {
		t.Errorf("blocks 0..1 of a bfloat16 directory: %v, want %v", parts, want)
	}
	if got := StoredWeights(dir, cfg, 3)[0]; got.Name != "weights (bfloat16, 3 blocks)" || got.Bytes != 2*cfg.Params() {
		t.Errorf("every block: %v", got)
	}
	// Kept converted, the 2 blocks loaded take their weights in float32; the host spares no more
	// than asked, and nothing past a budget of all its memory.
	if got := ConvertedWeights(dir, cfg, 2); got != 2*cfg.BlockBytes() {
		t.Errorf("ConvertedWeights of 2 bfloat16 blocks %d, want %d", got, 2*cfg.BlockBytes())
	}
	if avail, _, err := hostAvailable(); err == nil && avail > 2<<30 {
		if got := KeepConverted(Budget{}, 1<<20); got != 1<<20 {
			t.Errorf("KeepConverted of 1 MiB with nothing else held: %d", got)
		}
		var all Budget
		all.Add(Part{"everything", avail})
		if got := KeepConverted(all, 1<<20); got != 0 {
			t.Errorf("KeepConverted past a budget of all the memory: %d", got)
		}
	}
	// Truncated after the header, with a config.json of a model no machine holds.
	path := filepath.Join(dir, hf.WeightsFile)
	h, err := safetensors.ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, h.DataStart+8); err != nil {
		t.Fatal(err)
	}
	huge := cfg
	huge.Layers, huge.Hidden, huge.Intermediate, huge.Heads, huge.KVHeads, huge.HeadDim = 128, 16384, 65536, 128, 128, 128
	parts = StoredWeights(dir, huge, huge.Layers)
	// The tensors the header names count as bfloat16, the others as float32, the widest.
	if parts[0].Bytes <= 2*huge.Params() || parts[0].Bytes >= 4*huge.Params() {
		t.Errorf("a 2 TB config over a truncated file: %v", parts)
	}
	if _, _, err := hostAvailable(); err == nil {
		t.Setenv(SkipPreflightEnv, "")
		b := Budget{What: "store extract -model " + dir}
		b.Add(parts...)
		if _, err := b.Check(); err == nil || !strings.Contains(err.Error(), "weights (float32+bfloat16, 128 blocks)") {
			t.Errorf("refusal: %v", err)
		}
	}
	if _, err := hf.Check(dir); err == nil {
		t.Error("hf.Check accepted the truncated file")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := StoredWeights(dir, cfg, 3); got[0].Bytes != 4*cfg.Params() || got[1].Bytes != cfg.ScratchBytes() ||
		!strings.HasPrefix(got[0].Name, "weights (float32, 3 blocks") {
		t.Errorf("no weight files: %v", got)
	}
	if got := ConvertedWeights(dir, cfg, 3); got != 0 {
		t.Errorf("ConvertedWeights without weight files: %d", got)
	}
}
