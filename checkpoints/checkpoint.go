package checkpoints

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/safetensors"
)

// LatestFile is the name of the pointer file in a run directory; it holds the file name of the
// newest complete checkpoint and a newline.
const LatestFile = "latest"

const (
	ckptPrefix = "ckpt-"
	ckptSuffix = ".safetensors"

	momentPrefix = "adam."
	firstMoment  = "adam.m."
	secondMoment = "adam.v."
	reservedMeta = "geloattack."
	keyKind      = "geloattack.kind"
	keyVersion   = "geloattack.version"
	keyStep      = "geloattack.step"
	keyNextBatch = "geloattack.next_batch"
	keySeed      = "geloattack.seed"
	keyRNG       = "geloattack.rng"
	keyBestStep  = "geloattack.best_step"
	keyBest      = "geloattack.best"
	keyLast      = "geloattack.last"
	keyCRC       = "geloattack.crc32c"
	keyHeaderCRC = "geloattack.header_crc32c"
	kindCkpt     = "checkpoint"
	formatPT     = "pt"

	// formatVersion is what SaveCheckpoint writes: version 1 plus the checksums keyCRC and
	// keyHeaderCRC. A new version number, rather than optional keys, means that a damaged key
	// name cannot make a checkpoint pass for one written without checksums.
	formatVersion = "2"
	// formatVersionNoChecksums is the version of checkpoints written before checksums; they
	// still load, unverified, with a note saying so.
	formatVersionNoChecksums = "1"
)

// State is everything besides the weights that a resumed run needs to continue where it stopped.
type State struct {
	// Step is the number of optimizer updates applied; it also drives AdamW's bias correction and
	// the learning-rate schedule.
	Step int64
	// NextBatch is the index of the next batch the data stream yields; examples are derived from
	// (seed, split, example index), so this position and Seed restore the stream.
	NextBatch int64
	// Seed is the run's base seed.
	Seed uint64
	// RNG holds serialized states of any other random generators by name (for example a
	// math/rand/v2 PCG's MarshalBinary); nil and empty are the same.
	RNG map[string][]byte
	// AdamM holds the first moments, one tensor per parameter, named and shaped like the parameter.
	AdamM []Tensor
	// AdamV holds the second moments, with the same names as AdamM.
	AdamV []Tensor
	// BestStep is the step at which Best was measured.
	BestStep int64
	// Best holds the figures of the best evaluation so far, keyed "train.<metric>" and
	// "val.<metric>": the train loop (package train) takes the highest val pos_mass (retrieval)
	// or unmix_mass (unmix), the earlier evaluation on a tie.
	Best map[string]float64
	// Last holds the trainer's running figures that a resume needs to log identical lines (the
	// train loop keeps the loss sum and count of the unfinished log interval here).
	Last map[string]float64
}

// Checkpoint is a loaded checkpoint file.
type Checkpoint struct {
	// Path is the file it was read from.
	Path string
	// Weights are the model parameters in file order (sorted by name).
	Weights []Tensor
	// State is the resume state; AdamM and AdamV are in file order.
	State State
	// Metadata is the caller's metadata as saved (the model config under MetaConfig), without the
	// keys this package adds.
	Metadata map[string]string
	// Verified reports that the file carried checksums and every one matched. It is false only
	// for checkpoints written before checksums existed (format version 1); Notes says so.
	Verified bool
	// Notes are remarks for the user that are not errors, one sentence each, naming the file:
	// today only "checkpoint X has no checksums (written by an older geloattack): not verified".
	Notes []string
}

// CheckpointName is the file name of the checkpoint for step: "ckpt-<step>.safetensors".
func CheckpointName(step int64) string {
	return ckptPrefix + strconv.FormatInt(step, 10) + ckptSuffix
}

// parseCheckpointName returns the step of a canonical checkpoint file name (no sign, no leading
// zeros, so two names never denote one step).
func parseCheckpointName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, ckptPrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, ckptSuffix)
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	step, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || strconv.FormatInt(step, 10) != digits {
		return 0, false
	}
	return step, true
}

// SaveCheckpoint writes the checkpoint for step into the run directory dir (created if needed) as
// CheckpointName(step) and then points LatestFile at it, each atomically, so that after a crash at
// any moment LatestFile is absent or names a complete checkpoint. The file carries a CRC-32C of
// every tensor and of its header (see integrity.go). state.Step must equal step; each moment tensor
// must be named and shaped like a weight, AdamM and AdamV must cover the same weights, and every
// weight and moment must be finite (a NaN or Inf is refused, naming the tensor and element).
// Weight names may not start with "adam."; metadata keys "format" and "geloattack.*" are reserved.
// Leftover temporary files of an earlier crashed save are removed first. Old checkpoints are kept
// until Prune.
func SaveCheckpoint(dir string, step int64, weights []Tensor, state State, metadata map[string]string) error {
	return fsHooks{}.saveCheckpoint(dir, step, weights, state, metadata)
}

func (h fsHooks) saveCheckpoint(dir string, step int64, weights []Tensor, state State, metadata map[string]string) error {
	path := filepath.Join(dir, CheckpointName(step))
	if step < 0 {
		return fmt.Errorf("checkpoints: save checkpoint in %s: negative step %d", dir, step)
	}
	if state.Step != step {
		return fmt.Errorf("checkpoints: save %s: state.Step is %d, not the step %d being saved", path, state.Step, step)
	}
	tensors, err := checkpointTensors(weights, state)
	if err != nil {
		return fmt.Errorf("checkpoints: save %s: %w", path, err)
	}
	// LoadCheckpoint refuses non-finite values; writing them would replace a loadable latest
	// checkpoint with one that cannot be resumed.
	if err := checkFinite(tensors); err != nil {
		return fmt.Errorf("checkpoints: save %s: %w", path, err)
	}
	meta, err := encodeState(state, metadata)
	if err != nil {
		return fmt.Errorf("checkpoints: save %s: %w", path, err)
	}
	if meta, err = seal(tensors, meta); err != nil {
		return fmt.Errorf("checkpoints: save %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoints: save %s: %w", path, err)
	}
	if err := h.removeStaleTemps(dir); err != nil {
		return err
	}
	if err := h.save(path, tensors, meta); err != nil {
		return err
	}
	return h.writeFileAtomic(filepath.Join(dir, LatestFile), []byte(CheckpointName(step)+"\n"))
}

// checkpointTensors validates the weights and moments and lays them out under their file names.
func checkpointTensors(weights []Tensor, state State) ([]Tensor, error) {
	shapes := make(map[string][]int, len(weights))
	for _, w := range weights {
		if strings.HasPrefix(w.Name, momentPrefix) {
			return nil, fmt.Errorf("weight %q: names starting with %q are reserved for optimizer moments", w.Name, momentPrefix)
		}
		shapes[w.Name] = w.Shape
	}
	if err := checkMoments(shapes, state.AdamM, state.AdamV); err != nil {
		return nil, err
	}
	all := make([]Tensor, 0, len(weights)+len(state.AdamM)+len(state.AdamV))
	all = append(all, weights...)
	for _, t := range state.AdamM {
		all = append(all, Tensor{Name: firstMoment + t.Name, Shape: t.Shape, Data: t.Data})
	}
	for _, t := range state.AdamV {
		all = append(all, Tensor{Name: secondMoment + t.Name, Shape: t.Shape, Data: t.Data})
	}
	return all, nil
}

// checkMoments checks that every moment belongs to a weight of the same shape, appears once, and
// that m and v cover the same weights (a parameter frozen from the start may have neither).
func checkMoments(weightShapes map[string][]int, m, v []Tensor) error {
	seen := func(label string, ts []Tensor) (map[string]bool, error) {
		names := make(map[string]bool, len(ts))
		for _, t := range ts {
			ws, ok := weightShapes[t.Name]
			if !ok {
				return nil, fmt.Errorf("%s moment %q has no weight of that name", label, t.Name)
			}
			if !slices.Equal(ws, t.Shape) {
				return nil, fmt.Errorf("%s moment %q has shape %v, its weight has %v", label, t.Name, t.Shape, ws)
			}
			if names[t.Name] {
				return nil, fmt.Errorf("%s moment %q appears twice", label, t.Name)
			}
			names[t.Name] = true
		}
		return names, nil
	}
	mNames, err := seen("first (adam.m)", m)
	if err != nil {
		return err
	}
	vNames, err := seen("second (adam.v)", v)
	if err != nil {
		return err
	}
	for name := range mNames {
		if !vNames[name] {
			return fmt.Errorf("weight %q has a first moment but no second moment", name)
		}
	}
	for name := range vNames {
		if !mNames[name] {
			return fmt.Errorf("weight %q has a second moment but no first moment", name)
		}
	}
	return nil
}

// encodeState merges the caller's metadata with the resume scalars.
func encodeState(state State, metadata map[string]string) (map[string]string, error) {
	meta := make(map[string]string, len(metadata)+10)
	for k, v := range metadata {
		if k == MetaFormat || strings.HasPrefix(k, reservedMeta) {
			return nil, fmt.Errorf("metadata key %q is reserved for the checkpoint format", k)
		}
		meta[k] = v
	}
	if state.NextBatch < 0 {
		return nil, fmt.Errorf("state.NextBatch is negative (%d)", state.NextBatch)
	}
	rng := make(map[string][]byte, len(state.RNG))
	for k, v := range state.RNG {
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("state.RNG key %q is not valid UTF-8", k)
		}
		rng[k] = v
	}
	rngJSON, err := json.Marshal(rng)
	if err != nil {
		return nil, fmt.Errorf("state.RNG: %w", err)
	}
	best, err := encodeMetrics("state.Best", state.Best)
	if err != nil {
		return nil, err
	}
	last, err := encodeMetrics("state.Last", state.Last)
	if err != nil {
		return nil, err
	}
	meta[MetaFormat] = formatPT
	meta[keyKind] = kindCkpt
	meta[keyVersion] = formatVersion
	meta[keyStep] = strconv.FormatInt(state.Step, 10)
	meta[keyNextBatch] = strconv.FormatInt(state.NextBatch, 10)
	meta[keySeed] = strconv.FormatUint(state.Seed, 10)
	meta[keyRNG] = string(rngJSON)
	meta[keyBestStep] = strconv.FormatInt(state.BestStep, 10)
	meta[keyBest] = best
	meta[keyLast] = last
	return meta, nil
}

// encodeMetrics writes metrics as a JSON object of strings, because JSON numbers cannot hold the
// NaN or infinite values a diverged run produces; 'g' with precision -1 round-trips every float64.
func encodeMetrics(label string, metrics map[string]float64) (string, error) {
	strs := make(map[string]string, len(metrics))
	for k, v := range metrics {
		if !utf8.ValidString(k) {
			return "", fmt.Errorf("%s key %q is not valid UTF-8", label, k)
		}
		strs[k] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	b, err := json.Marshal(strs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", label, err)
	}
	return string(b), nil
}

func decodeMetrics(key, s string) (map[string]float64, error) {
	var strs map[string]string
	if err := json.Unmarshal([]byte(s), &strs); err != nil {
		return nil, fmt.Errorf("metadata %s: %w", key, err)
	}
	metrics := make(map[string]float64, len(strs))
	for k, v := range strs {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("metadata %s: metric %q: value %q is not a float", key, k, v)
		}
		metrics[k] = f
	}
	return metrics, nil
}

// decodeState parses the resume scalars and returns the caller's part of the metadata.
func decodeState(meta map[string]string) (State, map[string]string, error) {
	var st State
	if got := meta[keyKind]; got != kindCkpt {
		return st, nil, fmt.Errorf("metadata %s is %q, want %q: not a checkpoint file", keyKind, got, kindCkpt)
	}
	version := meta[keyVersion]
	if err := checkVersion(version); err != nil {
		return st, nil, err
	}
	known := map[string]bool{keyKind: true, keyVersion: true, keyStep: true, keyNextBatch: true, keySeed: true,
		keyRNG: true, keyBestStep: true, keyBest: true, keyLast: true}
	if version == formatVersion {
		known[keyCRC], known[keyHeaderCRC] = true, true
	}
	caller := make(map[string]string, len(meta))
	// In key order, so that a file with two unknown keys always reports the same one.
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		v := meta[k]
		switch {
		case k == MetaFormat:
		case strings.HasPrefix(k, reservedMeta):
			if !known[k] {
				return st, nil, fmt.Errorf("unknown metadata key %q in a version %s checkpoint", k, version)
			}
		default:
			caller[k] = v
		}
	}
	if got := meta[MetaFormat]; got != formatPT {
		return st, nil, fmt.Errorf("metadata %s is %q, want %q", MetaFormat, got, formatPT)
	}
	nonNegative := func(key string) (int64, error) {
		v, err := strconv.ParseInt(meta[key], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("metadata %s is %q, want a non-negative integer", key, meta[key])
		}
		return v, nil
	}
	var err error
	if st.Step, err = nonNegative(keyStep); err != nil {
		return st, nil, err
	}
	if st.NextBatch, err = nonNegative(keyNextBatch); err != nil {
		return st, nil, err
	}
	if st.BestStep, err = strconv.ParseInt(meta[keyBestStep], 10, 64); err != nil {
		return st, nil, fmt.Errorf("metadata %s is %q, want an integer", keyBestStep, meta[keyBestStep])
	}
	if st.Seed, err = strconv.ParseUint(meta[keySeed], 10, 64); err != nil {
		return st, nil, fmt.Errorf("metadata %s is %q, want an unsigned integer", keySeed, meta[keySeed])
	}
	if err := json.Unmarshal([]byte(meta[keyRNG]), &st.RNG); err != nil {
		return st, nil, fmt.Errorf("metadata %s: %w", keyRNG, err)
	}
	if st.Best, err = decodeMetrics(keyBest, meta[keyBest]); err != nil {
		return st, nil, err
	}
	if st.Last, err = decodeMetrics(keyLast, meta[keyLast]); err != nil {
		return st, nil, err
	}
	return st, caller, nil
}

// checkVersion accepts the format versions this build reads.
func checkVersion(version string) error {
	if version != formatVersion && version != formatVersionNoChecksums {
		return fmt.Errorf("metadata %s is %q; this build reads versions %s and %s", keyVersion, version, formatVersionNoChecksums, formatVersion)
	}
	return nil
}

// LoadCheckpoint reads a checkpoint file written by SaveCheckpoint, verifies its checksums (every
// tensor's bytes, the metadata and the tensor table), refuses NaN and Inf in weights and moments,
// and checks that its moments match its weights and that its resume state is complete. Every
// error names the file; a damaged tensor is named with both checksums. A checkpoint written before
// checksums loads with Verified false and a note in Notes for the caller to print.
func LoadCheckpoint(path string) (Checkpoint, error) {
	return loadCheckpoint(path, false)
}

// loadRunCheckpoint is LoadCheckpoint for a checkpoint found in a run directory, which is never a
// symbolic link there: one planted in its place is refused rather than followed.
func loadRunCheckpoint(path string) (Checkpoint, error) {
	return loadCheckpoint(path, true)
}

func loadCheckpoint(path string, noFollow bool) (Checkpoint, error) {
	f, err := open(path, noFollow)
	if err != nil {
		return Checkpoint{}, err
	}
	defer f.Close()
	return finishLoad(path, f)
}

// loadCheckpointBytes is LoadCheckpoint on the file's content.
func loadCheckpointBytes(path string, buf []byte) (Checkpoint, error) {
	f, err := safetensors.Parse(buf)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	return finishLoad(path, f)
}

// finishLoad decodes a parsed checkpoint file, naming path in errors and notes.
func finishLoad(path string, f *safetensors.File) (Checkpoint, error) {
	ckpt, err := decodeFile(f)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoints: load %s: %w", path, err)
	}
	ckpt.Path = path
	if !ckpt.Verified {
		ckpt.Notes = append(ckpt.Notes, fmt.Sprintf("checkpoint %s has no checksums (written by an older geloattack): not verified", path))
	}
	return ckpt, nil
}

// decodeCheckpoint decodes and verifies a checkpoint file's content (see LoadCheckpoint).
func decodeCheckpoint(buf []byte) (Checkpoint, error) {
	f, err := safetensors.Parse(buf)
	if err != nil {
		return Checkpoint{}, err
	}
	return decodeFile(f)
}

// decodeFile decodes and verifies a parsed checkpoint file; what it returns does not refer to
// the file's memory, which the caller may release.
func decodeFile(f *safetensors.File) (Checkpoint, error) {
	raws, meta := f.Tensors(), f.Metadata()
	// The checksums come before every other check, so that damage is reported as damage rather
	// than as whatever odd value it produced; only the kind and version come earlier, to tell a
	// plain weights file or an older checkpoint from a damaged one.
	if got := meta[keyKind]; got != kindCkpt {
		return Checkpoint{}, fmt.Errorf("metadata %s is %q, want %q: not a checkpoint file", keyKind, got, kindCkpt)
	}
	version := meta[keyVersion]
	if err := checkVersion(version); err != nil {
		return Checkpoint{}, err
	}
	verified := false
	if version == formatVersion {
		if err := verify(f.Header(), raws, meta); err != nil {
			return Checkpoint{}, err
		}
		verified = true
	}
	tensors, err := decodeAll(raws, false)
	if err != nil {
		return Checkpoint{}, err
	}
	if err := checkFinite(tensors); err != nil {
		return Checkpoint{}, err
	}
	state, caller, err := decodeState(meta)
	if err != nil {
		return Checkpoint{}, err
	}
	var weights []Tensor
	for _, t := range tensors {
		if name, ok := strings.CutPrefix(t.Name, firstMoment); ok {
			state.AdamM = append(state.AdamM, Tensor{Name: name, Shape: t.Shape, Data: t.Data})
		} else if name, ok := strings.CutPrefix(t.Name, secondMoment); ok {
			state.AdamV = append(state.AdamV, Tensor{Name: name, Shape: t.Shape, Data: t.Data})
		} else if strings.HasPrefix(t.Name, momentPrefix) {
			return Checkpoint{}, fmt.Errorf("tensor %q: names starting with %q are reserved for optimizer moments", t.Name, momentPrefix)
		} else {
			weights = append(weights, t)
		}
	}
	shapes := make(map[string][]int, len(weights))
	for _, w := range weights {
		shapes[w.Name] = w.Shape
	}
	if err := checkMoments(shapes, state.AdamM, state.AdamV); err != nil {
		return Checkpoint{}, err
	}
	return Checkpoint{Weights: weights, State: state, Metadata: caller, Verified: verified}, nil
}

// LatestPath reads the run directory's LatestFile and returns the checkpoint path it names and that
// checkpoint's step. When no checkpoint was ever completed the error wraps fs.ErrNotExist, so a
// trainer can tell "start fresh" from a damaged directory.
func LatestPath(dir string) (path string, step int64, err error) {
	pointer := filepath.Join(dir, LatestFile)
	// A run directory's own files are never links: one planted there is refused, not followed.
	b, err := safefile.ReadNoFollow(pointer, safefile.Pointer)
	if err != nil {
		return "", 0, fmt.Errorf("checkpoints: read %w", err)
	}
	name := strings.TrimSuffix(string(b), "\n")
	step, ok := parseCheckpointName(name)
	if !ok {
		return "", 0, fmt.Errorf("checkpoints: read %s: content %q is not a checkpoint file name like %q", pointer, name, CheckpointName(0))
	}
	return filepath.Join(dir, name), step, nil
}

// LoadLatest loads the checkpoint that the run directory's LatestFile names. When there is none the
// error wraps fs.ErrNotExist.
func LoadLatest(dir string) (Checkpoint, error) {
	path, step, err := LatestPath(dir)
	if err != nil {
		return Checkpoint{}, err
	}
	ckpt, err := loadRunCheckpoint(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// The pointer exists, so a missing file is damage, not a fresh start.
			return Checkpoint{}, fmt.Errorf("checkpoints: %s names %s, which is missing: %v", filepath.Join(dir, LatestFile), path, err)
		}
		return Checkpoint{}, err
	}
	if ckpt.State.Step != step {
		return Checkpoint{}, fmt.Errorf("checkpoints: load %s: file name says step %d, metadata says %d", path, step, ckpt.State.Step)
	}
	return ckpt, nil
}

// Skipped is a checkpoint (or the LatestFile pointer) that LoadLatestGood passed over, and why.
type Skipped struct {
	// Path is the file that was skipped.
	Path string
	// Err says why: it could not be read, failed its checksums, held NaN, or its step disagrees
	// with its name. It names the file.
	Err error
}

// String is the reason, which names the file, for a message to the user.
func (s Skipped) String() string {
	if s.Err == nil {
		return s.Path
	}
	if msg := s.Err.Error(); strings.Contains(msg, s.Path) {
		return msg
	}
	return fmt.Sprintf("%s: %v", s.Path, s.Err)
}

// LoadLatestGood loads the newest checkpoint of the run directory dir that loads and verifies,
// for resuming after the latest one was damaged. It tries the checkpoint that LatestFile names
// first, then every ckpt-<step>.safetensors of dir by descending step (a complete checkpoint whose
// pointer update a crash prevented counts too), and returns the first that LoadCheckpoint accepts
// and whose metadata step matches its name. skipped lists, in order, what it passed over and why:
// an unreadable pointer, and each checkpoint that failed; a caller should print them, because
// resuming from an older checkpoint repeats the steps after it. When dir holds no checkpoint and
// no pointer the error wraps fs.ErrNotExist (a fresh start); when none of them is good the error
// lists each one with its reason. How far back it can go depends on Prune's keep (keep >= 2 leaves
// a previous checkpoint to fall back to).
func LoadLatestGood(dir string) (ckpt Checkpoint, skipped []Skipped, err error) {
	var paths []string
	pointer := filepath.Join(dir, LatestFile)
	latest, _, perr := LatestPath(dir)
	switch {
	case perr == nil:
		paths = append(paths, latest)
	case errors.Is(perr, fs.ErrNotExist):
	default:
		skipped = append(skipped, Skipped{Path: pointer, Err: perr})
	}
	files, err := checkpointFiles(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{}, skipped, fmt.Errorf("checkpoints: list %s: %w", dir, err)
	}
	for _, f := range files {
		if path := filepath.Join(dir, f.name); path != latest {
			paths = append(paths, path)
		}
	}
	if len(paths) == 0 && len(skipped) == 0 {
		return Checkpoint{}, nil, fmt.Errorf("checkpoints: no checkpoint in %s: %w", dir, fs.ErrNotExist)
	}
	for _, path := range paths {
		step, _ := parseCheckpointName(filepath.Base(path))
		ck, err := loadRunCheckpoint(path)
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist) && path == latest:
			err = fmt.Errorf("checkpoints: %s names %s, which is missing: %v", pointer, path, err)
		case err == nil && ck.State.Step != step:
			err = fmt.Errorf("checkpoints: load %s: file name says step %d, metadata says %d", path, step, ck.State.Step)
		}
		if err == nil {
			return ck, skipped, nil
		}
		skipped = append(skipped, Skipped{Path: path, Err: err})
	}
	reasons := make([]string, len(skipped))
	for i, s := range skipped {
		reasons[i] = s.Err.Error()
	}
	return Checkpoint{}, skipped, fmt.Errorf("checkpoints: no good checkpoint in %s (%d tried): %s",
		dir, len(skipped), strings.Join(reasons, "; "))
}

// Prune removes all but the keep checkpoints of dir with the highest steps, and never the one
// LatestFile names. It returns the names of the files removed. When LatestFile exists but cannot be
// read, nothing is removed.
func Prune(dir string, keep int) (removed []string, err error) {
	return fsHooks{}.prune(dir, keep)
}

func (h fsHooks) prune(dir string, keep int) ([]string, error) {
	if keep < 1 {
		return nil, fmt.Errorf("checkpoints: prune %s: keep is %d, want at least 1", dir, keep)
	}
	latest := ""
	switch path, _, err := LatestPath(dir); {
	case err == nil:
		latest = filepath.Base(path)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("checkpoints: prune %s: %w", dir, err)
	}
	all, err := checkpointFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: prune %s: %w", dir, err)
	}
	var removed []string
	for i, c := range all {
		if i < keep || c.name == latest {
			continue
		}
		path := filepath.Join(dir, c.name)
		if err := h.point("remove", path); err != nil {
			return removed, fmt.Errorf("checkpoints: prune %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return removed, fmt.Errorf("checkpoints: prune %s: %w", path, err)
		}
		removed = append(removed, c.name)
	}
	return removed, nil
}

// stepFile is a checkpoint file of a run directory: its name and the step the name gives.
type stepFile struct {
	name string
	step int64
}

// checkpointFiles lists the regular ckpt-<step>.safetensors files of dir, newest step first.
func checkpointFiles(dir string) ([]stepFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []stepFile
	for _, e := range entries {
		if step, ok := parseCheckpointName(e.Name()); ok && e.Type().IsRegular() {
			files = append(files, stepFile{e.Name(), step})
		}
	}
	slices.SortFunc(files, func(a, b stepFile) int { return cmp.Compare(b.step, a.step) })
	return files, nil
}

// removeStaleTemps deletes temporary files that a crashed save of a checkpoint or pointer left in dir.
func (h fsHooks) removeStaleTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("checkpoints: clean %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !isStaleTemp(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := h.point("remove", path); err != nil {
			return fmt.Errorf("checkpoints: clean %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoints: clean %s: %w", path, err)
		}
	}
	return nil
}

// isStaleTemp reports whether name is a temporary file that writeAtomic makes for a checkpoint or
// for the pointer (safefile.TempPattern), and nothing else that may share the directory.
func isStaleTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	base, _, ok := strings.Cut(rest, ".tmp-")
	if !ok {
		return false
	}
	if base == LatestFile {
		return true
	}
	_, ok = parseCheckpointName(base)
	return ok
}
