// Package lmcfg is the schema of a language-model run (task lm): the lm section of a run config,
// which names the texts, the tokenizer and the decoder's shape, with its defaults and range checks,
// free of the engine so that reading a config links no device code. Package causallm builds the
// model and re-exports Model.
package lmcfg

import (
	"fmt"

	"github.com/gelo-research/geloattack/internal/field"
)

// Config is the lm section of a run config.
type Config struct {
	// Texts is the text source: a directory made by scripts/fetch-data.sh, a .jsonl file or a
	// text file of one text per line (see data/corpus.ReadSource). Required for task lm.
	Texts string `yaml:"texts" json:"texts"`
	// Corpora selects corpora of a fetch-script directory, comma-separated (fortunes,wordnet,sotu,
	// as `store extract -corpora`); empty: all.
	Corpora string `yaml:"corpora" json:"corpora"`
	// MaxTexts keeps the first MaxTexts texts of the source (its stable hashed order); 0 keeps all.
	MaxTexts int `yaml:"max_texts" json:"max_texts"`
	// Tokenizer is a Hugging Face tokenizer.json (tokenizer_config.json beside it is read when
	// present); its vocabulary size is the model's. Required for task lm.
	Tokenizer string `yaml:"tokenizer" json:"tokenizer"`
	// ValFrac is the fraction of texts held out for validation by text id (data.SplitOf, the rule
	// the stores split by, so a store extracted with the same fraction has the same val texts).
	// Default 0.1.
	ValFrac float64 `yaml:"val_frac" json:"val_frac"`
	// Model is the decoder's shape.
	Model Model `yaml:"model" json:"model"`
}

// Model is the shape of the trained decoder: a Llama architecture with multi-head attention
// (kv heads = heads) and the output projection tied to the token embedding.
type Model struct {
	// Hidden is d, the width of the residual stream. Default 384.
	Hidden int `yaml:"hidden" json:"hidden"`
	// Layers is the number of decoder blocks. Default 6.
	Layers int `yaml:"layers" json:"layers"`
	// Heads is the number of attention heads; it must divide Hidden. Default 6.
	Heads int `yaml:"heads" json:"heads"`
	// MLP is f, the SwiGLU inner width. Default 1024.
	MLP int `yaml:"mlp" json:"mlp"`
	// Seq is T, the training sequence length (tokens per window; positions 0..T-1). Default 128.
	Seq int `yaml:"seq" json:"seq"`
	// RopeTheta is the rotary base. Default 10000.
	RopeTheta float64 `yaml:"rope_theta" json:"rope_theta"`
	// Eps is the RMSNorm epsilon. Default 1e-5.
	Eps float64 `yaml:"eps" json:"eps"`
}

// HeadDim is Hidden / Heads.
func (m Model) HeadDim() int { return m.Hidden / m.Heads }

// Default returns the documented defaults (Texts and Tokenizer empty).
func Default() Config {
	return Config{ValFrac: 0.1, Model: DefaultModel()}
}

// DefaultModel is the small decoder of configs/lm: 6 blocks of width 384, 6 heads, MLP 1024,
// sequences of 128.
func DefaultModel() Model {
	return Model{Hidden: 384, Layers: 6, Heads: 6, MLP: 1024, Seq: 128, RopeTheta: 10000, Eps: 1e-5}
}

// ModelRules is every numeric field of Model with its bounds.
var ModelRules = field.Table[Model]{
	{Key: "hidden", Bounds: field.Bounds{Int: true, Min: 2, Max: 1 << 16}, Get: func(m Model) float64 { return float64(m.Hidden) }},
	{Key: "layers", Bounds: field.Bounds{Int: true, Min: 1, Max: 1024}, Get: func(m Model) float64 { return float64(m.Layers) }},
	{Key: "heads", Bounds: field.Bounds{Int: true, Min: 1, Max: 1024}, Get: func(m Model) float64 { return float64(m.Heads) }},
	{Key: "mlp", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 18}, Get: func(m Model) float64 { return float64(m.MLP) }},
	{Key: "seq", Bounds: field.Bounds{Int: true, Min: 2, Max: 1 << 16}, Get: func(m Model) float64 { return float64(m.Seq) }},
	{Key: "rope_theta", Bounds: field.Bounds{Min: 1, Max: 1e9}, Get: func(m Model) float64 { return m.RopeTheta }},
	{Key: "eps", Bounds: field.Bounds{Min: 1e-12, Max: 1e-1}, Get: func(m Model) float64 { return m.Eps }},
}

// Rules is every numeric field of Config (the model's under "model.") with its bounds.
var Rules = field.Table[Config]{
	{Key: "max_texts", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 40, Zero: "all texts"}, Get: func(c Config) float64 { return float64(c.MaxTexts) }},
	{Key: "val_frac", Bounds: field.Bounds{Min: 0, Max: 1, MinOpen: true, MaxOpen: true}, Get: func(c Config) float64 { return c.ValFrac }},
}

// Validate names the first field out of range and checks that the heads divide the width into
// an even head dimension (rotary embeddings rotate pairs).
func (m Model) Validate() error {
	if err := ModelRules.Check(m); err != nil {
		return err
	}
	if m.Hidden%m.Heads != 0 {
		return field.Errorf("heads", "%d does not divide hidden %d", m.Heads, m.Hidden)
	}
	if m.HeadDim()%2 != 0 {
		return field.Errorf("heads", "%d heads give a head dimension of %d; rotary embeddings need it even", m.Heads, m.HeadDim())
	}
	return nil
}

// CheckValues checks every numeric field and the model's shape, but not that texts and tokenizer
// are named: a run config checks the lm section's values whatever its task, as it checks every
// section, and requires the sources only for task lm.
func (c Config) CheckValues() error {
	if err := Rules.Check(c); err != nil {
		return err
	}
	return field.In("model", c.Model.Validate())
}

// Validate checks every field; texts and tokenizer must be named.
func (c Config) Validate() error {
	if err := c.CheckValues(); err != nil {
		return err
	}
	if c.Texts == "" {
		return field.Errorf("texts", "empty: name the text source (a scripts/fetch-data.sh directory or a text file)")
	}
	if c.Tokenizer == "" {
		return field.Errorf("tokenizer", "empty: name a tokenizer.json")
	}
	return nil
}

// String is a one-line summary of the decoder's shape.
func (m Model) String() string {
	return fmt.Sprintf("%d blocks x %d, %d heads, MLP %d, seq %d", m.Layers, m.Hidden, m.Heads, m.MLP, m.Seq)
}
