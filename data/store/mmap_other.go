//go:build !unix

package store

import "os"

// mapFile reads the whole file where memory maps are not available.
func mapFile(path string) ([]byte, func() error, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// willNeed does nothing where files are read whole.
func willNeed(whole, part []byte) {}
