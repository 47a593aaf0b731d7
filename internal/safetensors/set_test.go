package safetensors

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeShard writes tensors named names, each the single float32 value of its index in names.
func writeShard(t *testing.T, path string, names ...string) {
	t.Helper()
	specs := make([]Spec, len(names))
	for i, n := range names {
		specs[i] = Spec{n, F32, []int{1}}
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil, specs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		if err := w.WriteTensor([]float32{float32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeIndex(t *testing.T, dir string, weightMap map[string]string) {
	t.Helper()
	js, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 12}, "weight_map": weightMap})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFile), js, 0o644); err != nil {
		t.Fatal(err)
	}
}

// visit lists the tensors Each visits as file:name.
func visit(s Set) ([]string, error) {
	var got []string
	err := s.Each(func(path string, t Tensor) error {
		got = append(got, filepath.Base(path)+":"+t.Name)
		return nil
	})
	return got, err
}

func TestSetSingleFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := FindSet(dir); err == nil || !strings.Contains(err.Error(), "neither") {
		t.Fatalf("empty directory: %v", err)
	}
	writeShard(t, filepath.Join(dir, SingleFile), "b", "a")
	s, err := FindSet(dir)
	if err != nil || s.Index != "" || !slices.Equal(s.Files, []string{filepath.Join(dir, SingleFile)}) {
		t.Fatalf("%+v, %v", s, err)
	}
	got, err := visit(s)
	if err != nil || !slices.Equal(got, []string{SingleFile + ":b", SingleFile + ":a"}) {
		t.Fatalf("visited %v, %v", got, err)
	}
	// fn's error comes back naming the file.
	err = s.Each(func(string, Tensor) error { return os.ErrInvalid })
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, SingleFile)) {
		t.Fatalf("fn error: %v", err)
	}
}

func TestSetShards(t *testing.T) {
	dir := t.TempDir()
	const s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	writeShard(t, filepath.Join(dir, s2), "c")
	writeShard(t, filepath.Join(dir, s1), "a", "b")
	writeShard(t, filepath.Join(dir, SingleFile), "stale") // the index takes precedence
	wm := map[string]string{"a": s1, "b": s1, "c": s2}
	writeIndex(t, dir, wm)
	s, err := FindSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Files, []string{filepath.Join(dir, s1), filepath.Join(dir, s2)}) || s.Index != filepath.Join(dir, IndexFile) {
		t.Fatalf("set %+v", s)
	}
	got, err := visit(s)
	if err != nil || !slices.Equal(got, []string{s1 + ":a", s1 + ":b", s2 + ":c"}) {
		t.Fatalf("visited %v, %v", got, err)
	}

	// A tensor in a shard the index does not list it under.
	wm["a"] = s2
	writeIndex(t, dir, wm)
	s, _ = FindSet(dir)
	if _, err := visit(s); err == nil || !strings.Contains(err.Error(), s1) || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), IndexFile) {
		t.Fatalf("misplaced tensor: %v", err)
	}
	// A tensor the index lists that no shard holds.
	wm["a"], wm["d"] = s1, s2
	writeIndex(t, dir, wm)
	s, _ = FindSet(dir)
	if _, err := visit(s); err == nil || !strings.Contains(err.Error(), `lists tensor "d" in `+s2+`, which does not hold it`) {
		t.Fatalf("missing tensor: %v", err)
	}
	// A shard the index names that is not there.
	delete(wm, "d")
	wm["e"] = "model-00003-of-00003.safetensors"
	writeIndex(t, dir, wm)
	s, _ = FindSet(dir)
	if _, err := visit(s); err == nil || !strings.Contains(err.Error(), "model-00003-of-00003.safetensors") {
		t.Fatalf("missing shard: %v", err)
	}
}

func TestReadIndexRefuses(t *testing.T) {
	for _, c := range []struct{ index, want string }{
		{`{"weight_map":{"a":"../outside.safetensors"}}`, "want a file name in the directory"},
		{`{"weight_map":{"a":"/etc/x.safetensors"}}`, "want a file name in the directory"},
		{`{"weight_map":{"a":".hidden"}}`, "want a file name in the directory"},
		{`{"weight_map":{"a":""}}`, "want a file name in the directory"},
		{`{"weight_map":{}}`, "weight_map empty or missing"},
		{`{"metadata":{}}`, "weight_map empty or missing"},
		{`{"weight_map":{"a":1}}`, "cannot unmarshal"},
		{`not json`, "invalid character"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, IndexFile)
		if err := os.WriteFile(path, []byte(c.index), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := FindSet(dir); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming the index and containing %q", c.index, err, c.want)
		}
	}
}
