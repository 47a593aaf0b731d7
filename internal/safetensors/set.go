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
// call. With an index, a tensor in a file other than the one the index lists for it, and a
// tensor the index lists that its file lacks, is an error naming the file, the tensor and the
// index; so no tensor comes from two files. Errors of fn come back prefixed with the file's path.
func (s Set) Each(fn func(path string, t Tensor) error) error {
	found := make(map[string]bool, len(s.owner))
	for _, path := range s.Files {
		if err := s.each(path, found, fn); err != nil {
			return err
		}
	}
	return s.checkFound(found)
}

func (s Set) each(path string, found map[string]bool, fn func(path string, t Tensor) error) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := s.checkOwned(path, f, found); err != nil {
		return err
	}
	for _, t := range f.Tensors() {
		if err := fn(path, t); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// checkOwned checks that the index lists every tensor of the file at path for that file, and
// marks them found.
func (s Set) checkOwned(path string, f *File, found map[string]bool) error {
	if s.owner == nil {
		return nil
	}
	base := filepath.Base(path)
	for _, t := range f.Tensors() {
		if s.owner[t.Name] != base {
			return fmt.Errorf("%s: tensor %q is not listed for this file in %s", path, t.Name, s.Index)
		}
		found[t.Name] = true
	}
	return nil
}

// checkFound reports a tensor the index lists that no file held.
func (s Set) checkFound(found map[string]bool) error {
	for _, name := range slices.Sorted(maps.Keys(s.owner)) {
		if !found[name] {
			return fmt.Errorf("%s: lists tensor %q in %s, which does not hold it", s.Index, name, s.owner[name])
		}
	}
	return nil
}

// Mapped is every file of a Set open at once, for a reader that keeps views of the tensors
// (models/hf's loader maps a checkpoint and computes from the file's bytes). Close unmaps them.
type Mapped struct {
	files []*File
	paths []string
	where map[string]int // tensor name -> index of its file
}

// Map opens every file of the set and keeps it mapped, with the index checks of Each, so that no
// tensor comes from two files. Only the headers are read; a tensor's pages are read when touched.
func (s Set) Map() (*Mapped, error) {
	m := &Mapped{where: map[string]int{}}
	found := make(map[string]bool, len(s.owner))
	for _, path := range s.Files {
		f, err := Open(path)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.files, m.paths = append(m.files, f), append(m.paths, path)
		if err := s.checkOwned(path, f, found); err != nil {
			m.Close()
			return nil, err
		}
		for _, t := range f.Tensors() {
			m.where[t.Name] = len(m.files) - 1
		}
	}
	if err := s.checkFound(found); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Tensor is the tensor named name and the path of its file, and whether the set has it. Its
// bytes are valid until Close.
func (m *Mapped) Tensor(name string) (Tensor, string, bool) {
	i, ok := m.where[name]
	if !ok {
		return Tensor{}, "", false
	}
	t, _ := m.files[i].Tensor(name)
	return t, m.paths[i], true
}

// Each calls fn with every tensor of every file, files in the set's order and tensors in data
// order. Errors of fn come back prefixed with the file's path.
func (m *Mapped) Each(fn func(path string, t Tensor) error) error {
	for i, f := range m.files {
		for _, t := range f.Tensors() {
			if err := fn(m.paths[i], t); err != nil {
				return fmt.Errorf("%s: %w", m.paths[i], err)
			}
		}
	}
	return nil
}

// Close unmaps every file; the tensors' bytes must not be used afterwards. It returns the first
// error.
func (m *Mapped) Close() error {
	var first error
	for _, f := range m.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.files = nil
	return first
}
