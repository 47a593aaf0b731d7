package bert_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
	"github.com/gelo-research/geloattack/models/bert"
)

// FuzzLoadWeights feeds arbitrary bytes as the weights file of the tiny configuration: loading
// must return an error or a model, never panic.
func FuzzLoadWeights(f *testing.F) {
	dir := f.TempDir()
	js, err := json.Marshal(tinyConfig)
	if err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{})
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}\x00\x3c"))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f{}"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		st, err := safetensors.Parse(raw)
		if err != nil {
			return
		}
		if _, err := bert.NewModelFromFile(tinyConfig, st, blas.Gonum()); err == nil {
			t.Fatalf("random bytes accepted as a complete model")
		}
	})
}
