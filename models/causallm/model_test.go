package causallm

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/models/causallm/lmcfg"
	"github.com/gelo-research/geloattack/models/hf"
)

// tinyModel is a 2-block decoder over 41 tokens with sequences of 7, its weights perturbed away
// from the initial ones (norm gains not 1) so that every parameter matters.
func tinyModel(t *testing.T) (*Model, lmcfg.Model) {
	t.Helper()
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	be.SetMinWork(1)
	cfg := lmcfg.Model{Hidden: 16, Layers: 2, Heads: 4, MLP: 24, Seq: 7, RopeTheta: 10000, Eps: 1e-5}
	m, err := New(be, cfg, 41, 3)
	if err != nil {
		t.Fatal(err)
	}
	w := m.Params().Data().ToHost()
	r := rand.New(rand.NewPCG(4, 4))
	for i := range w {
		w[i] += float32(r.NormFloat64() * 0.3)
	}
	if err := m.Params().Data().CopyFrom(w); err != nil {
		t.Fatal(err)
	}
	return m, cfg
}

func randomWindows(r *rand.Rand, B, T, V int) []int32 {
	win := make([]int32, B*(T+1))
	for i := range win {
		win[i] = int32(r.IntN(V))
	}
	return win
}

// TestLossMatchesLlamaAfterHFRoundTrip: the model written as a Hugging Face directory and read
// back by models/hf runs in models/llama (the host decoder the attacks use, itself checked
// against PyTorch) to logits whose mean next-token cross-entropy is the engine's loss: one check
// of the engine's forward pass (RoPE layout, causal attention, tied output) and of Export, Save
// and the loader's names.
func TestLossMatchesLlamaAfterHFRoundTrip(t *testing.T) {
	m, cfg := tinyModel(t)
	const B = 3
	T, V := cfg.Seq, m.Vocab()
	win := randomWindows(rand.New(rand.NewPCG(5, 5)), B, T, V)
	got, err := m.Loss(win, B)
	if err != nil {
		t.Fatal(err)
	}
	host, err := m.Export(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hf")
	if err := hf.Save(dir, m.HFConfig(1, 2), host, hf.F32); err != nil {
		t.Fatal(err)
	}
	back, err := hf.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([][]int32, B)
	for b := range seqs {
		seqs[b] = win[b*(T+1) : b*(T+1)+T]
	}
	dc, err := NewCPUDecoder(back)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	logits := make([]float32, B*T*V)
	if err := dc.Forward(context.Background(), seqs, nil, logits); err != nil {
		t.Fatal(err)
	}
	var want float64
	for b := 0; b < B; b++ {
		for i := 0; i < T; i++ {
			row := logits[(b*T+i)*V : (b*T+i+1)*V]
			mx := math.Inf(-1)
			for _, z := range row {
				mx = math.Max(mx, float64(z))
			}
			var s float64
			for _, z := range row {
				s += math.Exp(float64(z) - mx)
			}
			want += mx + math.Log(s) - float64(row[win[b*(T+1)+i+1]])
		}
	}
	want /= float64(B * T)
	if math.Abs(got-want) > 1e-5*math.Max(1, want) {
		t.Fatalf("engine loss %.7g, llama (after the Hugging Face round trip) %.7g", got, want)
	}
	t.Logf("loss %.7g, llama %.7g", got, want)
}

// TestGradientMatchesFiniteDifferences checks the gradient of every kind of parameter (the
// embedding, which is also the output projection; q, k, v, o; gate, up, down; the norms) against
// central differences of the loss in float64 terms.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	m, cfg := tinyModel(t)
	const B = 2
	win := randomWindows(rand.New(rand.NewPCG(6, 6)), B, cfg.Seq, m.Vocab())
	m.Params().ZeroGrad()
	if _, err := m.ForwardBackward(win, B); err != nil {
		t.Fatal(err)
	}
	grad := m.Params().Grad().ToHost()
	data := m.Params().Data()
	w := data.ToHost()
	r := rand.New(rand.NewPCG(7, 7))
	const h = 1e-2
	for _, pv := range m.Params().Views() {
		off := pv.Tensor.Offset() - data.Offset()
		for trial := 0; trial < 3; trial++ {
			i := off + r.IntN(pv.Tensor.Size())
			loss := func(x float32) float64 {
				old := w[i]
				w[i] = x
				if err := data.CopyFrom(w); err != nil {
					t.Fatal(err)
				}
				w[i] = old
				l, err := m.Loss(win, B)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			fd := (loss(w[i]+h) - loss(w[i]-h)) / (2 * h)
			if err := data.CopyFrom(w); err != nil {
				t.Fatal(err)
			}
			g := float64(grad[i])
			if math.Abs(fd-g) > 2e-3+3e-2*math.Abs(g) {
				t.Errorf("%s [%d]: gradient %.6g, finite difference %.6g", pv.Name, i-off, g, fd)
			}
		}
	}
}

// TestNamesAreHuggingFaces: every parameter carries a Hugging Face name that models/hf's loader
// expects, in the shapes it expects.
func TestNamesAreHuggingFaces(t *testing.T) {
	m, _ := tinyModel(t)
	host, err := m.Export(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hf")
	if err := hf.Save(dir, m.HFConfig(-1, -1), host, hf.F32); err != nil {
		t.Fatal(err)
	}
	tensors, err := hf.ReadTensors(filepath.Join(dir, hf.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	views := m.Params().Views()
	if len(tensors) != len(views) {
		t.Errorf("the Hugging Face file holds %d tensors, the model %d parameters", len(tensors), len(views))
	}
	for _, pv := range views {
		ft, ok := tensors[pv.Name]
		if !ok {
			t.Errorf("parameter %s is not in the written file", pv.Name)
			continue
		}
		if !equalShape(ft.Shape, pv.Shape) {
			t.Errorf("%s: file shape %v, parameter shape %v", pv.Name, ft.Shape, pv.Shape)
		}
	}
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
