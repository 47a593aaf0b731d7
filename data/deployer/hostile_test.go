package deployer

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeNPZ writes one text's .npz as the deployer does (token_ids, attention_mask all 1,
// float32 embeddings: (len(tokens), d)).
func writeNPZ(t *testing.T, path string, tokens []int32, rows []float32) {
	t.Helper()
	d := len(rows) / len(tokens)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	put := func(name, descr, shape string, data []byte) {
		hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
		hdr += strings.Repeat(" ", (64-(10+len(hdr)+1)%64)%64) + "\n"
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8)))
		w.Write([]byte(hdr))
		w.Write(data)
	}
	var tok, emb []byte
	for _, x := range tokens {
		tok = binary.LittleEndian.AppendUint32(tok, uint32(x))
	}
	for _, x := range rows {
		emb = binary.LittleEndian.AppendUint32(emb, math.Float32bits(x))
	}
	put("token_ids", "<i4", fmt.Sprintf("%d,", len(tokens)), tok)
	put("attention_mask", "|u1", fmt.Sprintf("%d,", len(tokens)), bytes.Repeat([]byte{1}, len(tokens)))
	put("embeddings", "<f4", fmt.Sprintf("%d, %d", len(tokens), d), emb)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hostileRun writes a deployer run of residual rows at block 1 (2 layers, width 2) holding the
// given texts (file text_<i>.npz), deployer.json declaring texts declared.
func hostileRun(t *testing.T, declared int, texts ...[]float32) string {
	t.Helper()
	dir := t.TempDir()
	sub := filepath.Join(dir, "residual.1")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, rows := range texts {
		writeNPZ(t, filepath.Join(sub, fmt.Sprintf("text_%08d.npz", i)), []int32{1, int32(5 + i)}, rows)
	}
	info := strings.NewReplacer(`"texts": 3`, fmt.Sprintf(`"texts": %d`, declared), `"hidden_size": 64`, `"hidden_size": 2`,
		`"blocks": [0, 2]`, `"blocks": [1]`, `"points": ["attn-input", "residual"]`, `"points": ["residual"]`, `"bos": "dropped"`, `"bos": "kept"`).Replace(hostileInfo)
	if err := os.WriteFile(filepath.Join(dir, InfoFile), []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hostileInfo is a deployer.json as bench/torch_deploy.py writes it.
const hostileInfo = `{"format": "geloattack-deployer/1", "generator": "bench/torch_deploy.py", "framework": "pytorch",
 "torch": "1.13.0", "python": "3.11.2", "numpy": "1.24.2", "device": "cpu", "device_name": "x86_64 CPU", "threads": 1,
 "dtype": "bf16", "kernels": "emulate", "attention": "eager", "model": "/m", "architecture": "LlamaForCausalLM",
 "config_sha256": "00", "weight_dtypes": ["BF16"], "layers": 3, "hidden_size": 64, "input": "/t.jsonl",
 "input_sha256": "00", "texts": 3, "tokens": 30, "points": ["attn-input", "residual"], "blocks": [0, 2],
 "bos": "dropped", "rows_dtype": "float32", "text_embedding": "mean"}`

// A deployer run with a NaN or infinite row, or with more or fewer .npz files than deployer.json
// declares, is refused when read, naming the directory, the text, the row and the field; a
// clean run of the same shape reads and finds its texts.
func TestHostileDeployerRowsRefused(t *testing.T) {
	ctx := context.Background()
	good := []float32{1, 2, 3, 4}
	r, err := ReadRows(ctx, hostileRun(t, 2, good, good), Residual, []int{1})
	if err != nil {
		t.Fatalf("a clean run: %v", err)
	}
	if id, x, err := r.Find([]int{1, 6}, 1); err != nil || id != 1 || len(x) != 4 {
		t.Errorf("Find in a clean run: %d, %v, %v", id, x, err)
	}
	for _, c := range []struct {
		name     string
		declared int
		texts    [][]float32
		want     []string
	}{
		{"NaN", 2, [][]float32{good, {1, 2, float32(math.NaN()), 4}}, []string{"residual.1", "text 1", "embeddings row 1", "element 0", "NaN"}},
		{"Inf", 2, [][]float32{{float32(math.Inf(-1)), 2, 3, 4}, good}, []string{"text 0", "embeddings row 0", "-Inf"}},
		{"a file more", 1, [][]float32{good, good}, []string{"residual.1", "2 .npz texts", "texts 1"}},
		{"a file less", 3, [][]float32{good, good}, []string{"2 .npz texts", "texts 3"}},
	} {
		_, err := ReadRows(ctx, hostileRun(t, c.declared, c.texts...), Residual, []int{1})
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want a refusal saying %q", c.name, err, w)
			}
		}
	}
}

// deployer.json with data after its object, or a point or block listed twice, is refused; a
// file of many repeated blocks and points is refused at once, not checked pair by pair.
func TestHostileDeployerInfoRefused(t *testing.T) {
	write := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, InfoFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	many := func(item string, n int) string { return strings.TrimSuffix(strings.Repeat(item+", ", n), ", ") }
	for name, c := range map[string]struct{ body, want string }{
		"trailing object": {hostileInfo + `{"format": "x"}`, "data after the JSON object"},
		"trailing junk":   {hostileInfo + ` ]`, "data after the JSON object"},
		"point twice":     {strings.Replace(hostileInfo, `["attn-input", "residual"]`, `["residual", "residual"]`, 1), `"residual" listed twice`},
		"block twice":     {strings.Replace(hostileInfo, `[0, 2]`, `[2, 0, 2]`, 1), "2 listed twice"},
		"huge lists": {strings.NewReplacer(`["attn-input", "residual"]`, "["+many(`"residual"`, 25000)+"]",
			`[0, 2]`, "["+many("0", 200000)+"]").Replace(hostileInfo), "listed twice"},
	} {
		t0 := time.Now()
		_, err := ReadInfo(write(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), InfoFile) {
			t.Errorf("%s: %v; want a refusal naming %s and saying %q", name, err, InfoFile, c.want)
		}
		if s := time.Since(t0); s > 5*time.Second {
			t.Errorf("%s: %v to refuse", name, s)
		}
	}
	// The same blocks, once each, are read as before.
	if _, err := ReadInfo(write(hostileInfo)); err != nil {
		t.Errorf("the script's deployer.json: %v", err)
	}
}

// The deployer's input: a line holding two objects (the second would be dropped), a negative
// token id, and a file of no text are refused, naming the line, text and field.
func TestHostileDeployerTextsRefused(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"two objects a line": {`{"id":1,"tokens":[1]} {"id":2,"tokens":[2]}`, "line 1 (id 1): data after"},
		"negative token":     {`{"id":1,"tokens":[1]}` + "\n" + `{"id":4,"tokens":[3,-7]}`, "line 2: deployer input: text 1 (id 4): tokens[1] = -7"},
		"empty":              {"\n  \n", "no texts"},
	} {
		if _, err := ReadTexts([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a refusal saying %q", name, err, c.want)
		}
	}
	if err := WriteTexts(&bytes.Buffer{}, []Text{{ID: 0, Tokens: []int32{-1}}}); err == nil || !strings.Contains(err.Error(), "tokens[0] = -1") {
		t.Errorf("WriteTexts of a negative token id: %v", err)
	}
}
