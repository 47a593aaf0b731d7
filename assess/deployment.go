package assess

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/internal/field"
)

// Deployment is what the deployer does, as data: the YAML file `assess -config` reads (Example
// shows it with every key commented) over DefaultDeployment. Unknown keys are refused with their
// line and column, and every numeric field has its range in Rules.
type Deployment struct {
	// Model is the Hugging Face decoder directory (config.json, safetensors, tokenizer.json).
	Model string `yaml:"model" json:"model"`
	// Seed roots every secret draw (shields, A, observed rows): batch b of every setting uses
	// sampler seed Seed + b, so the settings of a grid share their random numbers.
	Seed uint64 `yaml:"seed" json:"seed"`
	// Offload says which blocks GELO protects.
	Offload Offload `yaml:"offload" json:"offload"`
	// Batch is what one protected call holds.
	Batch Batch `yaml:"batch" json:"batch"`
	// Shields are the secret rows S padded to H.
	Shields Shields `yaml:"shields" json:"shields"`
	// Mixing is how the secret A is drawn.
	Mixing Mixing `yaml:"mixing" json:"mixing"`
	// Observe is what the accelerator holds of U = A[H; S].
	Observe Observe `yaml:"observe" json:"observe"`
	// Deployer is the deployer's own compute.
	Deployer Deployer `yaml:"deployer" json:"deployer"`
	// Prompts are the texts the assessment puts through the deployment.
	Prompts Prompts `yaml:"prompts" json:"prompts"`
	// Secrets are the secret templates content recovery attacks (secrets.go).
	Secrets Secrets `yaml:"secrets" json:"secrets"`
	// Attacker is the attacks' budget.
	Attacker Attacker `yaml:"attacker" json:"attacker"`
	// Grid varies the shields around the deployment (the frontier).
	Grid Grid `yaml:"grid" json:"grid"`
}

// Offload names the blocks GELO offloads (their Q/K/V projection, mixed by a fresh A per call).
type Offload struct {
	// Blocks are the offloaded blocks; empty means every block of the model (Resolve writes
	// them out).
	Blocks []int `yaml:"blocks" json:"blocks"`
}

// Batch is the batch of one protected call: TextsPerCall texts of at most TokensPerText tokens
// (BOS included; longer prompts are cut), n = TextsPerCall x TokensPerText rows at most.
type Batch struct {
	TextsPerCall  int `yaml:"texts_per_call" json:"texts_per_call"`
	TokensPerText int `yaml:"tokens_per_text" json:"tokens_per_text"`
}

// Shields are GELO's secret rows.
type Shields struct {
	// Kind is gaussian or student_t (manifold shields, rows of other texts, are not assessed:
	// the batch's own texts are the whole val side of its sampler, so there is no donor).
	Kind string `yaml:"kind" json:"kind"`
	// Frac gives ceil(Frac x n) shield rows when Rows is 0.
	Frac float64 `yaml:"frac" json:"frac"`
	// Rows, when > 0, is the fixed number of shield rows per call.
	Rows int `yaml:"rows" json:"rows"`
	// Scale is the shields' row norm relative to the mean row norm of H.
	Scale float64 `yaml:"scale" json:"scale"`
}

// Mixing is how A is drawn.
type Mixing struct {
	// Kind is orthogonal (Haar) or kappa (A = Q1 diag(s) Q2^T with cond(A) = Kappa).
	Kind string `yaml:"kind" json:"kind"`
	// Kappa is cond(A) for kind kappa.
	Kappa float64 `yaml:"kappa" json:"kappa"`
}

// Observe is what reaches the accelerator.
type Observe struct {
	// DType is the storage format of U there: none (float32), bf16 or fp16.
	DType string `yaml:"dtype" json:"dtype"`
	// Rows is the observed fraction of U's rows, in (0, 1].
	Rows float64 `yaml:"rows" json:"rows"`
}

// Deployer is the deployer's own forward pass.
type Deployer struct {
	// Precision is the deployer's compute precision, fp32, bf16 or fp16: the attacks' absolute
	// tests allow the recomputation error between its rows and the attacker's fp32 ones
	// (decode.Options.DeployerPrecision).
	Precision string `yaml:"precision" json:"precision"`
}

// Prompts are the texts to test.
type Prompts struct {
	// Texts is the source as `decode -texts` reads it (a scripts/fetch-data.sh directory, a
	// .jsonl file, or one text per line); empty: the default corpus directory.
	Texts string `yaml:"texts" json:"texts"`
	// Corpora selects corpora of a fetch-script directory; empty: all present.
	Corpora []string `yaml:"corpora" json:"corpora"`
	// Count is the number of prompts: the first Count texts of the source, in its order, that
	// fall in the val split (data.SplitOf with ValFrac) and tokenize to at least 2 tokens.
	Count int `yaml:"count" json:"count"`
	// ValFrac is the val fraction of the stores' split rule (0.1: the stores' and configs/lm's).
	ValFrac float64 `yaml:"val_frac" json:"val_frac"`
}

// Attacker is the budget the attacks get.
type Attacker struct {
	// Attacks are the battery's attacks to run (Names lists them); empty: all of them.
	Attacks []string `yaml:"attacks" json:"attacks"`
	// Blocks are the offloaded blocks whose U the attacker scores: 0 (the bag) and at least one
	// more (the order). Empty: 0 and 1.
	Blocks []int `yaml:"blocks" json:"blocks"`
	// Beam bounds the live prefixes of the order search (0: 4 per text).
	Beam int `yaml:"beam" json:"beam"`
	// Joint ranks extensions by the sum of the scored blocks' excesses (decode -joint).
	Joint bool `yaml:"joint" json:"joint"`
	// MaxSteps bounds a decoded text's length (0: n_obs or the model's context).
	MaxSteps int `yaml:"max_steps" json:"max_steps"`
	// Rank searches the order by ranking where certification fails (decode -rank): past full
	// rank, or with rows dropped. Claims keep their rule, so an uncertified text is never
	// claimed; a text read exactly still counts as read.
	Rank bool `yaml:"rank" json:"rank"`
	// RankBag, with Rank, keeps only the RankBag best tokens of the bag (decode -rank-bag): the
	// budget where the bag is loose past full rank (0: the whole bag).
	RankBag int `yaml:"rank_bag" json:"rank_bag"`
	// Learned is a `geloattack train` run directory of task retrieval on a store extracted from
	// this model at an offloaded block's attention input: the learned presence attack's
	// checkpoint (its latest). Empty: that attack does not run.
	Learned string `yaml:"learned" json:"learned"`
	// LearnedCheckpoint is what Run read of Learned (written by Run into deployment.yaml, so a
	// resume against another checkpoint is refused; leave it out of a deployment file).
	LearnedCheckpoint LearnedCheckpoint `yaml:"learned_checkpoint" json:"learned_checkpoint"`
}

// Grid is the set of settings `assess -grid` adds around the deployment: every pair of shield
// rows and scale, then each cond(A) and each observed dtype alone at the deployment's shields
// (the rest of the deployment unchanged), so the default grid stays 14 settings.
type Grid struct {
	// Enabled runs the grid (the -grid flag sets it).
	Enabled bool `yaml:"enabled" json:"enabled"`
	// ShieldRows are the fixed shield counts of the grid; empty: d/2, d and 2d for a model of
	// width d (below, at and past full rank for batches of up to d/2 rows).
	ShieldRows []int `yaml:"shield_rows" json:"shield_rows"`
	// ShieldScales are the shield scales of the grid; empty: 1, 3 and 10.
	ShieldScales []float64 `yaml:"shield_scales" json:"shield_scales"`
	// Kappas are the cond(A) of the grid, 1 meaning orthogonal (Haar) A; empty: 1, 100, 1e4.
	Kappas []float64 `yaml:"kappas" json:"kappas"`
	// ObserveDTypes are the observed dtypes of the grid (none, bf16, fp16); empty: all three.
	ObserveDTypes []string `yaml:"observe_dtypes" json:"observe_dtypes"`
}

// The values of the string fields.
const (
	ShieldGaussian = "gaussian"
	ShieldStudentT = "student_t"
	MixOrthogonal  = "orthogonal"
	MixKappa       = "kappa"
	DTypeNone      = "none"
	DTypeBF16      = "bf16"
	DTypeFP16      = "fp16"
)

// DefaultGridScales are the shield scales of the default grid.
var DefaultGridScales = []float64{1, 3, 10}

// DefaultGridKappas are the cond(A) of the default grid (1: orthogonal).
var DefaultGridKappas = []float64{1, 100, 1e4}

// DTypes are the observed dtypes, the default grid's too.
var DTypes = []string{DTypeNone, DTypeBF16, DTypeFP16}

// DefaultDeployment is the deployment `geloattack assess -model DIR` assesses: the base cell of
// docs/prompt-decoding.md (batches of 4 texts of 16 tokens, 10% gaussian shields at scale 1,
// orthogonal A, every row observed in float32, an fp32 deployer) on 100 val prompts, every block
// offloaded, the attacker scoring blocks 0 and 1.
func DefaultDeployment() Deployment {
	return Deployment{
		Batch:    Batch{TextsPerCall: 4, TokensPerText: 16},
		Shields:  Shields{Kind: ShieldGaussian, Frac: 0.1, Scale: 1},
		Mixing:   Mixing{Kind: MixOrthogonal, Kappa: 1},
		Observe:  Observe{DType: DTypeNone, Rows: 1},
		Deployer: Deployer{Precision: membership.PrecisionFP32},
		Prompts:  Prompts{Count: 100, ValFrac: 0.1},
		Secrets:  Secrets{Templates: DefaultSecretTemplates(), Victims: 100, AbsentVictims: 100},
	}
}

// Rules is every numeric field of a Deployment with its range: Validate checks them, and the
// flags that override a field take its bounds from here.
var Rules = field.Table[Deployment]{
	{Key: "batch.texts_per_call", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 12}, Get: func(d Deployment) float64 { return float64(d.Batch.TextsPerCall) }},
	{Key: "batch.tokens_per_text", Bounds: field.Bounds{Int: true, Min: 2, Max: 1 << 12}, Get: func(d Deployment) float64 { return float64(d.Batch.TokensPerText) }},
	{Key: "shields.frac", Bounds: field.Bounds{Min: 0, Max: 1}, Get: func(d Deployment) float64 { return d.Shields.Frac },
		When: func(d Deployment) bool { return d.Shields.Rows == 0 }},
	{Key: "shields.rows", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "use shields.frac"}, Get: func(d Deployment) float64 { return float64(d.Shields.Rows) }},
	{Key: "shields.scale", Bounds: field.Bounds{Min: 1e-6, Max: 1e6}, Get: func(d Deployment) float64 { return d.Shields.Scale }},
	{Key: "mixing.kappa", Bounds: field.Bounds{Min: 1, Max: 1e12}, Get: func(d Deployment) float64 { return d.Mixing.Kappa },
		When: func(d Deployment) bool { return d.Mixing.Kind == MixKappa }},
	{Key: "observe.rows", Bounds: field.Bounds{Min: 1e-6, Max: 1}, Get: func(d Deployment) float64 { return d.Observe.Rows }},
	{Key: "prompts.count", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20}, Get: func(d Deployment) float64 { return float64(d.Prompts.Count) }},
	{Key: "prompts.val_frac", Bounds: field.Bounds{Min: 0, Max: 1, MinOpen: true, MaxOpen: true}, Get: func(d Deployment) float64 { return d.Prompts.ValFrac }},
	{Key: "secrets.victims", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20}, Get: func(d Deployment) float64 { return float64(d.Secrets.Victims) }},
	{Key: "secrets.absent_victims", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "none"}, Get: func(d Deployment) float64 { return float64(d.Secrets.AbsentVictims) }},
	{Key: "attacker.beam", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 16, Zero: "4 per text"}, Get: func(d Deployment) float64 { return float64(d.Attacker.Beam) }},
	{Key: "attacker.rank_bag", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "the whole bag"}, Get: func(d Deployment) float64 { return float64(d.Attacker.RankBag) }},
	{Key: "attacker.max_steps", Bounds: field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "n_obs or the model's context, the less"}, Get: func(d Deployment) float64 { return float64(d.Attacker.MaxSteps) }},
}

// blockBounds is the range of a block number (the model's own count is checked by Resolve).
var blockBounds = field.Bounds{Int: true, Min: 0, Max: 1 << 12}

// Validate checks every field that does not need the model and reports all offending ones, each
// a *field.Error naming its key.
func (d Deployment) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range Rules {
		if r.When != nil && !r.When(d) {
			continue
		}
		add(r.Check(r.Key, r.Get(d)))
	}
	switch d.Shields.Kind {
	case ShieldGaussian, ShieldStudentT:
	case "manifold":
		add(field.Errorf("shields.kind", "manifold is not assessed: its shield rows are other texts of the batch's split, and each assessed batch is the whole val side of its sampler (use gaussian or student_t)"))
	default:
		add(field.Errorf("shields.kind", "%q, want gaussian or student_t", d.Shields.Kind))
	}
	switch d.Mixing.Kind {
	case MixOrthogonal:
	case MixKappa:
	default:
		add(field.Errorf("mixing.kind", "%q, want orthogonal or kappa", d.Mixing.Kind))
	}
	if !slices.Contains(DTypes, d.Observe.DType) {
		add(field.Errorf("observe.dtype", "%q, want none, bf16 or fp16", d.Observe.DType))
	}
	if !slices.Contains(membership.ComputePrecisions, d.Deployer.Precision) {
		add(field.Errorf("deployer.precision", "%q, want one of %v", d.Deployer.Precision, membership.ComputePrecisions))
	}
	if d.Attacker.RankBag > 0 && !d.Attacker.Rank {
		add(field.Errorf("attacker.rank_bag", "%d needs attacker.rank: true (the certified search tries the whole certified bag)", d.Attacker.RankBag))
	}
	add(checkBlocks("offload.blocks", d.Offload.Blocks))
	add(checkBlocks("attacker.blocks", d.Attacker.Blocks))
	errs = append(errs, d.Secrets.validate()...)
	for i, name := range d.Attacker.Attacks {
		key := fmt.Sprintf("attacker.attacks[%d]", i)
		switch {
		case name == contentName && len(d.Secrets.Templates) == 0:
			add(field.Errorf(key, "%s needs secret templates (secrets.templates)", contentName))
		case !slices.Contains(Names(), name):
			add(field.Errorf(key, "%q, want one of %v", name, Names()))
		case slices.Index(d.Attacker.Attacks, name) < i:
			add(field.Errorf(key, "%q is listed twice", name))
		}
	}
	rowBounds := Rules.Bounds("shields.rows")
	rowBounds.Zero = "no shields"
	for i, k := range d.Grid.ShieldRows {
		add(rowBounds.Check(fmt.Sprintf("grid.shield_rows[%d]", i), float64(k)))
		if slices.Index(d.Grid.ShieldRows, k) < i {
			add(field.Errorf(fmt.Sprintf("grid.shield_rows[%d]", i), "%d is listed twice", k))
		}
	}
	for i, s := range d.Grid.ShieldScales {
		add(Rules.Bounds("shields.scale").Check(fmt.Sprintf("grid.shield_scales[%d]", i), s))
		if slices.Index(d.Grid.ShieldScales, s) < i {
			add(field.Errorf(fmt.Sprintf("grid.shield_scales[%d]", i), "%s is listed twice", field.Num(s)))
		}
	}
	kappaBounds := Rules.Bounds("mixing.kappa")
	for i, k := range d.Grid.Kappas {
		add(kappaBounds.Check(fmt.Sprintf("grid.kappas[%d]", i), k))
		if slices.Index(d.Grid.Kappas, k) < i {
			add(field.Errorf(fmt.Sprintf("grid.kappas[%d]", i), "%s is listed twice", field.Num(k)))
		}
	}
	for i, t := range d.Grid.ObserveDTypes {
		key := fmt.Sprintf("grid.observe_dtypes[%d]", i)
		if !slices.Contains(DTypes, t) {
			add(field.Errorf(key, "%q, want none, bf16 or fp16", t))
		} else if slices.Index(d.Grid.ObserveDTypes, t) < i {
			add(field.Errorf(key, "%q is listed twice", t))
		}
	}
	return errors.Join(errs...)
}

// checkBlocks refuses a negative, huge or repeated block number.
func checkBlocks(key string, blocks []int) error {
	for i, b := range blocks {
		if err := blockBounds.Check(fmt.Sprintf("%s[%d]", key, i), float64(b)); err != nil {
			return err
		}
		if slices.Index(blocks, b) < i {
			return field.Errorf(fmt.Sprintf("%s[%d]", key, i), "block %d is listed twice", b)
		}
	}
	return nil
}

// Resolve fills what depends on the model, a decoder of the given number of blocks and width d,
// and checks the blocks against it: every block offloaded when none are named, the attacker's
// blocks (0 and 1 when none are named), the attacks (all when none are named) and the grid's
// defaults. The result is what deployment.yaml records.
func (d Deployment) Resolve(blocks, width int) (Deployment, error) {
	if d.Model == "" {
		return d, field.Errorf("model", "required: a Hugging Face decoder directory (-model DIR)")
	}
	// Checked here, not by Validate: a flag (-learned) may complete a file that lists the attack.
	if i := slices.Index(d.Attacker.Attacks, learnedName); i >= 0 && d.Attacker.Learned == "" {
		return d, field.Errorf(fmt.Sprintf("attacker.attacks[%d]", i), "%s needs a trained checkpoint: attacker.learned (-learned RUN)", learnedName)
	}
	if len(d.Offload.Blocks) == 0 {
		d.Offload.Blocks = make([]int, blocks)
		for i := range d.Offload.Blocks {
			d.Offload.Blocks[i] = i
		}
	}
	for i, b := range d.Offload.Blocks {
		if b >= blocks {
			return d, field.Errorf(fmt.Sprintf("offload.blocks[%d]", i), "block %d of a model with %d blocks", b, blocks)
		}
	}
	if len(d.Attacker.Blocks) == 0 {
		d.Attacker.Blocks = []int{0, 1}
		if blocks < 2 {
			d.Attacker.Blocks = []int{0}
		}
	}
	for i, b := range d.Attacker.Blocks {
		if b >= blocks {
			return d, field.Errorf(fmt.Sprintf("attacker.blocks[%d]", i), "block %d of a model with %d blocks", b, blocks)
		}
	}
	if len(d.Attacker.Attacks) == 0 {
		// Every attack of the battery, the learned one only with its checkpoint, content only with
		// secret templates.
		for _, name := range Names() {
			if (name != learnedName || d.Attacker.Learned != "") && (name != contentName || len(d.Secrets.Templates) > 0) {
				d.Attacker.Attacks = append(d.Attacker.Attacks, name)
			}
		}
	}
	if len(d.Grid.ShieldRows) == 0 {
		d.Grid.ShieldRows = []int{max(1, width/2), width, 2 * width}
		d.Grid.ShieldRows = slices.Compact(d.Grid.ShieldRows)
	}
	if len(d.Grid.ShieldScales) == 0 {
		d.Grid.ShieldScales = slices.Clone(DefaultGridScales)
	}
	if len(d.Grid.Kappas) == 0 {
		d.Grid.Kappas = slices.Clone(DefaultGridKappas)
	}
	if len(d.Grid.ObserveDTypes) == 0 {
		d.Grid.ObserveDTypes = slices.Clone(DTypes)
	}
	return d, d.Validate()
}
