package store

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary bytes as tokens.arrow and texts.arrow of a store whose meta.json is
// fixed, then reads every value and validates. The property is the absence of panics, hangs and
// unbounded allocations: any input gives an error or a store that reads consistently.
// Run: go test ./data/store -run '^$' -fuzz FuzzOpen -fuzztime 1m
func FuzzOpen(f *testing.F) {
	const d, e = 8, 3
	dir := f.TempDir()
	writeStore(f, dir, Meta{D: d, E: e, DType: Float16, Norm: NormRaw}, baseTexts(d, e), 3*d*2)
	meta, err := readMeta(dir)
	if err != nil {
		f.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(dir, TokensFile))
	if err != nil {
		f.Fatal(err)
	}
	txt, err := os.ReadFile(filepath.Join(dir, TextsFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok, txt)
	f.Add(tok[:len(tok)/2], txt)
	f.Add(tok, txt[:len(txt)-1])
	f.Fuzz(func(t *testing.T, tok, txt []byte) {
		exerciseOpen(t, dir, meta, aligned(tok), aligned(txt))
	})
}
