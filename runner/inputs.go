package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/internal/safefile"
)

// MetaInputs is the checkpoint metadata key under which a task-lm run records what it read
// (Inputs as JSON). The header checksum of the checkpoint covers it like every other key.
const MetaInputs = "inputs"

// Files of a task-lm run directory holding the tokenizer the run trains with: a copy of
// lm.tokenizer (and of the tokenizer_config.json beside it, when there is one) written at the
// run's start, so that `model export` takes the run's tokenizer rather than whatever lies at the
// recorded path later.
const (
	RunTokenizerFile       = "tokenizer.json"
	RunTokenizerConfigFile = "tokenizer_config.json"
)

// noTokenizerConfig is Inputs.TokenizerConfig of a tokenizer without a tokenizer_config.json.
const noTokenizerConfig = "none"

// Inputs identifies the inputs of a task-lm run by SHA-256 digests ("sha256:<hex>"): the texts it
// tokenizes (ids and contents, in order, after lm.max_texts: what the run trains and evaluates
// on, whether lm.texts is a file or a corpus directory), the tokenizer.json bytes and the
// tokenizer_config.json bytes ("none" when there is none). Every checkpoint of the run records
// them under MetaInputs; -resume compares them with the inputs read again.
type Inputs struct {
	Texts           string `json:"lm.texts"`
	Tokenizer       string `json:"lm.tokenizer"`
	TokenizerConfig string `json:"lm.tokenizer_config"`
}

// digest is "sha256:<hex>" of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// configDigest is Inputs.TokenizerConfig of a tokenizer_config.json's bytes (nil: none).
func configDigest(b []byte) string {
	if b == nil {
		return noTokenizerConfig
	}
	return digest(b)
}

// textsDigest is Inputs.Texts of texts: each text's id and length as 8-byte little-endian
// integers, then its bytes, so that no two lists hash the same input.
func textsDigest(texts []corpus.Text) string {
	h := sha256.New()
	var n [16]byte
	for _, t := range texts {
		binary.LittleEndian.PutUint64(n[:8], uint64(t.ID))
		binary.LittleEndian.PutUint64(n[8:], uint64(len(t.Text)))
		h.Write(n[:])
		h.Write([]byte(t.Text))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// inputChange is one input that differs between a checkpoint and now.
type inputChange struct {
	Key, Path, Was, Now string
}

func (c inputChange) String() string {
	return fmt.Sprintf("%s (%s): %s at the checkpoint, %s now", c.Key, c.Path, c.Was, c.Now)
}

// changes lists the inputs of now that differ from was, naming the files by texts and tokenizer
// (the tokenizer_config.json is the one beside tokenizer).
func (was Inputs) changes(now Inputs, texts, tokenizer string) []inputChange {
	var out []inputChange
	tokConfig := filepath.Join(filepath.Dir(tokenizer), RunTokenizerConfigFile)
	for _, f := range []struct{ key, path, was, now string }{
		{"lm.texts", texts, was.Texts, now.Texts},
		{"lm.tokenizer", tokenizer, was.Tokenizer, now.Tokenizer},
		{"lm.tokenizer_config", tokConfig, was.TokenizerConfig, now.TokenizerConfig},
	} {
		if f.was != f.now {
			out = append(out, inputChange{Key: f.key, Path: f.path, Was: f.was, Now: f.now})
		}
	}
	return out
}

// inputsOf reads the Inputs a checkpoint recorded; ok is false for a checkpoint written before
// runs recorded them. A value that is not exactly Inputs (an unknown or missing key, an empty
// digest) is an error naming the file and the key.
func inputsOf(ck checkpoints.Checkpoint) (in Inputs, ok bool, err error) {
	raw, ok := ck.Metadata[MetaInputs]
	if !ok {
		return Inputs{}, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Inputs{}, false, fmt.Errorf("checkpoint %s: metadata %s: %w", ck.Path, MetaInputs, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Inputs{}, false, fmt.Errorf("checkpoint %s: metadata %s: data after the object", ck.Path, MetaInputs)
	}
	if in.Texts == "" || in.Tokenizer == "" || in.TokenizerConfig == "" {
		return Inputs{}, false, fmt.Errorf("checkpoint %s: metadata %s is %s: want lm.texts, lm.tokenizer and lm.tokenizer_config", ck.Path, MetaInputs, raw)
	}
	return in, true, nil
}

// resumeInputs compares the inputs a resumed task-lm run read now with those its checkpoint
// recorded. Changed inputs are refused, naming each key, file and both digests, unless accept
// (-accept-changed-inputs): then record is the metrics.jsonl record that says so, and header the
// line for the run header. note is set for a checkpoint that recorded no inputs.
func resumeInputs(dir string, ck checkpoints.Checkpoint, cfg LMPaths, now Inputs, accept bool) (header, note string, record map[string]any, err error) {
	was, ok, err := inputsOf(ck)
	if err != nil {
		return "", "", nil, fmt.Errorf("resume: %w", err)
	}
	if !ok {
		return "", fmt.Sprintf("checkpoint %s records no hashes of its texts and tokenizer (a run made before geloattack recorded them): lm.texts and lm.tokenizer not checked; the checkpoints from now on record them",
			ck.Path), nil, nil
	}
	ch := was.changes(now, cfg.Texts, cfg.Tokenizer)
	if len(ch) == 0 {
		if accept {
			header = "-accept-changed-inputs: the texts and tokenizer are those the checkpoint recorded; nothing to accept"
		}
		return header, "", nil, nil
	}
	var what string
	changed := map[string]any{}
	for i, c := range ch {
		if i > 0 {
			what += "; "
		}
		what += c.String()
		changed[c.Key] = map[string]string{"path": c.Path, "was": c.Was, "now": c.Now}
	}
	if !accept {
		return "", "", nil, fmt.Errorf("resume %s: the run's inputs changed since checkpoint %s: %s; resume with the inputs it trained on, start a new run, or add -accept-changed-inputs to continue on the new ones (the run header and metrics.jsonl then record it)",
			dir, ck.Path, what)
	}
	header = fmt.Sprintf("-accept-changed-inputs: continuing from step %d on changed inputs: %s", ck.State.Step, what)
	record = map[string]any{"event": "accept_changed_inputs", "checkpoint": filepath.Base(ck.Path), "changed": changed}
	return header, "", record, nil
}

// LMPaths are the paths a task-lm run reads, as it reads them (ExpandPath of the config's).
type LMPaths struct {
	Texts, Tokenizer string
}

// writeRunTokenizer makes dir's copy of the tokenizer the run trains with hold j and c (c nil:
// no tokenizer_config.json). A copy that already holds these bytes is left alone, so a config
// whose lm.tokenizer names the copy itself is never written onto.
func writeRunTokenizer(dir string, j, c []byte) error {
	for _, f := range []struct {
		name string
		data []byte
	}{{RunTokenizerFile, j}, {RunTokenizerConfigFile, c}} {
		path := filepath.Join(dir, f.name)
		old, err := safefile.ReadNoFollow(path, kindOf(f.name))
		switch {
		case err == nil && f.data != nil && bytes.Equal(old, f.data):
			continue
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("the run's copy of its tokenizer: %w", err)
		case f.data == nil:
			if err == nil {
				if err := os.Remove(path); err != nil {
					return fmt.Errorf("the run's copy of its tokenizer: %w", err)
				}
			}
			continue
		}
		if err := checkpoints.WriteFileAtomic(path, f.data); err != nil {
			return fmt.Errorf("the run's copy of its tokenizer: %w", err)
		}
	}
	return nil
}

// kindOf is the safefile kind of a run's tokenizer copy.
func kindOf(name string) safefile.Kind {
	if name == RunTokenizerConfigFile {
		return safefile.TokenizerConfig
	}
	return safefile.TokenizerJSON
}

// readRunTokenizer reads the run's copy of its tokenizer in dir through files, never through a
// link; the error wraps fs.ErrNotExist when the run holds no copy (made before runs kept one).
func readRunTokenizer(files *safefile.Files, dir string) (j, c []byte, err error) {
	j, err = files.ReadNoFollow(filepath.Join(dir, RunTokenizerFile), safefile.TokenizerJSON)
	if err != nil {
		return nil, nil, err
	}
	c, err = files.ReadNoFollow(filepath.Join(dir, RunTokenizerConfigFile), safefile.TokenizerConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return j, c, nil
}
