package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// A store of no texts opens as nothing to sample from: Open and Validate refuse it, naming
// num_texts and the store, instead of an empty corpus that every later command trips on.
func TestEmptyStoreRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "empty")
	writeStore(t, dir, Meta{D: 4, E: 2, DType: Float32, Norm: NormRaw}, nil, 1<<10)
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

// openErr opens dir and closes it, returning Open's error.
func openErr(dir string) error {
	s, err := Open(dir)
	if err == nil {
		s.Close()
	}
	return err
}
