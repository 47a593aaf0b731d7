package checkpoints

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/internal/safetensors"
)

// FuzzLoad feeds arbitrary bytes to the loader. It must never panic; whatever it accepts must be
// internally consistent (the tensors tile the data section exactly) and must survive a write and a
// second read bit for bit. The checkpoint decoder runs on every input as well.
//
//	go test ./checkpoints -run '^$' -fuzz FuzzLoad -fuzztime 60s
func FuzzLoad(f *testing.F) {
	dir := f.TempDir()
	add := func(name string, save func(path string) error) {
		path := filepath.Join(dir, name)
		if err := save(path); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	add("weights", func(p string) error {
		return Save(p, []Tensor{
			{Name: "w", Shape: []int{2, 3}, Data: knownValues},
			{Name: "s", Shape: []int{}, Data: []float32{1}},
			{Name: "z", Shape: []int{0, 4}, Data: []float32{}},
		}, map[string]string{MetaConfig: `{"h":2}`})
	})
	r := makeRun(3, 1)
	if err := SaveCheckpoint(dir, 3, r.weights, r.state, r.meta); err != nil {
		f.Fatal(err)
	}
	ckpt, err := os.ReadFile(filepath.Join(dir, CheckpointName(3)))
	if err != nil {
		f.Fatal(err)
	}
	if _, err := decodeCheckpoint(ckpt); err != nil {
		f.Fatalf("seed checkpoint: %v", err)
	}
	f.Add(ckpt)
	f.Add(fileBytes(`{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}`, knownData))
	f.Add(fileBytes(`{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]}}`,
		[]byte{0x00, 0x3c, 0x01, 0x7c, 0x80, 0x3f}))
	f.Add(fileBytes(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}`, make([]byte, 24)))
	f.Add(fileBytes(`{"w":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}}`, nil))
	f.Add(fileBytes("{\"w\xff\":{}}", nil))
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 1<<62), "{}"...))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeCheckpoint(b)
		file, err := safetensors.Parse(b)
		if err != nil {
			return
		}
		raws, meta := file.Tensors(), file.Metadata()
		n := binary.LittleEndian.Uint64(b[:8])
		covered := 0
		for _, r := range raws {
			numel, err := safetensors.NumElements(r.Shape)
			if err != nil || numel*r.DType.Size() != len(r.Bytes()) {
				t.Fatalf("tensor %q: shape %v, %v, %d bytes", r.Name, r.Shape, r.DType, len(r.Bytes()))
			}
			covered += len(r.Bytes())
		}
		if uint64(covered) != uint64(len(b))-8-n {
			t.Fatalf("tensors cover %d of %d data bytes", covered, uint64(len(b))-8-n)
		}
		tensors, err := decodeAll(raws, true)
		if err != nil {
			return // a dtype other than F32, F16, BF16
		}
		sorted, err := inFileOrder(tensors)
		if err != nil {
			t.Fatalf("accepted tensors cannot be written back: %v", err)
		}
		var buf bytes.Buffer
		if err := writeTensors(&buf, sorted, meta); err != nil {
			t.Fatalf("accepted tensors or metadata cannot be written back: %v", err)
		}
		again, meta2, err := loadBytes(buf.Bytes())
		if err != nil {
			t.Fatalf("written back file does not load: %v", err)
		}
		byName := make(map[string]Tensor, len(again))
		for _, tn := range again {
			byName[tn.Name] = tn
		}
		if len(byName) != len(tensors) || len(meta2) != len(meta) {
			t.Fatalf("round trip changed the counts: %d tensors -> %d, %d metadata -> %d", len(tensors), len(byName), len(meta), len(meta2))
		}
		for _, tn := range tensors {
			g, ok := byName[tn.Name]
			if !ok || !slices.Equal(g.Shape, tn.Shape) || !slices.Equal(bitsOf(g.Data), bitsOf(tn.Data)) {
				t.Fatalf("tensor %q changed in the round trip", tn.Name)
			}
		}
		for k, v := range meta {
			if meta2[k] != v {
				t.Fatalf("metadata %q changed in the round trip", k)
			}
		}
	})
}

// loadBytes is Load on a file's content.
func loadBytes(b []byte) ([]Tensor, map[string]string, error) {
	f, err := safetensors.Parse(b)
	if err != nil {
		return nil, nil, err
	}
	tensors, err := decodeAll(f.Tensors(), false)
	return tensors, f.Metadata(), err
}
