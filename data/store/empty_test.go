package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A store of no texts opens as nothing to sample from: Open and Validate refuse it, naming
// num_texts and the store, instead of an empty corpus that every later command trips on. The
// empty store is written column by column (the Writer refuses to make one).
func TestEmptyStoreRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "empty")
	rawFromTexts(Meta{D: 4, E: 2, DType: Float32, Norm: NormRaw}, nil).write(t, dir)
	for name, err := range map[string]error{
		"open":     openErr(dir),
		"validate": Validate(context.Background(), dir, nil),
	} {
		if !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "num_texts = 0") {
			t.Errorf("%s of an empty store: %v", name, err)
		}
	}
	// One text is a store.
	full := filepath.Join(t.TempDir(), "one")
	writeStore(t, full, Meta{D: 4, E: 2, DType: Float32, Norm: NormRaw}, makeTexts(1, 1, 3, 4, 2), 1<<10)
	if err := openErr(full); err != nil {
		t.Fatal(err)
	}
}

// The Writer refuses to finish a store of no texts: Close fails with ErrEmpty naming the store,
// and leaves neither meta.json nor either Arrow file, under its final or its temporary name, so
// nothing half-written is published. Before, Close wrote a store that Open then refused. Every
// command that writes a store (store synth, import, extract) returns Close's error.
func TestWriterRefusesEmptyStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "empty")
	w, err := Create(dir, Meta{D: 4, E: 2, DType: Float32, Norm: NormRaw})
	if err != nil {
		t.Fatal(err)
	}
	// A rejected text is not a text: the store stays empty.
	if err := w.AddText(1, "", false, nil, nil, []float32{1, 2}); err == nil {
		t.Fatal("a text of no tokens was accepted")
	}
	err = w.Close()
	if !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "no text was added") {
		t.Fatalf("Close of an empty writer: %v, want ErrEmpty naming %s", err, dir)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("Close of an empty writer left %v in %s", left, dir)
	}
	if err2 := w.Close(); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Close: %v, want the first error again", err2)
	}
	if err := w.AddText(2, "", false, []int32{1}, make([]float32, 4), make([]float32, 2)); err == nil {
		t.Error("AddText after the refused Close was accepted")
	}
	// The directory can take a real store afterwards.
	writeStore(t, dir, Meta{D: 4, E: 2, DType: Float32, Norm: NormRaw}, makeTexts(1, 2, 3, 4, 2), 1<<10)
	if err := openErr(dir); err != nil {
		t.Fatal(err)
	}
}

// openErr opens dir and closes it, returning Open's error.
func openErr(dir string) error {
	s, err := Open(dir)
	if err == nil {
		s.Close()
	}
	return err
}
