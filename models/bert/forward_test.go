package bert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
)

// tinyConfig is a small BERT for tests that need no download.
var tinyConfig = Config{
	ModelType: "bert", HiddenSize: 8, NumLayers: 2, NumHeads: 2, IntermediateSize: 12,
	MaxPositions: 16, TypeVocabSize: 2, VocabSize: 20, LayerNormEps: 1e-12, HiddenAct: "gelu",
}

// tinyWeights draws every tensor of a BERT with cfg's shapes. Values are n/1024 with |n| <= 256, and
// LayerNorm weights 1 + n/128 with |n| <= 32: all need at most 8 significant bits, so they are exact
// in float16 and bfloat16 and all three file encodings hold the same model.
func tinyWeights(cfg Config, seed uint64) map[string]struct {
	shape []int
	v     []float64
} {
	r := rand.New(rand.NewPCG(seed, 1))
	out := map[string]struct {
		shape []int
		v     []float64
	}{}
	add := func(name string, shape ...int) {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(r.IntN(513)-256) / 1024
			if strings.HasSuffix(name, "LayerNorm.weight") {
				v[i] = 1 + float64(r.IntN(65)-32)/128
			}
		}
		out[name] = struct {
			shape []int
			v     []float64
		}{shape, v}
	}
	h, f := cfg.HiddenSize, cfg.IntermediateSize
	add("embeddings.word_embeddings.weight", cfg.VocabSize, h)
	add("embeddings.position_embeddings.weight", cfg.MaxPositions, h)
	add("embeddings.token_type_embeddings.weight", cfg.TypeVocabSize, h)
	add("embeddings.LayerNorm.weight", h)
	add("embeddings.LayerNorm.bias", h)
	for i := 0; i < cfg.NumLayers; i++ {
		p := fmt.Sprintf("encoder.layer.%d.", i)
		for _, m := range []string{"query", "key", "value"} {
			add(p+"attention.self."+m+".weight", h, h)
			add(p+"attention.self."+m+".bias", h)
		}
		add(p+"attention.output.dense.weight", h, h)
		add(p+"attention.output.dense.bias", h)
		add(p+"attention.output.LayerNorm.weight", h)
		add(p+"attention.output.LayerNorm.bias", h)
		add(p+"intermediate.dense.weight", f, h)
		add(p+"intermediate.dense.bias", f)
		add(p+"output.dense.weight", h, f)
		add(p+"output.dense.bias", h)
		add(p+"output.LayerNorm.weight", h)
		add(p+"output.LayerNorm.bias", h)
	}
	return out
}

// writeTinyModel writes config.json and model.safetensors (in dtype) into a new directory.
func writeTinyModel(t *testing.T, cfg Config, prefix string, dtype safetensors.DType, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	// The values are exact in every dtype, so the writer's rounding leaves them as drawn.
	weights := tinyWeights(cfg, seed)
	names := slices.Sorted(maps.Keys(weights))
	specs := make([]safetensors.Spec, len(names))
	for i, name := range names {
		specs[i] = safetensors.Spec{Name: prefix + name, DType: dtype, Shape: weights[name].shape}
	}
	var buf bytes.Buffer
	sw, err := safetensors.NewWriter(&buf, map[string]string{"format": "pt"}, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		x := make([]float32, len(weights[name].v))
		for i, v := range weights[name].v {
			x[i] = float32(v)
		}
		if err := sw.WriteTensor(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// refForward is a float64 textbook BERT on a PADDED batch with an attention mask: sequences are
// padded with token 0 to the longest length and padded keys get a -1e30 score. It returns, per
// sequence, the valid rows of every layer's output (index 0 = embeddings) and the pooled embedding.
func refForward(cfg Config, seed uint64, seqs [][]int32) (layers [][][][]float64, pooled [][]float64) {
	w := tinyWeights(cfg, seed)
	g := func(name string) []float64 { return w[name].v }
	h, f, heads := cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHeads
	dh := h / heads
	T := 0
	for _, s := range seqs {
		T = max(T, len(s))
	}
	ln := func(x []float64, wt, b []float64) {
		var mean, v float64
		for _, a := range x {
			mean += a
		}
		mean /= float64(len(x))
		for _, a := range x {
			v += (a - mean) * (a - mean)
		}
		v /= float64(len(x))
		for j := range x {
			x[j] = (x[j]-mean)/math.Sqrt(v+cfg.LayerNormEps)*wt[j] + b[j]
		}
	}
	lin := func(x []float64, wt, b []float64, out int) []float64 {
		in := len(x)
		y := make([]float64, out)
		for o := 0; o < out; o++ {
			y[o] = b[o]
			for i := 0; i < in; i++ {
				y[o] += wt[o*in+i] * x[i]
			}
		}
		return y
	}
	layers = make([][][][]float64, len(seqs))
	pooled = make([][]float64, len(seqs))
	for b, s := range seqs {
		x := make([][]float64, T)
		for p := 0; p < T; p++ {
			id := 0
			if p < len(s) {
				id = int(s[p])
			}
			x[p] = make([]float64, h)
			for j := 0; j < h; j++ {
				x[p][j] = g("embeddings.word_embeddings.weight")[id*h+j] + g("embeddings.position_embeddings.weight")[p*h+j] + g("embeddings.token_type_embeddings.weight")[j]
			}
			ln(x[p], g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"))
		}
		snap := func() [][]float64 {
			out := make([][]float64, len(s))
			for p := range out {
				out[p] = append([]float64(nil), x[p]...)
			}
			return out
		}
		layers[b] = append(layers[b], snap())
		for l := 0; l < cfg.NumLayers; l++ {
			p := fmt.Sprintf("encoder.layer.%d.", l)
			q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
			for i := 0; i < T; i++ {
				q[i] = lin(x[i], g(p+"attention.self.query.weight"), g(p+"attention.self.query.bias"), h)
				k[i] = lin(x[i], g(p+"attention.self.key.weight"), g(p+"attention.self.key.bias"), h)
				v[i] = lin(x[i], g(p+"attention.self.value.weight"), g(p+"attention.self.value.bias"), h)
			}
			nx := make([][]float64, T)
			for i := 0; i < T; i++ {
				ctx := make([]float64, h)
				for hd := 0; hd < heads; hd++ {
					sc := make([]float64, T)
					mx := math.Inf(-1)
					for j := 0; j < T; j++ {
						for d := 0; d < dh; d++ {
							sc[j] += q[i][hd*dh+d] * k[j][hd*dh+d]
						}
						sc[j] /= math.Sqrt(float64(dh))
						if j >= len(s) {
							sc[j] = -1e30 // the attention mask
						}
						mx = math.Max(mx, sc[j])
					}
					var sum float64
					for j := range sc {
						sc[j] = math.Exp(sc[j] - mx)
						sum += sc[j]
					}
					for j := 0; j < T; j++ {
						for d := 0; d < dh; d++ {
							ctx[hd*dh+d] += sc[j] / sum * v[j][hd*dh+d]
						}
					}
				}
				a := lin(ctx, g(p+"attention.output.dense.weight"), g(p+"attention.output.dense.bias"), h)
				for j := range a {
					a[j] += x[i][j]
				}
				ln(a, g(p+"attention.output.LayerNorm.weight"), g(p+"attention.output.LayerNorm.bias"))
				m := lin(a, g(p+"intermediate.dense.weight"), g(p+"intermediate.dense.bias"), f)
				for j := range m {
					m[j] = 0.5 * m[j] * (1 + math.Erf(m[j]/math.Sqrt2))
				}
				o := lin(m, g(p+"output.dense.weight"), g(p+"output.dense.bias"), h)
				for j := range o {
					o[j] += a[j]
				}
				ln(o, g(p+"output.LayerNorm.weight"), g(p+"output.LayerNorm.bias"))
				nx[i] = o
			}
			x = nx
			layers[b] = append(layers[b], snap())
		}
		pm := make([]float64, h)
		for p := range s {
			for j := range pm {
				pm[j] += x[p][j] / float64(len(s))
			}
		}
		var nrm float64
		for _, a := range pm {
			nrm += a * a
		}
		for j := range pm {
			pm[j] /= math.Sqrt(nrm)
		}
		pooled[b] = pm
	}
	return layers, pooled
}

func TestForwardMatchesPaddedMaskedReference(t *testing.T) {
	const seed = 7
	seqs := [][]int32{{2, 5, 9, 3}, {2, 11, 3}, {2, 4, 4, 4, 17, 19, 1, 3}, {2, 3}}
	refLayers, refPooled := refForward(tinyConfig, seed, seqs)
	for _, dt := range []safetensors.DType{safetensors.F32, safetensors.F16, safetensors.BF16} {
		for _, prefix := range []string{"", "bert."} {
			dir := writeTinyModel(t, tinyConfig, prefix, dt, seed)
			for _, lib := range []*blas.Library{blas.Gonum(), blas.Default()} {
				m, err := LoadModel(dir, lib)
				if err != nil {
					t.Fatalf("%s %q: %v", dt, prefix, err)
				}
				for _, workers := range []int{1, 3} {
					ws, err := m.NewWorkspace(32, 16, workers)
					if err != nil {
						t.Fatal(err)
					}
					h := m.Hidden()
					for layer := 0; layer <= m.NumLayers(); layer++ {
						hidden := make([]float32, 32*h)
						pooled := make([]float32, len(seqs)*h)
						if err := m.Forward(context.Background(), ws, seqs, layer, hidden, pooled); err != nil {
							t.Fatal(err)
						}
						row := 0
						var worst float64
						for b, s := range seqs {
							for p := range s {
								for j := 0; j < h; j++ {
									worst = math.Max(worst, math.Abs(float64(hidden[row*h+j])-refLayers[b][layer][p][j]))
								}
								row++
							}
							for j := 0; j < h; j++ {
								worst = math.Max(worst, math.Abs(float64(pooled[b*h+j])-refPooled[b][j]))
							}
						}
						if worst > 2e-5 {
							t.Errorf("%s prefix %q %s workers %d layer %d: max |diff| %g from the float64 padded reference", dt, prefix, lib.Name(), workers, layer, worst)
						}
					}
				}
			}
		}
	}
}

func TestForwardRejectsBadInput(t *testing.T) {
	m, err := LoadModel(writeTinyModel(t, tinyConfig, "", safetensors.F32, 1), blas.Gonum())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := m.NewWorkspace(10, 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h := m.Hidden()
	cases := map[string]struct {
		seqs   [][]int32
		layer  int
		hidden []float32
	}{
		"layer -1":         {[][]int32{{1, 2}}, -1, nil},
		"layer 3":          {[][]int32{{1, 2}}, 3, nil},
		"empty sequence":   {[][]int32{{}}, 1, nil},
		"too long":         {[][]int32{{1, 2, 3, 4, 5, 6, 7}}, 1, nil},
		"over budget":      {[][]int32{{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {1}}, 1, nil},
		"id out of vocab":  {[][]int32{{1, 20}}, 1, nil},
		"negative id":      {[][]int32{{-1}}, 1, nil},
		"short hidden buf": {[][]int32{{1, 2}}, 1, make([]float32, 2*h-1)},
	}
	for name, c := range cases {
		if err := m.Forward(ctx, ws, c.seqs, c.layer, c.hidden, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.Forward(cancelled, ws, [][]int32{{1, 2}}, 2, nil, nil); err == nil {
		t.Error("cancelled context: no error")
	}
	if _, err := m.NewWorkspace(4, 17, 1); err == nil {
		t.Error("workspace longer than max_position_embeddings accepted")
	}
}

func TestLoadModelRejects(t *testing.T) {
	bad := map[string]func(c *Config){
		"tanh gelu":        func(c *Config) { c.HiddenAct = "gelu_new" },
		"roberta":          func(c *Config) { c.ModelType = "roberta" },
		"heads not divide": func(c *Config) { c.NumHeads = 3 },
		"relative pos":     func(c *Config) { c.PositionEmbeddingType = "relative_key" },
		"zero eps":         func(c *Config) { c.LayerNormEps = 0 },
	}
	for name, mut := range bad {
		cfg := tinyConfig
		mut(&cfg)
		dir := writeTinyModel(t, tinyConfig, "", safetensors.F32, 1)
		js, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadModel(dir, blas.Gonum()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Weights that disagree with config.json: a wider hidden size than the tensors have.
	dir := writeTinyModel(t, tinyConfig, "", safetensors.F32, 1)
	cfg := tinyConfig
	cfg.IntermediateSize = 16
	js, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadModel(dir, blas.Gonum()); err == nil || !strings.Contains(err.Error(), "intermediate.dense.weight") {
		t.Errorf("shape mismatch: got %v, want an error naming intermediate.dense.weight", err)
	}
	if _, err := LoadModel(t.TempDir(), blas.Gonum()); err == nil {
		t.Error("empty directory accepted")
	}
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range min(len(a), len(b)) {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}
