package causallm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/torchcheck"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
)

// crossConfigs are the small configs checked against the PyTorch reference: Llama-2 style (MHA,
// untied), grouped-query with tied embeddings and llama3 rope scaling, Qwen2 style (q/k/v bias,
// rope_theta 1e6) and Qwen3 style (q/k norm, head_dim not hidden/heads).
var crossConfigs = map[string]map[string]any{
	"llama2-mha-untied": {
		"architectures": []string{"LlamaForCausalLM"}, "hidden_size": 64, "intermediate_size": 160,
		"num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "rms_norm_eps": 1e-5,
		"rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 300, "max_position_embeddings": 128,
	},
	"gqa-tied-llama3rope": {
		"architectures": []string{"LlamaForCausalLM"}, "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
		"rope_theta": 500000.0, "tie_word_embeddings": true, "vocab_size": 300, "max_position_embeddings": 256,
		"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
	},
	"qwen2-bias": {
		"architectures": []string{"Qwen2ForCausalLM"}, "hidden_size": 96, "intermediate_size": 192,
		"num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
		"rope_theta": 1e6, "tie_word_embeddings": false, "vocab_size": 300, "max_position_embeddings": 128,
		"sliding_window": 128, "use_sliding_window": false,
	},
	"qwen3-qknorm": {
		"architectures": []string{"Qwen3ForCausalLM"}, "hidden_size": 64, "intermediate_size": 128, "head_dim": 32,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
		"rope_theta": 1e6, "tie_word_embeddings": true, "vocab_size": 300, "max_position_embeddings": 128,
	},
}

// relDiff is the comparison norm of the cross-check: max |a-b| / max |b| over one tensor.
func relDiff(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(float64(a[i])-float64(b[i])))
		den = math.Max(den, math.Abs(float64(b[i])))
	}
	return num / math.Max(den, 1e-30)
}

// writeRandomModel saves a random-init model of cfg to a new directory. std 0.2 (not 0.02) makes
// attention far from uniform, so that masking and rotation errors show in the rows.
func writeRandomModel(t testing.TB, config map[string]any, seed uint64, dtype string) (string, *llama.Model) {
	t.Helper()
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := hf.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := llama.Random(cfg, seed, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := hf.Save(dir, config, m, dtype); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// capture runs the engine Decoder's Forward on one batch of texts and returns every tapped tensor under the reference
// script's names.
func capture(t testing.TB, m *llama.Model, texts [][]int32, logits bool) map[string][]float32 {
	t.Helper()
	total, longest := 0, 0
	for _, s := range texts {
		total += len(s)
		longest = max(longest, len(s))
	}
	dc, err := causallm.NewCPUDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	offs := []int{0}
	for _, s := range texts {
		offs = append(offs, offs[len(offs)-1]+len(s))
	}
	d := m.Cfg.Hidden
	out := map[string][]float32{}
	tap := func(p llama.Point, layer int, x []float32) error {
		for i := range texts {
			name := fmt.Sprintf("t%d.%s.%d", i, strings.ReplaceAll(p.String(), "-", "_"), layer)
			out[name] = append([]float32(nil), x[offs[i]*d:offs[i+1]*d]...)
		}
		return nil
	}
	var lg []float32
	if logits {
		lg = make([]float32, total*m.Cfg.VocabSize)
	}
	if err := dc.Forward(context.Background(), texts, tap, lg); err != nil {
		t.Fatal(err)
	}
	if logits {
		v := m.Cfg.VocabSize
		for i := range texts {
			out[fmt.Sprintf("t%d.logits", i)] = lg[offs[i]*v : offs[i+1]*v]
		}
	}
	return out
}

func randomTexts(seed uint64, vocab int, lens ...int) [][]int32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([][]int32, len(lens))
	for i, n := range lens {
		out[i] = make([]int32, n)
		for j := range out[i] {
			out[i][j] = int32(rng.IntN(vocab))
		}
	}
	return out
}

// TestTorchCrossCheck compares every layer's residual and attention-input rows, and the logits,
// with bench/torch_llama.py, an independent PyTorch implementation, on random-init checkpoints.
func TestTorchCrossCheck(t *testing.T) {
	script := torchcheck.Script(t, "../../bench/torch_llama.py")
	const tol = 1e-5
	for name, config := range crossConfigs {
		t.Run(name, func(t *testing.T) {
			dtype := hf.F32
			if strings.HasPrefix(name, "qwen2") {
				dtype = hf.BF16 // both sides read the same rounded weights
			}
			dir, m := writeRandomModel(t, config, 11, dtype)
			// Reload so that the loader is under test too.
			m2, err := hf.Load(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if dtype == hf.F32 && !slices.Equal(readWeight(t, m2, llama.Embedding, -1), readWeight(t, m, llama.Embedding, -1)) {
				t.Fatal("F32 round trip changed the embedding")
			}
			compareWithTorch(t, script, dir, m2, randomTexts(5, m.Cfg.VocabSize, 1, 17, 40), tol)
		})
	}
}

// compareWithTorch runs bench/torch_llama.py (script) on the model directory dir over texts and
// checks every layer's residual and attention-input rows and the logits of m (dir, loaded by Go)
// against it: max |go - torch| / max |torch| per tensor at most tol.
func compareWithTorch(t *testing.T, script, dir string, m *llama.Model, texts [][]int32, tol float64) {
	t.Helper()
	ids := map[string][][]int32{"texts": texts}
	raw, _ := json.Marshal(ids)
	tmp := t.TempDir()
	idsPath, outPath := filepath.Join(tmp, "ids.json"), filepath.Join(tmp, "ref.safetensors")
	if err := os.WriteFile(idsPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(torchcheck.Python, script, "--model", dir, "--ids", idsPath, "--out", outPath, "--logits")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	ref, err := hf.ReadTensors(outPath)
	if err != nil {
		t.Fatal(err)
	}
	got := capture(t, m, texts, true)
	want := len(texts) * (2*m.Cfg.Layers + 2)
	if len(ref) != want || len(got) != want {
		t.Fatalf("reference has %d tensors, Go %d, want %d", len(ref), len(got), want)
	}
	worst := 0.0
	for k, r := range ref {
		g, ok := got[k]
		if !ok || len(g) != len(r.Data) {
			t.Fatalf("tensor %s: Go has %d values, reference %d (shape %v)", k, len(g), len(r.Data), r.Shape)
		}
		e := relDiff(g, r.Data)
		worst = math.Max(worst, e)
		if e > tol {
			t.Errorf("%s: max abs diff / max abs value = %.3g > %g", k, e, tol)
		}
	}
	t.Logf("worst relative difference over %d tensors: %.3g", len(ref), worst)
}

// TestTorchCrossCheckModelDir checks the model directory named by GELOATTACK_CROSSCHECK_MODEL
// (scripts/build-decoder.sh sets it to the decoder it trained and exported) against
// bench/torch_llama.py as TestTorchCrossCheck checks random ones, on three texts of random ids.
// Skipped when the variable is unset.
func TestTorchCrossCheckModelDir(t *testing.T) {
	dir := os.Getenv("GELOATTACK_CROSSCHECK_MODEL")
	if dir == "" {
		t.Skip("GELOATTACK_CROSSCHECK_MODEL not set")
	}
	script, err := filepath.Abs("../../bench/torch_llama.py")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	compareWithTorch(t, script, dir, m, randomTexts(9, m.Cfg.VocabSize, 1, 23, m.Cfg.MaxLen()), 1e-5)
}

// readWeight is one weight of m as float32.
func readWeight(t testing.TB, m *llama.Model, p llama.Part, blk int) []float32 {
	t.Helper()
	rows, cols, err := m.Shape(p, blk)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, rows*cols)
	if err := m.Read(p, blk, x); err != nil {
		t.Fatal(err)
	}
	return x
}
