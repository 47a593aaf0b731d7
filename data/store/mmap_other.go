//go:build !unix

package store

import (
	"io"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// mapFile reads the whole file where memory maps are not available.
func mapFile(path string) ([]byte, func() error, error) {
	f, _, err := safefile.OpenRead(path, safefile.StoreColumns)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// willNeed does nothing where files are read whole.
func willNeed(whole, part []byte) {}
