package causallm

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/internal/torchcheck"
	"github.com/gelo-research/geloattack/models/hf"
)

// TestTrainStepMatchesTorch runs one whole training step (forward, backward, clipping, AdamW) of
// a small decoder here and in bench/torch_lm.py --check, an independent PyTorch twin written
// from the step's specification without sight of this code, from the same weights and tokens: the
// loss, the gradient norm before clipping, every gradient's first values, sum and sum of squares,
// and every updated weight must agree. Skipped without /usr/bin/python3 and torch, unless
// GELOATTACK_REQUIRE_TORCH=1 (CI) makes that a failure.
func TestTrainStepMatchesTorch(t *testing.T) {
	script := torchcheck.Script(t, "../../bench/torch_lm.py")
	m, cfg := tinyModel(t)
	const B = 3
	const lr, wd, clip = 1e-2, 0.1, 0.5
	win := randomWindows(rand.New(rand.NewPCG(8, 8)), B, cfg.Seq, m.Vocab())
	dir := t.TempDir()
	host, err := m.Export(nil)
	if err != nil {
		t.Fatal(err)
	}
	hfDir := filepath.Join(dir, "hf")
	if err := hf.Save(hfDir, m.HFConfig(-1, -1), host, hf.F32); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(hfDir, hf.WeightsFile), filepath.Join(dir, "weights.safetensors")); err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, 4*len(win))
	for i, v := range win {
		binary.LittleEndian.PutUint32(tok[4*i:], uint32(v))
	}
	step, _ := json.Marshal(map[string]any{"lr": lr, "weight_decay": wd, "heads": cfg.Heads, "clip": clip, "batch": B, "seq": cfg.Seq})
	for name, b := range map[string][]byte{"tokens.bin": tok, "step.json": step} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(torchcheck.Python, script, "--check", dir).CombinedOutput(); err != nil {
		t.Fatalf("%s --check: %v\n%s", script, err, out)
	}
	var ref struct {
		Loss     float64              `json:"loss"`
		GradNorm float64              `json:"grad_norm"`
		Grads    map[string][]float64 `json:"grads"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "torch_out.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	after, err := hf.ReadTensors(filepath.Join(dir, "torch_after.safetensors"))
	if err != nil {
		t.Fatal(err)
	}

	ps := m.Params()
	ps.ZeroGrad()
	loss, err := m.ForwardBackward(win, B)
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(loss - ref.Loss); d > 2e-6*ref.Loss {
		t.Errorf("loss %.8g, torch %.8g", loss, ref.Loss)
	}
	grads := map[string][]float32{}
	for _, pv := range ps.Views() {
		grads[pv.Name] = pv.Tensor.Grad().ToHost()
	}
	gnorm := engine.ClipGradNorm(ps, clip)
	if math.Abs(gnorm-ref.GradNorm) > 1e-5*ref.GradNorm {
		t.Errorf("gradient norm %.8g, torch %.8g", gnorm, ref.GradNorm)
	}
	if !(gnorm > clip) {
		t.Errorf("gradient norm %.3g does not exceed the clip %g: the test would not exercise clipping", gnorm, clip)
	}
	opt, err := engine.NewAdamW(ps, engine.AdamWConfig{LR: lr, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: wd})
	if err != nil {
		t.Fatal(err)
	}
	opt.Step()
	checked, skipped := 0, 0
	for _, pv := range ps.Views() {
		g := grads[pv.Name]
		sum := ref.Grads[pv.Name]
		if len(sum) < 10 {
			t.Fatalf("torch_out.json: gradient summary of %s has %d values", pv.Name, len(sum))
		}
		var s, s2, gmax float64
		for _, x := range g {
			s += float64(x)
			s2 += float64(x) * float64(x)
			gmax = math.Max(gmax, math.Abs(float64(x)))
		}
		for i := 0; i < 8 && i < len(g); i++ {
			if math.Abs(float64(g[i])-sum[i]) > 1e-5*gmax {
				t.Errorf("%s: gradient [%d] %.7g, torch %.7g", pv.Name, i, g[i], sum[i])
			}
		}
		n := len(sum)
		if math.Abs(s-sum[n-2]) > 1e-5*gmax*math.Sqrt(float64(len(g))) || math.Abs(s2-sum[n-1]) > 1e-5*s2 {
			t.Errorf("%s: gradient sum %.7g and sum of squares %.7g, torch %.7g and %.7g", pv.Name, s, s2, sum[n-2], sum[n-1])
		}
		// A first AdamW step moves each weight by about lr * sign(g): where g is near zero the two
		// float32 gradients may disagree in sign, so only weights whose gradient is at least 1e-3
		// of the tensor's largest are compared.
		w := pv.Tensor.ToHost()
		ta, ok := after[pv.Name]
		if !ok || len(ta.Data) != len(w) {
			t.Fatalf("torch_after.safetensors lacks %s or has another size", pv.Name)
		}
		for i := range w {
			if math.Abs(float64(g[i])) < 1e-3*gmax {
				skipped++
				continue
			}
			checked++
			if d := math.Abs(float64(w[i] - ta.Data[i])); d > 1e-4*lr+2e-7 {
				t.Errorf("%s [%d]: weight after the step %.8g, torch %.8g", pv.Name, i, w[i], ta.Data[i])
				break
			}
		}
	}
	t.Logf("loss %.7g (torch %.7g), grad norm %.7g (torch %.7g); %d updated weights compared, %d with near-zero gradients left out",
		loss, ref.Loss, gnorm, ref.GradNorm, checked, skipped)
}
