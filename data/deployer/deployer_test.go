package deployer_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/internal/torchcheck"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
)

const script = "../../bench/torch_deploy.py"

// newModel writes a random-init checkpoint like `geloattack model init -like like -layers layers
// -hidden hidden -vocab vocab` (bf16 weights, as real checkpoints ship) and loads it as geloattack does.
func newModel(t testing.TB, like string, layers, hidden, vocab int, seed uint64) (string, *llama.Model) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if _, err := hf.Init(hf.InitOptions{Like: like, Layers: layers, Hidden: hidden, Vocab: vocab, Seed: seed, DType: hf.BF16, Out: dir}); err != nil {
		t.Fatal(err)
	}
	m, err := hf.Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// randomTexts gives texts of the given lengths, each starting with one BOS (id 1), ids 10, 11, ...
// (not in order, so that the store's id order is tested too).
func randomTexts(seed uint64, vocab int, lens ...int) []deployer.Text {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]deployer.Text, len(lens))
	for i, n := range lens {
		toks := make([]int32, n)
		toks[0] = 1
		for j := 1; j < n; j++ {
			toks[j] = int32(rng.IntN(vocab))
		}
		out[i] = deployer.Text{ID: int64(10 + (i*7)%len(lens)), Tokens: toks, BOS: 1}
	}
	return out
}

// runDeployer writes texts as the deployer's input and runs bench/torch_deploy.py on them.
func runDeployer(t testing.TB, py, model string, texts []deployer.Text, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "texts.jsonl")
	var buf bytes.Buffer
	if err := deployer.WriteTexts(&buf, texts); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "rows")
	cmd := exec.Command(torchcheck.Python, append([]string{py, "--model", model, "--tokens", in, "--out", out, "--threads", "1"}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", py, err, b)
	}
	return out
}

// geloRows runs geloattack's float32 forward on every text alone and returns rows[point][layer][text]
// (T, d), the rows store extract and the attacks compute.
func geloRows(t testing.TB, m *llama.Model, texts []deployer.Text) map[string][][][]float32 {
	t.Helper()
	seqs := make([][]int32, len(texts))
	total, longest := 0, 0
	for i, x := range texts {
		seqs[i] = x.Tokens
		total += len(x.Tokens)
		longest = max(longest, len(x.Tokens))
	}
	dc, err := causallm.NewCPUDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	offs := []int{0}
	for _, s := range seqs {
		offs = append(offs, offs[len(offs)-1]+len(s))
	}
	d, n := m.Cfg.Hidden, m.Cfg.Layers
	out := map[string][][][]float32{deployer.AttnInput: make([][][]float32, n), deployer.Residual: make([][][]float32, n+1)}
	tap := func(p llama.Point, layer int, x []float32) error {
		per := make([][]float32, len(texts))
		for i := range texts {
			per[i] = slices.Clone(x[offs[i]*d : offs[i+1]*d])
		}
		out[p.String()][layer] = per
		return nil
	}
	if err := dc.Forward(context.Background(), seqs, tap, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

// importedErrors imports point's rows of block from the deployer run in dir, checks that the store
// holds each text's tokens at their true positions (BOS rows dropped when the run dropped them),
// and returns each stored row's relative error ||x_deployer − x_gelo|| / ||x_gelo||.
func importedErrors(t testing.TB, dir, point string, block int, texts []deployer.Text, want [][]float32) []float64 {
	t.Helper()
	sdir := filepath.Join(t.TempDir(), fmt.Sprintf("%s.%d", point, block))
	info, err := deployer.Import(context.Background(), dir, point, block, sdir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(sdir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := info.HiddenSize
	if s.D() != d || s.NumTexts() != len(texts) || s.Meta().Layer != block {
		t.Fatalf("%s.%d: store d %d, %d texts, layer %d; want d %d, %d texts, layer %d", point, block, s.D(), s.NumTexts(), s.Meta().Layer, d, len(texts), block)
	}
	var errs []float64
	for i, x := range texts {
		k, ok := s.IndexOf(x.ID)
		if !ok {
			t.Fatalf("%s.%d: text id %d not in the store", point, block, x.ID)
		}
		first := 0
		if info.BOS == store.SpecialDropped {
			first = x.BOS
		}
		n := s.NumTokens(k)
		if n != len(x.Tokens)-first {
			t.Fatalf("%s.%d: text %d: %d rows, want %d", point, block, x.ID, n, len(x.Tokens)-first)
		}
		pos, tok, rows := make([]int32, n), make([]int32, n), make([]float32, n*d)
		if err := s.Positions(k, 0, n, pos); err != nil {
			t.Fatal(err)
		}
		if err := s.TokenIDs(k, 0, n, tok); err != nil {
			t.Fatal(err)
		}
		if err := s.Rows(k, 0, n, rows); err != nil {
			t.Fatal(err)
		}
		for r := range n {
			p := first + r
			if int(pos[r]) != p || tok[r] != x.Tokens[p] {
				t.Fatalf("%s.%d: text %d row %d: position %d token %d, want %d and %d", point, block, x.ID, r, pos[r], tok[r], p, x.Tokens[p])
			}
			errs = append(errs, relErr(rows[r*d:(r+1)*d], want[i][p*d:(p+1)*d]))
		}
	}
	return errs
}

// relErr is ||a − b||₂ / ||b||₂ in float64.
func relErr(a, b []float32) float64 {
	var num, den float64
	for j := range a {
		e := float64(a[j]) - float64(b[j])
		num += e * e
		den += float64(b[j]) * float64(b[j])
	}
	return math.Sqrt(num / den)
}

// quantile is the q-quantile of xs (the value at rank ceil(q·n)), xs unchanged.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}

func TestWriteTexts(t *testing.T) {
	var buf bytes.Buffer
	if err := deployer.WriteTexts(&buf, []deployer.Text{{ID: 3, Tokens: []int32{1, 5, 9}, BOS: 1}, {ID: 0, Tokens: []int32{7}}}); err != nil {
		t.Fatal(err)
	}
	want := `{"id":3,"tokens":[1,5,9],"bos":1}` + "\n" + `{"id":0,"tokens":[7],"bos":0}` + "\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
	back, err := deployer.ReadTexts([]byte(want))
	if err != nil || len(back) != 2 || back[0].ID != 3 || back[0].BOS != 1 || !slices.Equal(back[0].Tokens, []int32{1, 5, 9}) ||
		back[1].ID != 0 || back[1].BOS != 0 || !slices.Equal(back[1].Tokens, []int32{7}) {
		t.Errorf("ReadTexts of WriteTexts' output: %+v, %v", back, err)
	}
	for name, in := range map[string]string{
		"unknown field": `{"id":1,"tokens":[1],"bos":0,"text":"x"}`,
		"duplicate id":  `{"id":1,"tokens":[1]}` + "\n" + `{"id":1,"tokens":[2]}`,
		"bos past end":  `{"id":1,"tokens":[1],"bos":2}`,
		"not json":      `{"id":1,`,
	} {
		if _, err := deployer.ReadTexts([]byte(in)); err == nil {
			t.Errorf("ReadTexts %s: accepted", name)
		}
	}
	for name, texts := range map[string][]deployer.Text{
		"negative id":    {{ID: -1, Tokens: []int32{1}}},
		"duplicate id":   {{ID: 2, Tokens: []int32{1}}, {ID: 2, Tokens: []int32{4}}},
		"no tokens":      {{ID: 2}},
		"bos past end":   {{ID: 2, Tokens: []int32{1}, BOS: 2}},
		"negative bos":   {{ID: 2, Tokens: []int32{1}, BOS: -1}},
		"second is bad:": {{ID: 1, Tokens: []int32{1}}, {ID: 2}},
	} {
		if err := deployer.WriteTexts(&bytes.Buffer{}, texts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// goodInfo is a deployer.json as the script writes it (the fields ReadInfo checks).
const goodInfo = `{"format": "geloattack-deployer/1", "generator": "bench/torch_deploy.py", "framework": "pytorch",
 "torch": "1.13.0", "python": "3.11.2", "numpy": "1.24.2", "device": "cpu", "device_name": "x86_64 CPU", "threads": 1,
 "dtype": "bf16", "kernels": "emulate", "attention": "eager", "model": "/m", "architecture": "LlamaForCausalLM",
 "config_sha256": "00", "weight_dtypes": ["BF16"], "layers": 3, "hidden_size": 64, "input": "/t.jsonl",
 "input_sha256": "00", "texts": 3, "tokens": 30, "points": ["attn-input", "residual"], "blocks": [0, 2],
 "bos": "dropped", "rows_dtype": "float32", "text_embedding": "mean"}`

func TestReadInfo(t *testing.T) {
	write := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, deployer.InfoFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := write(goodInfo)
	in, err := deployer.ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := in.Stack(); s != "PyTorch 1.13.0 bf16 (emulate kernels, eager attention) on cpu (x86_64 CPU)" {
		t.Errorf("Stack() = %q", s)
	}
	if p, err := in.PointDir(dir, deployer.Residual, 2); err != nil || p != filepath.Join(dir, "residual.2") {
		t.Errorf("PointDir(residual, 2) = %q, %v", p, err)
	}
	for _, c := range []struct {
		point string
		block int
	}{{deployer.AttnInput, 1}, {deployer.Residual, 4}, {"mlp", 0}} {
		if _, err := in.PointDir(dir, c.point, c.block); err == nil {
			t.Errorf("PointDir(%s, %d): accepted rows the run did not write", c.point, c.block)
		}
	}
	if _, err := deployer.ReadInfo(t.TempDir()); err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("missing deployer.json: %v", err)
	}
	for name, body := range map[string]string{
		"unknown field": strings.Replace(goodInfo, `"threads"`, `"thread"`, 1),
		"format":        strings.Replace(goodInfo, "deployer/1", "deployer/2", 1),
		"dtype":         strings.Replace(goodInfo, `"bf16"`, `"int8"`, 1),
		"bos":           strings.Replace(goodInfo, `"dropped"`, `"gone"`, 1),
		"block range":   strings.Replace(goodInfo, `[0, 2]`, `[0, 3]`, 1),
		"point":         strings.Replace(goodInfo, `"residual"]`, `"mlp"]`, 1),
		"not json":      goodInfo[:40],
	} {
		if _, err := deployer.ReadInfo(write(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The deployer bound grows from fp32 to fp16 to bf16 and with depth, and refuses what it cannot bound.
func TestRecomputeBoundOrdersTheDeployers(t *testing.T) {
	prev := 0.0
	for _, dt := range []string{"fp32", "fp16", "bf16"} {
		b, err := fptol.Recompute(dt, 0, 256)
		if err != nil || !(b > prev) {
			t.Errorf("fptol.Recompute(%s, 0) = %g, %v: want above the finer dtype's %g", dt, b, err, prev)
		}
		if deep, _ := fptol.Recompute(dt, 8, 256); !(deep > b) {
			t.Errorf("fptol.Recompute(%s, 8) = %g: want above depth 0's %g", dt, deep, b)
		}
		prev = b
	}
	if _, err := fptol.Recompute("fp8", 0, 256); err == nil {
		t.Error("fp8: accepted")
	}
	if _, err := fptol.Recompute("bf16", -1, 256); err == nil {
		t.Error("depth -1: accepted")
	}
}

// TestTorchDeployerBF16 runs the PyTorch deployer in bf16 on a tiny random-init Llama-3-shaped
// checkpoint and checks what geloattack reads back: every text's tokens at their true positions
// (BOS dropped), rows of the right width, and rows within fptol.Recompute of geloattack's float32
// rows but not equal to them (a bf16 deployer that matched float32 would not be running bf16).
func TestTorchDeployerBF16(t *testing.T) {
	py := torchcheck.Script(t, script)
	model, m := newModel(t, "llama3-8b", 2, 64, 256, 5)
	texts := randomTexts(1, 256, 12, 23, 2, 9)
	dir := runDeployer(t, py, model, texts, "--dtype", "bf16", "--blocks", "0,1", "--points", "attn-input,residual", "--drop-bos")
	info, err := deployer.ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.DType != "bf16" || info.Torch == "" || info.Texts != len(texts) || info.Layers != 2 || info.HiddenSize != 64 || !strings.Contains(info.Stack(), "bf16") {
		t.Fatalf("deployer.json: %+v", info)
	}
	if err := info.CheckModel(model); err != nil {
		t.Fatal(err)
	}
	other, _ := newModel(t, "llama3-8b", 3, 64, 256, 5)
	if err := info.CheckModel(other); err == nil {
		t.Error("CheckModel accepted a different config")
	}
	want := geloRows(t, m, texts)
	u, err := deployer.Unit(info.DType)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		point        string
		block, depth int
	}{{deployer.AttnInput, 0, 0}, {deployer.AttnInput, 1, 1}, {deployer.Residual, 0, 0}, {deployer.Residual, 1, 1}} {
		errs := importedErrors(t, dir, c.point, c.block, texts, want[c.point][c.block])
		worst := slices.Max(errs)
		bound, err := fptol.Recompute(info.DType, c.depth, m.Cfg.Hidden)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s.%d: %d rows, relative error max %.3g p50 %.3g (bound %.3g)", c.point, c.block, len(errs), worst, quantile(errs, 0.5), bound)
		switch {
		case c.point == deployer.Residual && c.block == 0:
			// The embedding rows of a bf16 checkpoint are bf16 values in both stacks.
			if worst != 0 {
				t.Errorf("%s.%d: embedding rows differ (max %g): the rows or tokens are misplaced", c.point, c.block, worst)
			}
		case worst > bound:
			t.Errorf("%s.%d: relative error %.3g past the bound %.3g", c.point, c.block, worst, bound)
		case worst < u/8:
			// bf16 storage alone makes a row's relative error about u/sqrt(3).
			t.Errorf("%s.%d: relative error %.3g: too close to float32 for a bf16 deployer (u = %.3g)", c.point, c.block, worst, u)
		}
	}
}

// TestDeployerSweep measures the deployer's row error against geloattack's float32 rows per dtype,
// depth and width, the data behind fptol.Recompute's fit. It takes minutes, so it runs only with
// GELOATTACK_DEPLOYER_SWEEP=1 (GELOATTACK_DEPLOYER_SWEEP_WIDTHS=64,256 picks the widths, _LAYERS
// the depth, _TOKENS the text length, _DTYPES the deployer dtypes, _LIKE the model init preset, _ARGS
// extra deployer flags such as "--attention fused"):
//
//	GELOATTACK_DEPLOYER_SWEEP=1 go test ./data/deployer -run DeployerSweep -v -timeout 1h
func TestDeployerSweep(t *testing.T) {
	if os.Getenv("GELOATTACK_DEPLOYER_SWEEP") != "1" {
		t.Skip("GELOATTACK_DEPLOYER_SWEEP=1 runs the sweep")
	}
	py := torchcheck.Script(t, script)
	env := func(k, def string) string {
		if v := os.Getenv("GELOATTACK_DEPLOYER_SWEEP_" + k); v != "" {
			return v
		}
		return def
	}
	ints := func(s string) []int {
		var out []int
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			out = append(out, v)
		}
		return out
	}
	widths, layers, tokens := ints(env("WIDTHS", "64,256,1024")), ints(env("LAYERS", "8"))[0], ints(env("TOKENS", "64"))[0]
	extra := strings.Fields(env("ARGS", ""))
	like := env("LIKE", "llama3-8b")
	var blocks []int
	for b := 0; b < layers; b = max(1, 2*b) {
		blocks = append(blocks, b)
	}
	blocks = append(blocks, layers-1)
	blocks = slices.Compact(blocks)
	bs := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(blocks)), ","), "[]")
	t.Logf("%s, %d layers, %d texts of %d tokens, deployer flags %q", like, layers, 8, tokens, extra)
	t.Logf("%-5s %5s %-10s %5s %10s %10s %10s", "dtype", "d", "point", "block", "p50", "p99", "max")
	for _, d := range widths {
		model, m := newModel(t, like, layers, d, 512, 7)
		lens := make([]int, 8)
		for i := range lens {
			lens[i] = tokens
		}
		texts := randomTexts(3, 512, lens...)
		want := geloRows(t, m, texts)
		for _, dt := range strings.Split(env("DTYPES", "fp32,bf16,fp16"), ",") {
			start := time.Now()
			dir := runDeployer(t, py, model, texts, append([]string{"--dtype", dt, "--blocks", bs, "--points", "attn-input,residual", "--drop-bos"}, extra...)...)
			el := time.Since(start)
			for _, p := range []string{deployer.AttnInput, deployer.Residual} {
				for _, b := range blocks {
					errs := importedErrors(t, dir, p, b, texts, want[p][b])
					t.Logf("%-5s %5d %-10s %5d %10.3g %10.3g %10.3g", dt, d, p, b, quantile(errs, 0.5), quantile(errs, 0.99), slices.Max(errs))
				}
			}
			t.Logf("(deployer %s d %d: %.1fs)", dt, d, el.Seconds())
		}
	}
}
