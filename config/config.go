// Package config reads run configurations: strict YAML (unknown keys and wrong types rejected with
// line and column), documented defaults for every field, and range checks whose errors name the key,
// its line and the allowed range.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/synth/synthcfg"
	"github.com/gelo-research/geloattack/engine/device/devspec"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/termtext"
	"github.com/gelo-research/geloattack/losses/ot/otcfg"
	"github.com/gelo-research/geloattack/models/causallm/lmcfg"
	"github.com/gelo-research/geloattack/models/settransformer/modelcfg"
	"github.com/gelo-research/geloattack/train/trainopts"
)

// Run is a whole run configuration: where the hidden states come from, how examples are drawn,
// the model, the trainer, the loss and the evaluation.
type Run struct {
	// Name names the run; the run directory defaults to runs/<name>. Default "run".
	Name string `yaml:"name" json:"name"`
	// OutDir is the run directory. Default runs/<name>.
	OutDir string `yaml:"out_dir" json:"out_dir"`
	// Seed seeds the model's initialisation and per-step draws; the sampler's seed defaults to it.
	// Default 1.
	Seed uint64 `yaml:"seed" json:"seed"`
	// Device is auto, cpu, cuda or cuda:N (GPU N). Default auto: GPU 0 when the CUDA backend opens,
	// else the CPU (logging why). cuda fails when no GPU opens. It does not change what a run
	// trains: a run may resume on another device.
	Device string `yaml:"device" json:"device"`
	// Precision is the GEMM precision on a GPU: fp32, tf32 or bf16 (GEMM inputs rounded to tf32 or
	// bf16 by cuBLAS, fp32 accumulation, fp32 master weights and optimizer state). The CPU always
	// computes in fp32. Default fp32. A run may resume with another precision (the new one is
	// recorded in config.yaml and the checkpoints), but sweep cells differing in it are different runs.
	Precision string `yaml:"precision" json:"precision"`
	// Store says where hidden states come from.
	Store Store `yaml:"store" json:"store"`
	// Sampler is SPEC §3: positives, tokens, shields, mixing, observation.
	Sampler gelo.Config `yaml:"sampler" json:"sampler"`
	// Model is SPEC §4; input_dim and candidate_dim default to the store's d and e.
	Model modelcfg.Config `yaml:"model" json:"model"`
	// Train is the optimizer, schedule, logging, evaluation and checkpoint cadence.
	Train trainopts.Options `yaml:"train" json:"train"`
	// Loss holds the SPEC §5 settings not owned by the model.
	Loss Loss `yaml:"loss" json:"loss"`
	// Eval holds the SPEC §6 settings.
	Eval Eval `yaml:"eval" json:"eval"`
	// LM is the language-model run of model.task lm: texts, tokenizer and the decoder's shape
	// (store, sampler, loss, eval and the set model's keys do not apply to it).
	LM lmcfg.Config `yaml:"lm" json:"lm"`
	// Source names where the config was read from (the file, or a sweep cell), for errors found
	// only once the store is open; it is not part of the config.
	Source string `yaml:"-" json:"-"`
}

// Store selects the source of hidden states.
type Store struct {
	// Path is a store directory (SPEC §2). Empty means the embedded synthetic store below.
	Path string `yaml:"path" json:"path"`
	// Synth sizes the embedded synthetic store when Path is empty.
	Synth synthcfg.Config `yaml:"synth" json:"synth"`
}

// Loss holds loss settings that are not part of the model.
type Loss struct {
	// ExtraNegatives adds this many random texts of the split to the in-batch InfoNCE candidates.
	// Default 0.
	ExtraNegatives int `yaml:"extra_negatives" json:"extra_negatives"`
	// Unmix is the unmixing loss (task unmix): Sinkhorn OT variant, eps, iterations, rho, and the
	// weights of the cycle, OT and regularisation terms.
	Unmix otcfg.Config `yaml:"unmix" json:"unmix"`
}

// Eval holds evaluation settings.
type Eval struct {
	// Batches is the number of batches per split that `geloattack eval` scores. Default 32.
	Batches int `yaml:"batches" json:"batches"`
	// PoolK is K, the pool size of the unmix same-embedding mass. Default 16.
	PoolK int `yaml:"pool_k" json:"pool_k"`
	// Tau is the temperature of the unmix same-embedding softmax. Default 0.05.
	Tau float64 `yaml:"tau" json:"tau"`
}

// Default returns the documented defaults of every field.
func Default() Run {
	m, _ := modelcfg.Preset("tiny")
	m.InputDim, m.CandidateDim = 0, 0 // from the store
	return Run{
		Name:      "run",
		Seed:      1,
		Device:    devspec.Auto,
		Precision: devspec.FP32,
		Store:     Store{Synth: synthcfg.DefaultConfig()},
		Sampler:   gelo.DefaultConfig(),
		Model:     m,
		Train:     trainopts.DefaultOptions(),
		Loss:      Loss{Unmix: otcfg.DefaultConfig()},
		Eval:      Eval{Batches: 32, PoolK: 16, Tau: 0.05},
		LM:        lmcfg.Default(),
	}
}

// Error is an error located in a YAML file: a run config, or a sweep file built on one.
type Error struct {
	// Kind names what was being read ("config" when empty, "sweep", ...).
	Kind      string
	File      string
	Line, Col int
	// Key is the dotted path of the offending key, if known.
	Key string
	Msg string
}

// Error renders "kind file:line:col: key: message", with control bytes, invisible bidi and format
// characters and invalid UTF-8 of the file (which the YAML parser quotes in its messages) escaped
// so a file cannot write to the terminal.
func (e *Error) Error() string { return termtext.Escape(e.render()) }

func (e *Error) render() string {
	kind := e.Kind
	if kind == "" {
		kind = "config"
	}
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Col)
	}
	if e.Key != "" {
		return fmt.Sprintf("%s %s: %s: %s", kind, loc, e.Key, e.Msg)
	}
	return fmt.Sprintf("%s %s: %s", kind, loc, e.Msg)
}

// Load reads a config file over the defaults; see Parse. A file that sets nothing (empty, or
// comments only) is refused: it is far more often a wrong path or a truncated copy than a wish
// for every default, which running with no -config gives anyway.
func Load(path string) (Run, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return Run{}, &Error{File: path, Msg: "is a directory, want a YAML file"}
	}
	src, err := ReadFile("config", path)
	if err != nil {
		return Run{}, err
	}
	if err := CheckNotEmpty(path, src); err != nil {
		return Run{}, err
	}
	return Parse(path, src)
}

// ReadFile reads a config or sweep file (kind names it in errors) through internal/safefile's
// door (kind Config: a file, or a pipe such as <(...); at most 4 MiB, since a real one is a few KB
// and a path such as /dev/zero must not be read until memory runs out), refusing anything that is
// not text (see CheckText).
func ReadFile(kind, path string) ([]byte, error) {
	src, err := safefile.Read(path, safefile.Config)
	if errors.Is(err, safefile.ErrTooLarge) {
		return nil, &Error{Kind: kind, File: path, Msg: fmt.Sprintf("larger than %d MiB: not a %s file", safefile.Config.Limit()>>20, kind)}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	src = bytes.TrimPrefix(src, utf8BOM)
	if err := CheckText(kind, path, src); err != nil {
		return nil, err
	}
	return src, nil
}

// utf8BOM is the byte-order mark some editors write at the start of a UTF-8 file; it is not part
// of the document.
var utf8BOM = []byte("\ufeff")

// CheckNotEmpty refuses a config file that sets no key (empty, blank or comments only).
func CheckNotEmpty(name string, src []byte) error {
	if len(bytes.TrimSpace(src)) == 0 || emptyDocument(src) {
		return &Error{File: name, Msg: "sets nothing (empty or comments only); name a config that sets at least one key, or omit -config for the embedded quickstart"}
	}
	return nil
}

// Parse decodes src (named name in errors) over the defaults, strictly, and validates it. The
// sampler's seed defaults to the run's seed when the file does not set it. Binary input (a NUL
// byte, other control bytes, invalid UTF-8) is refused before it reaches the YAML parser.
func Parse(name string, src []byte) (Run, error) {
	src = bytes.TrimPrefix(src, utf8BOM)
	if err := CheckText("config", name, src); err != nil {
		return Run{}, err
	}
	r := Default()
	if !emptyDocument(src) {
		if err := checkNodes(name, src); err != nil {
			return Run{}, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(src), yaml.Strict(), yaml.DisallowUnknownField())
		if err := dec.Decode(&r); err != nil {
			return Run{}, decodeError(name, src, err)
		}
		// A second document would be silently ignored: refuse it.
		var extra any
		if err := dec.Decode(&extra); err == nil {
			return Run{}, &Error{File: name, Msg: "more than one YAML document (---); a run config is one document"}
		}
	}
	if !hasKey(src, "$.sampler.seed") {
		r.Sampler.Seed = r.Seed
	}
	if err := r.Validate(); err != nil {
		return Run{}, locate(name, src, err)
	}
	r.Source = name
	return r, nil
}

// CheckText refuses bytes that no YAML config or sweep file holds: invalid UTF-8 and control
// bytes other than tab, newline and carriage return. Their offset and line are named so the user
// can find them; kind names the file's kind ("config", "sweep").
func CheckText(kind, name string, src []byte) error {
	line := 1
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRune(src[i:])
		bad := ""
		switch {
		case r == utf8.RuneError && size <= 1:
			bad = fmt.Sprintf("invalid UTF-8 byte 0x%02x", src[i])
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f:
			bad = fmt.Sprintf("control byte 0x%02x", r)
		}
		if bad != "" {
			return &Error{Kind: kind, File: name, Line: line, Msg: fmt.Sprintf("%s at byte offset %d: not a YAML text file", bad, i)}
		}
		if r == '\n' {
			line++
		}
		i += size
	}
	return nil
}

// emptyDocument reports whether src holds no YAML value (nothing, or comments only): all defaults.
func emptyDocument(src []byte) bool {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return false // let the decoder report it
	}
	for _, d := range f.Docs {
		if d.Body != nil {
			return false
		}
	}
	return true
}

// decodeError turns a go-yaml error into an Error at its line and column (from the error's token,
// not its text). The key is the path of the deepest key on that line of the document, since type
// errors name Go types rather than YAML keys.
func decodeError(name string, src []byte, err error) error {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
		return &Error{File: name, Msg: msg}
	}
	pos := ye.GetToken().Position
	e := &Error{File: name, Line: pos.Line, Col: pos.Column, Msg: ye.GetMessage()}
	if e.Key = pathAtLine(src, pos.Line); e.Key == "" {
		// The document does not parse (a syntax error): the key written on the line, if any.
		lines := strings.Split(string(src), "\n")
		if pos.Line >= 1 && pos.Line <= len(lines) {
			if k, _, ok := strings.Cut(strings.TrimSpace(lines[pos.Line-1]), ":"); ok {
				e.Key = strings.TrimPrefix(k, "- ")
			}
		}
	}
	return e
}

// validName keeps run names usable as directory names everywhere.
var validName = regexp.MustCompile(`^[A-Za-z0-9_+=,][A-Za-z0-9._+=,-]*$`)

// Validate checks every section. Errors are *field.Error values carrying the key's dotted path,
// which Parse uses to find the key's line.
func (r Run) Validate() error {
	if !validName.MatchString(r.Name) || r.Name == "." || r.Name == ".." {
		return field.Errorf("name", "%q, want letters, digits and . _ - + = , not starting with . or - (it names the run directory)", r.Name)
	}
	if _, err := devspec.ParseSpec(r.Device); err != nil {
		return field.Errorf("device", "%q, want %s", r.Device, devspec.SpecHelp)
	}
	if r.Precision == "" || devspec.ValidPrecision(r.Precision) != nil {
		return field.Errorf("precision", "%q, want %s", r.Precision, devspec.PrecisionHelp)
	}
	if err := r.LM.CheckValues(); err != nil {
		return field.In("lm", err)
	}
	if r.Model.Task == modelcfg.TaskLM {
		if r.Store.Path != "" {
			return field.Errorf("store.path", "%q: task lm reads the texts of lm.texts, not a store", r.Store.Path)
		}
		if err := r.LM.Validate(); err != nil {
			return field.In("lm", err)
		}
		if err := r.Train.Validate(); err != nil {
			return field.In("train", err)
		}
		return nil
	}
	if r.Store.Path == "" {
		// The file's own values first: a 0 it sets must not pass as the default it would become.
		if err := synthcfg.Rules.Check(r.Store.Synth); err != nil {
			return field.In("store.synth", err)
		}
		if err := r.Store.Synth.Validate(); err != nil {
			return field.In("store.synth", err)
		}
	}
	if err := r.Sampler.Validate(); err != nil {
		return field.In("sampler", err)
	}
	if err := r.validateModel(); err != nil {
		return field.In("model", err)
	}
	if err := r.Train.Validate(); err != nil {
		return field.In("train", err)
	}
	if err := runRules.Check(r); err != nil {
		return err
	}
	return field.In("loss.unmix", r.Loss.Unmix.Validate())
}

// validateModel checks the model section with the store's widths filled in where the file left
// them at 0, so that a config is checked before any store is opened.
func (r Run) validateModel() error {
	m := r.Model
	if m.InputDim == 0 {
		m.InputDim = 1
	}
	if m.CandidateDim == 0 {
		m.CandidateDim = 1
	}
	return m.Validate()
}

// locate turns a validation error into an Error at the line of its key, or of the nearest
// enclosing section the file sets when the key is not in the file (its default, or a derived
// value, is what is wrong).
func locate(name string, src []byte, err error) error {
	var fe *field.Error
	if !errors.As(err, &fe) {
		return &Error{File: name, Msg: err.Error()}
	}
	e := &Error{File: name, Key: fe.Path, Msg: fe.Msg}
	for p := fe.Path; p != "" && e.Line == 0; {
		e.Line, e.Col = position(src, "$."+p)
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return e
}

// position is the line and column of the node at a YAML path, or 0, 0.
func position(src []byte, path string) (int, int) {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return 0, 0
	}
	p, err := yaml.PathString(path)
	if err != nil {
		return 0, 0
	}
	n, err := p.FilterFile(f)
	if err != nil || n == nil || n.GetToken() == nil {
		return 0, 0
	}
	return n.GetToken().Position.Line, n.GetToken().Position.Column
}

// hasKey reports whether the document sets the key at path.
func hasKey(src []byte, path string) bool {
	l, _ := position(src, path)
	return l > 0
}

// Marshal renders the resolved config as YAML, the form saved in the run directory.
func (r Run) Marshal() ([]byte, error) { return yaml.Marshal(r) }
