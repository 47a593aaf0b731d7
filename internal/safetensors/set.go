package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// File names of a Hugging Face weights directory.
const (
	// SingleFile holds all the weights of a model that is not sharded.
	SingleFile = "model.safetensors"
	// IndexFile lists the shards of a sharded model and the shard of each tensor.
	IndexFile = "model.safetensors.index.json"
)

// Set is the weights of a model directory: one safetensors file, or the shards that an index
// lists together with the shard of each tensor.
type Set struct {
	// Files are the paths of the files, shards in name order.
	Files []string
	// Index is the path of the index, "" for a single file.
	Index string
	// owner maps each tensor the index lists to the base name of its shard; nil without an index.
	owner map[string]string
}

// FindSet finds the weights of dir: the shards of dir/model.safetensors.index.json when it
// exists, otherwise dir/model.safetensors.
func FindSet(dir string) (Set, error) {
	idx := filepath.Join(dir, IndexFile)
	s, err := ReadIndex(idx)
	if errors.Is(err, fs.ErrNotExist) {
		single := filepath.Join(dir, SingleFile)
		if _, err := os.Stat(single); err != nil {
			return Set{}, fmt.Errorf("model directory %s: neither %s nor %s", dir, SingleFile, IndexFile)
		}
		return Set{Files: []string{single}}, nil
	}
	return s, err
}

// ReadIndex reads a shard index (model.safetensors.index.json): its weight_map names, for each
// tensor, a file in the index's directory. Names with a directory part or a leading dot are
// refused, so an index cannot point outside its directory.
func ReadIndex(path string) (Set, error) {
	raw, err := safefile.Read(path, safefile.ShardIndex)
	if err != nil {
		return Set{}, err
	}
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &ix); err != nil {
		return Set{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(ix.WeightMap) == 0 {
		return Set{}, fmt.Errorf("%s: weight_map empty or missing", path)
	}
	var files []string
	for _, name := range slices.Sorted(maps.Keys(ix.WeightMap)) {
		file := ix.WeightMap[name]
		if file == "" || file != filepath.Base(file) || strings.HasPrefix(file, ".") {
			return Set{}, fmt.Errorf("%s: weight_map[%q] = %q: want a file name in the directory", path, name, file)
		}
		files = append(files, file)
	}
	slices.Sort(files)
	files = slices.Compact(files)
	dir := filepath.Dir(path)
	for i, f := range files {
		files[i] = filepath.Join(dir, f)
	}
	return Set{Files: files, Index: path, owner: ix.WeightMap}, nil
}

// Each opens the set's files one at a time (so that one is mapped at once) and calls fn with the
// file's path and each of its tensors in data order; the tensor's bytes are valid only during the
// call. With an
// index, a tensor in a file other than the one the index lists for it, and a tensor the index
// lists that its file lacks, is an error naming the file, the tensor and the index; so no tensor
// comes from two files. Errors of fn come back prefixed with the file's path.
func (s Set) Each(fn func(path string, t Tensor) error) error {
	found := make(map[string]bool, len(s.owner))
	for _, path := range s.Files {
		if err := s.each(path, found, fn); err != nil {
			return err
		}
	}
	if s.owner == nil {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(s.owner)) {
		if !found[name] {
			return fmt.Errorf("%s: lists tensor %q in %s, which does not hold it", s.Index, name, s.owner[name])
		}
	}
	return nil
}

func (s Set) each(path string, found map[string]bool, fn func(path string, t Tensor) error) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	base := filepath.Base(path)
	for _, t := range f.Tensors() {
		if s.owner != nil {
			if s.owner[t.Name] != base {
				return fmt.Errorf("%s: tensor %q is not listed for this file in %s", path, t.Name, s.Index)
			}
			found[t.Name] = true
		}
		if err := fn(path, t); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
