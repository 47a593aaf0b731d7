package assess

import (
	"context"
	"fmt"
	"slices"

	"github.com/gelo-research/geloattack/baselines/attacks"
)

// Attack is one attack of the battery. It runs on one batch of one setting at a time and gives one
// Row per prompt of the batch; the rows are all the report knows of it.
type Attack interface {
	// Name is the attack's key in results.jsonl and the deployment's attacker.attacks.
	Name() string
	// Success is what a row's success means, as the verdict line says it ("reads prompts
	// exactly"); Claimed what its claimed flag means ("claimed (proven)").
	Success() string
	Claimed() string
	// Undecided is what a row flagged CannotTell means ("cannot tell"), "" for an attack that
	// never flags one.
	Undecided() string
	// Budget is the attacker's budget under deployment d, in words (blocks scored, beam, bag
	// cut, ...); the report adds the candidate passes the rows count.
	Budget(d Deployment) string
	// Check says why the attack does not apply to d (nil: it applies). An attack that does not
	// apply is not run, and the report says why.
	Check(d Deployment) error
	// Run attacks one batch: u's prompts under u's setting. It returns a row per prompt, in the
	// order of u.Prompts, with the batch's figures on each (content: one row, u.Secret's victim).
	Run(ctx context.Context, env *Env, u Unit) ([]Row, error)
}

// Env is what every attack of a run shares.
type Env struct {
	// Deployment is the resolved deployment.
	Deployment Deployment
	// Target is the model, its tokenizer and the prompts.
	Target *Target
	// Log, when set, hears the attacks' progress within a batch.
	Log func(string)
	// DeployerRows, when set, gives the rows the deployer mixed into U at a block for a text,
	// from the attacker's recomputation of them (rows, which it may change in place): a deployer
	// whose forward differs from the attacker's (another stack or precision, within the declared
	// deployer.precision's bound). nil: the deployer's rows are the attacker's own. Presence and
	// the learned attack draw U from them; decode draws its own (baselines/decode).
	DeployerRows func(block int, textID int64, rows []float32) ([]float32, error)
	// learned is the learned attack's opened checkpoint (nil when it does not run).
	learned *learnedModel
	// secrets are content recovery's candidate sets (nil when it does not run).
	secrets *secretSets
}

// Unit is one batch of one setting for one attack: the work between two appends to results.jsonl.
type Unit struct {
	// Setting is the setting, SettingIndex its place in Deployment.Settings().
	Setting      Setting
	SettingIndex int
	// AttackIndex is the attack's place in the deployment's attacker.attacks.
	AttackIndex int
	// Batch is the batch's number, Prompts its prompts (content: the prompts its victim joins).
	Batch   int
	Prompts []Prompt
	// Seed is the batch's sampler seed: the deployment's seed + Batch.
	Seed uint64
	// Secret is content recovery's victim (nil for the other attacks): a unit of content is one
	// victim in a batch of the prompts, Batch its number among the template victims of the
	// setting.
	Secret *SecretVictim
}

// implementations are the attacks assess has code for, each named as in baselines/attacks.
func implementations() []Attack {
	return []Attack{decodeAttack{}, presenceAttack{}, contentAttack{}, learnedAttack{}}
}

// battery is every attack assess runs, in report order: the registry's assessed attacks
// (attacks.Assessed, in its explicit order), each name bound to its implementation. A name
// without one is left out (TestBatteryIsTheRegistrys checks there is none, and no implementation
// the registry does not list).
func battery() []Attack {
	impl := implementations()
	var out []Attack
	for _, a := range attacks.Assessed() {
		if i := slices.IndexFunc(impl, func(x Attack) bool { return x.Name() == a.Name }); i >= 0 {
			out = append(out, impl[i])
		}
	}
	return out
}

// Names lists the battery's attacks, in report order.
func Names() []string {
	var out []string
	for _, a := range battery() {
		out = append(out, a.Name())
	}
	return out
}

// Lookup is the battery's attack of that name.
func Lookup(name string) (Attack, bool) {
	for _, a := range battery() {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// attacksOf are d's attacks, in the order of attacker.attacks.
func attacksOf(d Deployment) ([]Attack, error) {
	var out []Attack
	for _, name := range d.Attacker.Attacks {
		a, ok := Lookup(name)
		if !ok {
			return nil, fmt.Errorf("assess: attacker.attacks: %q, want one of %v", name, Names())
		}
		out = append(out, a)
	}
	return out, nil
}

// checkBlocksScored is the common check of the training-free attacks: the attacker scores only
// offloaded blocks, and needs block 0 (the bag) and, when order is true, one block >= 1.
func checkBlocksScored(d Deployment, order bool) error {
	for _, b := range d.Attacker.Blocks {
		if !slices.Contains(d.Offload.Blocks, b) {
			return fmt.Errorf("the attacker scores block %d, which GELO does not offload (offload.blocks %v)", b, d.Offload.Blocks)
		}
	}
	if !slices.Contains(d.Attacker.Blocks, 0) {
		return fmt.Errorf("it needs block 0's U (the bag): attacker.blocks %v", d.Attacker.Blocks)
	}
	if order && !slices.ContainsFunc(d.Attacker.Blocks, func(b int) bool { return b > 0 }) {
		return fmt.Errorf("the order needs a block >= 1: attacker.blocks %v", d.Attacker.Blocks)
	}
	return nil
}
