package bert_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/bert/berttest"
)

// tinyConfig is the small BERT of these tests.
var tinyConfig = berttest.Tiny()

// writeTinyModel writes the tiny model of cfg's shapes drawn from seed (berttest.Exact: the same
// model in every dtype) with tensor names after prefix, and returns its directory.
func writeTinyModel(t *testing.T, cfg bert.Config, prefix string, dtype safetensors.DType, seed uint64) string {
	t.Helper()
	return berttest.Write(t, cfg, berttest.Exact(cfg, seed), prefix, dtype)
}

// refForward is a float64 textbook BERT on a PADDED batch with an attention mask: sequences are
// padded with token 0 to the longest length and padded keys get a -1e30 score. It returns, per
// sequence, the valid rows of every layer's output (index 0 = embeddings) and the pooled embedding.
func refForward(cfg bert.Config, seed uint64, seqs [][]int32) (layers [][][][]float64, pooled [][]float64) {
	w := berttest.Exact(cfg, seed)
	g := func(name string) []float64 {
		v := make([]float64, len(w[name]))
		for i, x := range w[name] {
			v[i] = float64(x)
		}
		return v
	}
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
				m, err := bert.LoadModel(dir, lib)
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
	m, err := bert.LoadModel(writeTinyModel(t, tinyConfig, "", safetensors.F32, 1), blas.Gonum())
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
	bad := map[string]func(c *bert.Config){
		"tanh gelu":        func(c *bert.Config) { c.HiddenAct = "gelu_new" },
		"roberta":          func(c *bert.Config) { c.ModelType = "roberta" },
		"heads not divide": func(c *bert.Config) { c.NumHeads = 3 },
		"relative pos":     func(c *bert.Config) { c.PositionEmbeddingType = "relative_key" },
		"zero eps":         func(c *bert.Config) { c.LayerNormEps = 0 },
	}
	for name, mut := range bad {
		cfg := tinyConfig
		mut(&cfg)
		dir := writeTinyModel(t, tinyConfig, "", safetensors.F32, 1)
		js, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := bert.LoadModel(dir, blas.Gonum()); err == nil {
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
	if _, err := bert.LoadModel(dir, blas.Gonum()); err == nil || !strings.Contains(err.Error(), "intermediate.dense.weight") {
		t.Errorf("shape mismatch: got %v, want an error naming intermediate.dense.weight", err)
	}
	if _, err := bert.LoadModel(t.TempDir(), blas.Gonum()); err == nil {
		t.Error("empty directory accepted")
	}
}
