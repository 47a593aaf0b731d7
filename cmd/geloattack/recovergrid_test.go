package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
)

// gridCell is one cell of recover -grid's -out file.
type gridCell struct {
	Axis, Value string
	Result      *content.Result
}

// recoverGridJSON runs `geloattack recover -grid` with args and decodes its -out cells.
func recoverGridJSON(t *testing.T, args ...string) []gridCell {
	t.Helper()
	out := filepath.Join(t.TempDir(), "grid.json")
	b, err := cli(t, append([]string{"recover", "-quiet", "-out", out}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("recover %v: %v\n%s", args, err, b)
	}
	var cells []gridCell
	if err := json.Unmarshal(mustRead(t, out), &cells); err != nil {
		t.Fatal(err)
	}
	return cells
}

// `recover -grid -deployer-texts` writes the victims of every cell the grid runs, each distinct
// text once, and `recover -grid -deployer-rows` attacks every cell with the deployer's rows of
// them. The deployer here is this repository's own float32 forward of the decoder fixture, run on
// each text of the file alone and written in the deployer's format (deployer.json and one .npz per
// text): so every victim must get the verdict and guess the plain grid gives it, in every cell
// (the candidates axis draws other victims per cell: 10 and 100 PINs, the dates of the birth
// template; the dtype axis shares the base cell's). A file that lacks a cell's victims (written for
// -axes dtype, attacked with -axes candidates) is refused naming the cell and -deployer-texts,
// before any candidate is embedded.
func TestRecoverGridAgainstDeployerRows(t *testing.T) {
	md, st, _ := decoderRecoverFixture(t, hf.F32)
	dir := t.TempDir()
	const victims = 3
	base := []string{"-store", st, "-model", md, "-suffix", " ok", "-grid", "-years", "2000:2000",
		"-victims", fmt.Sprint(victims), "-positives", "2", "-tokens-per-text", "48"}
	grid := append(slices.Clone(base), "-axes", "candidates,dtype")
	plain := recoverGridJSON(t, grid...)

	in := filepath.Join(dir, "victims.jsonl")
	texts := recoverDeployerTexts(t, in, grid...)
	checkDistinctVictimTexts(t, texts, len(plain)*victims)
	// Four cells of their own victims (base, 10, 100, dates), three of them the base's (base, bf16, fp16).
	if len(plain) != 6 || len(texts) <= victims || len(texts) > 4*victims {
		t.Fatalf("%d cells, %d distinct victim texts: want 6 cells and more than one cell's victims, at most four cells'", len(plain), len(texts))
	}
	rows := writeOwnDeployerRows(t, md, texts, deployer.AttnInput, 1, filepath.Join(dir, "rows"))
	got := recoverGridJSON(t, append(slices.Clone(grid), "-deployer-rows", rows)...)
	if len(got) != len(plain) {
		t.Fatalf("%d cells against the deployer's rows, %d plain", len(got), len(plain))
	}
	claims := 0
	for i, p := range plain {
		g := got[i]
		if g.Axis != p.Axis || g.Value != p.Value || len(g.Result.Victims) != victims || len(p.Result.Victims) != victims {
			t.Fatalf("cell %d: %s=%s (%d victims) against the plain grid's %s=%s (%d)", i, g.Axis, g.Value, len(g.Result.Victims), p.Axis, p.Value, len(p.Result.Victims))
		}
		if r := g.Result; !strings.Contains(r.Deployer, "fp32") || r.DeployerGap == nil || !(r.DeployerGap.Max <= r.Recompute.Rho) {
			t.Errorf("cell %s=%s: deployer %q, gap %+v: want the deployer named and its rows within rho %.3g of this repository's", g.Axis, g.Value, r.Deployer, r.DeployerGap, r.Recompute.Rho)
		}
		for v, pv := range p.Result.Victims {
			gv := g.Result.Victims[v]
			if gv.Value != pv.Value || gv.Guess != pv.Guess || gv.Verdict != pv.Verdict || gv.Claimed != pv.Claimed {
				t.Errorf("cell %s=%s victim %d: secret %s, guess %s, verdict %q against the plain grid's %s, %s, %q",
					g.Axis, g.Value, v, gv.Value, gv.Guess, gv.Verdict, pv.Value, pv.Guess, pv.Verdict)
			}
			if pv.Claimed {
				claims++
			}
		}
	}
	if claims == 0 {
		t.Errorf("the plain grid claimed nothing: the comparison does not exercise claims")
	}

	// A file of the dtype axis' cells (the base's victims only) against the candidates axis.
	small := filepath.Join(dir, "dtype.jsonl")
	if b, err := cli(t, append(append([]string{"recover", "-quiet"}, base...), "-axes", "dtype", "-deployer-texts", small)...).CombinedOutput(); err != nil {
		t.Fatalf("recover -grid -axes dtype -deployer-texts: %v\n%s", err, b)
	}
	smallTexts, err := deployer.ReadTexts(mustRead(t, small))
	if err != nil {
		t.Fatal(err)
	}
	smallRows := writeOwnDeployerRows(t, md, smallTexts, deployer.AttnInput, 1, filepath.Join(dir, "dtype-rows"))
	out, err := cli(t, append(append([]string{"recover"}, base...), "-axes", "candidates", "-deployer-rows", smallRows)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "grid cell candidates=") || !strings.Contains(string(out), "-deployer-texts") ||
		strings.Contains(string(out), "recover: embedding") {
		t.Errorf("a deployer file without the candidates cells' victims: %v; want a refusal naming the cell and -deployer-texts before any embedding\n%s", err, out)
	}
}

// writeOwnDeployerRows writes what an external deployer writes for texts (bench/torch_deploy.py's
// --out layout: deployer.json and point.block/text_<id>.npz, every row kept, float32), the rows
// computed by this repository's float32 forward of the decoder in md, each text alone, and returns
// the directory.
func writeOwnDeployerRows(t *testing.T, md string, texts []deployer.Text, point string, block int, dir string) string {
	t.Helper()
	m, err := hf.Load(md, nil)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := causallm.NewCPUDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	sub := filepath.Join(dir, fmt.Sprintf("%s.%d", point, block))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	d := m.Cfg.Hidden
	var tokens int64
	for _, x := range texts {
		var rows []float32 // (len(x.Tokens), d)
		tap := func(p llama.Point, layer int, h []float32) error {
			if p.String() == point && layer == block {
				rows = slices.Clone(h[:len(x.Tokens)*d])
			}
			return nil
		}
		if err := dc.Forward(context.Background(), [][]int32{x.Tokens}, tap, nil); err != nil {
			t.Fatal(err)
		}
		if rows == nil {
			t.Fatalf("no %s rows at block %d", point, block)
		}
		mask := bytes.Repeat([]byte{1}, len(x.Tokens))
		writeTestNPZ(t, filepath.Join(sub, fmt.Sprintf("text_%08d.npz", x.ID)), map[string]testNPY{
			"token_ids":      {"<i4", []int{len(x.Tokens)}, le(x.Tokens)},
			"attention_mask": {"|u1", []int{len(x.Tokens)}, mask},
			"embeddings":     {"<f4", []int{len(x.Tokens), d}, le(rows)},
		})
		tokens += int64(len(x.Tokens))
	}
	cfg := sha256.Sum256(mustRead(t, filepath.Join(md, "config.json")))
	info := deployer.Info{Format: deployer.Format, Generator: "cmd/geloattack test: geloattack's own forward", Framework: "geloattack",
		Torch: "none", Device: "cpu", DeviceName: "test", Threads: 1, DType: "fp32", Kernels: "native", Attention: "eager",
		Model: md, Architecture: "LlamaForCausalLM", ConfigSHA256: hex.EncodeToString(cfg[:]), Layers: m.Cfg.Layers, HiddenSize: d,
		Texts: len(texts), Tokens: tokens, Points: []string{point}, Blocks: []int{block}, BOS: "kept", RowsDType: "float32"}
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, deployer.InfoFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testNPY is one .npy array: numpy's dtype string, its shape and its little-endian bytes.
type testNPY struct {
	descr string
	shape []int
	data  []byte
}

// writeTestNPZ writes arrays as an uncompressed .npz (a zip of NAME.npy, format 1.0), as np.savez does.
func writeTestNPZ(t *testing.T, path string, arrays map[string]testNPY) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, a := range arrays {
		dims := make([]string, len(a.shape))
		for i, n := range a.shape {
			dims[i] = fmt.Sprint(n)
		}
		shape := strings.Join(dims, ", ")
		if len(dims) == 1 {
			shape += ","
		}
		hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", a.descr, shape)
		pad := 64 - (10+len(hdr)+1)%64
		hdr += strings.Repeat(" ", pad%64) + "\n"
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		head := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
		for _, part := range [][]byte{head, []byte(hdr), a.data} {
			if _, err := w.Write(part); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// le is the little-endian bytes of int32 or float32 values.
func le[T int32 | float32](v []T) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		switch x := any(x).(type) {
		case int32:
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		case float32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	return b
}
