package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/internal/safefile"
)

// IdentityFile is the file of a run directory that records, at the run's start, what its
// checkpoints must hold: the model's parameter names and shapes and a hash of the run config.
// -resume refuses a checkpoint that does not match it (one copied in from another run).
const IdentityFile = "identity.json"

// paramSpec is a parameter's name and shape.
type paramSpec struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

// identity is the content of IdentityFile.
type identity struct {
	// ConfigHash is configHash of the run config.
	ConfigHash string `json:"config_hash"`
	// Params are the model's parameters in checkpoint order (sorted by name).
	Params []paramSpec `json:"params"`
}

// configHash is a hash of the fields of cfg that a resume may not change: every field but
// train.steps, train.workers, train.prefetch, device and precision, and train.mix_on, which is
// left out of the hash altogether so that runs begun before it existed keep their hash. The config goes through the
// JSON of checkpoint metadata first, so a hash taken at the start equals one taken of the
// config a checkpoint recorded.
func configHash(cfg config.Run) (string, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	var c config.Run
	if err := json.Unmarshal(b, &c); err != nil {
		return "", err
	}
	c.Train.Steps, c.Train.Workers, c.Train.Prefetch, c.Device, c.Precision = 0, 0, 0, "", ""
	h := sha256.New()
	for _, f := range config.Fields(c) {
		if f.Path == "train.mix_on" {
			continue
		}
		fmt.Fprintf(h, "%s=%q\n", f.Path, f.Value)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// paramSpecs are the names and shapes of ps, sorted by name (the order of a checkpoint file).
func paramSpecs(ps *engine.Params) []paramSpec {
	var out []paramSpec
	for _, v := range ps.Views() {
		out = append(out, paramSpec{Name: v.Name, Shape: slices.Clone(v.Shape)})
	}
	slices.SortFunc(out, func(a, b paramSpec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// writeIdentity records the identity of a run starting in dir.
func writeIdentity(dir string, cfg config.Run, ps *engine.Params) error {
	hash, err := configHash(cfg)
	if err != nil {
		return fmt.Errorf("run identity: %w", err)
	}
	b, err := json.MarshalIndent(identity{ConfigHash: hash, Params: paramSpecs(ps)}, "", " ")
	if err != nil {
		return fmt.Errorf("run identity: %w", err)
	}
	return checkpoints.WriteFileAtomic(filepath.Join(dir, IdentityFile), append(b, '\n'))
}

// readIdentity reads dir's IdentityFile; the error wraps fs.ErrNotExist for a run made before
// identities were recorded.
func readIdentity(dir string) (identity, error) {
	path := filepath.Join(dir, IdentityFile)
	b, err := safefile.ReadNoFollow(path, safefile.Identity)
	if err != nil {
		return identity{}, fmt.Errorf("run identity: %w", err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil || id.ConfigHash == "" {
		if err == nil {
			err = errors.New("no config_hash")
		}
		return identity{}, fmt.Errorf("run identity %s: %v", path, err)
	}
	return id, nil
}

// checkBelongs refuses a checkpoint that is not of the run in dir: its step beyond the steps its
// own config asks for, its config hash or its parameters other than those recorded in dir's
// IdentityFile at the run's start. A run without an IdentityFile (made before it existed) gets a
// note and no check of hash and shapes.
func checkBelongs(dir string, ck checkpoints.Checkpoint, had config.Run) (note string, err error) {
	if ck.State.Step < 0 || ck.State.Step > int64(had.Train.Steps) {
		return "", fmt.Errorf("resume %s: checkpoint %s claims step %d, beyond the %d steps (train.steps) of the run config it records: damaged or forged",
			dir, ck.Path, ck.State.Step, had.Train.Steps)
	}
	id, err := readIdentity(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s has no %s (a run made before geloattack recorded one): checkpoint %s not checked against the run's model shape and config hash",
			dir, IdentityFile, ck.Path), nil
	}
	if err != nil {
		return "", fmt.Errorf("resume: %w", err)
	}
	var have []paramSpec
	for _, w := range ck.Weights {
		have = append(have, paramSpec{Name: w.Name, Shape: w.Shape})
	}
	if d := specDiff(have, id.Params); d != "" {
		return "", fmt.Errorf("resume %s: checkpoint %s is of another model: %s (checkpoint) vs %s (the run's %s, recorded at its start)",
			dir, ck.Path, describeSpecs(have, d), describeSpecs(id.Params, d), filepath.Join(dir, IdentityFile))
	}
	hash, err := configHash(had)
	if err != nil {
		return "", fmt.Errorf("resume: %w", err)
	}
	if hash != id.ConfigHash {
		return "", fmt.Errorf("resume %s: checkpoint %s is of another run: its config hash is %s, the run's (%s, recorded at its start) is %s",
			dir, ck.Path, hash, filepath.Join(dir, IdentityFile), id.ConfigHash)
	}
	return "", nil
}

// specDiff is "" when a and b hold the same names with the same shapes, else the first name
// (in sorted order) where they differ.
func specDiff(a, b []paramSpec) string {
	am, bm := specMap(a), specMap(b)
	var names []string
	for n := range am {
		names = append(names, n)
	}
	for n := range bm {
		if _, ok := am[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		sa, oka := am[n]
		sb, okb := bm[n]
		if oka != okb || !slices.Equal(sa, sb) {
			return n
		}
	}
	return ""
}

func specMap(s []paramSpec) map[string][]int {
	m := make(map[string][]int, len(s))
	for _, x := range s {
		m[x.Name] = x.Shape
	}
	return m
}

// describeSpecs is "N parameters (M values), NAME (shape)" for a message.
func describeSpecs(s []paramSpec, name string) string {
	values := 0
	for _, x := range s {
		n := 1
		for _, d := range x.Shape {
			n *= d
		}
		values += n
	}
	shape, ok := specMap(s)[name]
	what := "absent"
	if ok {
		what = fmt.Sprintf("shape %v", shape)
	}
	return fmt.Sprintf("%d tensors of %d values, %s %s", len(s), values, name, what)
}

// recordRun writes the run's identity (on a fresh run, or a resumed one made before identities,
// so that its later resumes are checked) and its resolved config.yaml: every task's run does.
func recordRun(dir string, cfg config.Run, ps *engine.Params, from *checkpoints.Checkpoint) error {
	if from == nil {
		if err := writeIdentity(dir, cfg, ps); err != nil {
			return err
		}
	} else if _, err := readIdentity(dir); errors.Is(err, fs.ErrNotExist) {
		if err := writeIdentity(dir, cfg, ps); err != nil {
			return err
		}
	}
	resolved, err := cfg.Marshal()
	if err != nil {
		return err
	}
	return checkpoints.WriteFileAtomic(filepath.Join(dir, "config.yaml"), resolved)
}
