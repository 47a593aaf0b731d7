package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/runner"
)

var cmdBaseline = &Command{
	Name:      "baseline",
	UsageLine: "-attack NAME [-config FILE] [flags]",
	Short:     "training-free attacks: " + attackNames(" | ", true),
	Long: "Runs a training-free attack (SPEC §7) on examples drawn by the config's sampler, the same stream the\n" +
		"learned attacks are evaluated on. rowspace ranks candidate texts by how much of their rows lies in\n" +
		"rowspace(U_obs) and reports retrieval mass, top-1 and recall@|P| with chance; fastica, jade, fobi and\n" +
		"jd (SOBI-style joint diagonalisation) separate U and report p95 and mean |cos| to the clean rows after\n" +
		"Hungarian matching and the Gram error (SPEC §6), beside the same figures for as many random rows of\n" +
		"the split (what a random guess of rows reaches); anchor gives the attacker k clean rows. content is\n" +
		"geloattack recover, with its flags (geloattack recover -h).",
	Flags:    baselineFlags,
	Delegate: baselineDelegate,
}

// baselineAttack is one training-free attack of `geloattack baseline`: the -attack flag's help, its
// validation, the dispatch and the command's summary are all derived from baselineAttacks.
type baselineAttack struct {
	// Name is the attack's -attack value.
	Name string
	// Note, when set, is shown after the names in the -attack flag's help.
	Note string
	// Run runs the attack on a's parsed flags and returns its result (written by -out).
	Run func(ctx context.Context, a *baselineArgs) (any, error)
	// Command, when set, is the command the attack is: it has that command's flags instead of
	// baseline's, and Run is nil.
	Command func() *Command
}

// baselineAttacks lists the training-free attacks, in the order the help names them.
var baselineAttacks = []baselineAttack{
	{Name: "rowspace", Run: runRowSpace},
	{Name: "fastica", Run: runBSS},
	{Name: "jade", Run: runBSS},
	{Name: "fobi", Run: runBSS},
	{Name: "jd", Run: runBSS},
	{Name: "anchor", Run: runAnchor},
	{Name: "content", Note: "sensitive-content recovery: the flags of geloattack recover -h"},
}

// The content attack's command is set here: its -attack flag's help reads baselineAttacks.
func init() { findAttack("content").Command = baselineContent }

// attackNames joins the attacks' names with sep; withCommands includes those that are commands of
// their own. With sep ", " the last two are joined by " or ".
func attackNames(sep string, withCommands bool) string {
	var names []string
	for _, at := range baselineAttacks {
		if at.Command == nil || withCommands {
			names = append(names, at.Name)
		}
	}
	if sep == ", " && len(names) > 1 {
		return strings.Join(names[:len(names)-1], sep) + " or " + names[len(names)-1]
	}
	return strings.Join(names, sep)
}

// attackUsage is the -attack flag's help: the names, then the attacks' notes.
func attackUsage() string {
	var notes []string
	for _, at := range baselineAttacks {
		if at.Note != "" {
			notes = append(notes, at.Note)
		}
	}
	u := attackNames(" | ", true)
	if len(notes) > 0 {
		u += " (" + strings.Join(notes, "; ") + ")"
	}
	return u
}

// findAttack returns the attack named name, or nil.
func findAttack(name string) *baselineAttack {
	for i := range baselineAttacks {
		if baselineAttacks[i].Name == name {
			return &baselineAttacks[i]
		}
	}
	return nil
}

// baselineDelegate selects the command of an attack that is a command of its own (-attack content
// is recover): the arguments are parsed by that command's flags, which accept -attack too.
func baselineDelegate(args []string) *Command {
	if at := findAttack(attackArg(args)); at != nil && at.Command != nil {
		return at.Command()
	}
	return nil
}

// baselineContent is `geloattack baseline -attack content`: recover's flags and run, plus the
// -attack flag that selected it.
func baselineContent() *Command {
	c := *cmdRecover
	c.Flags = func(fs *flag.FlagSet) runFunc {
		fs.String("attack", "content", attackUsage())
		return recoverFlags(fs)
	}
	return &c
}

// baselineArgs holds the parsed flags of `geloattack baseline` and what the attacks share: the
// config, the split and the sampler drawing the examples.
type baselineArgs struct {
	attack, anchorMethod *string
	examples, anchors    *int
	batch, extra         *optInt
	bestRow              *bool

	cfg     config.Run
	split   data.Split
	sampler *gelo.Sampler
}

// baselineFlags defines the flags of `geloattack baseline` and returns what runs it.
func baselineFlags(flags *flag.FlagSet) runFunc {
	a := &baselineArgs{}
	a.attack = flags.String("attack", "rowspace", attackUsage())
	cfgPath := flags.String("config", "", "run config whose store and sampler draw the examples; empty = the embedded quickstart")
	splitName := flags.String("split", "val", "split the examples and candidates come from: train or val")
	a.examples = intFlag(flags, "examples", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20},
		"examples to score; left out: train.eval_batches x train.batch_size for rowspace, 2 otherwise")
	a.batch = overrideInt(flags, "batch", "train.batch_size", "rowspace: examples whose positives form one candidate set (the learned attacks' in-batch pools)")
	a.extra = overrideInt(flags, "extra-negatives", "loss.extra_negatives", "rowspace: random texts added to each candidate set")
	a.bestRow = flags.Bool("best-row", false, "rowspace: score a candidate by its best-contained row instead of its rows' energy inside the row space")
	a.anchors = intFlag(flags, "anchors", 8, field.Bounds{Int: true, Min: 1, Max: 1 << 16}, "anchor: number k of clean rows the attacker knows")
	a.anchorMethod = flags.String("anchor-method", "subtract", "anchor: subtract | project | constrained")
	obsRows := flags.Float64("obs-rows", 0, "override sampler.obs_rows, the observed fraction of U's rows (0 = keep)")
	dtype := flags.String("observe-dtype", "", "override sampler.observe_dtype: none | bf16 | fp16 (empty = keep)")
	out := flags.String("out", "", "also write the result as JSON to this file")
	return func(ctx context.Context, args []string) error {
		split, err := data.ParseSplit(*splitName)
		if err != nil {
			return fmt.Errorf("-split: %w", err)
		}
		a.split = split
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		if *obsRows != 0 {
			cfg.Sampler.ObsRows = *obsRows
		}
		if *dtype != "" {
			cfg.Sampler.ObserveDtype = gelo.ObserveDtype(*dtype)
		}
		if err := cfg.Sampler.Validate(); err != nil {
			return err
		}
		a.cfg = cfg
		corpus, closeFn, err := runner.OpenCorpus(cfg)
		if err != nil {
			return err
		}
		defer closeFn()
		if a.sampler, err = gelo.NewSampler(corpus, cfg.Sampler); err != nil {
			return err
		}
		at := findAttack(*a.attack)
		if at == nil || at.Run == nil {
			return fmt.Errorf("-attack %q: want %s", *a.attack, attackNames(", ", false))
		}
		result, err := at.Run(ctx, a)
		if err != nil {
			return err
		}
		if *out != "" {
			b, err := json.MarshalIndent(result, "", "  ")
			if err != nil {
				return err
			}
			if err := checkpoints.WriteFileAtomic(*out, append(b, '\n')); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
		}
		return nil
	}
}

// runRowSpace runs -attack rowspace: row-space containment retrieval.
func runRowSpace(ctx context.Context, a *baselineArgs) (any, error) {
	cfg := a.cfg
	opts := baselines.RowSpaceOptions{Split: a.split, Examples: *a.examples, Batch: cfg.Train.BatchSize,
		ExtraNegatives: cfg.Loss.ExtraNegatives, Seed: cfg.Seed}
	a.batch.apply(&opts.Batch)
	a.extra.apply(&opts.ExtraNegatives)
	if opts.Examples == 0 {
		opts.Examples = cfg.Train.EvalBatches * cfg.Train.BatchSize
	}
	if *a.bestRow {
		opts.Aggregate = baselines.BestRow
	}
	row, err := baselines.RowSpaceRetrieval(ctx, a.sampler, opts)
	if err != nil {
		return nil, err
	}
	fmt.Printf("row-space containment on %s, obs_rows %g, observe_dtype %s, %.1f candidates per set:\n"+
		"  mass   %v\n  top1   %v\n  recall %v\n  median source residual %.3g\n",
		row.Split, row.ObsRows, row.ObserveDtype, row.Candidates, row.Mass, row.Top1, row.Recall, row.SourceResidual)
	fmt.Print(rowspaceMassNote)
	return row, nil
}

// runBSS runs a blind-source-separation attack: -attack fastica, jade, fobi or jd.
func runBSS(ctx context.Context, a *baselineArgs) (any, error) {
	method := bssMethod(*a.attack, a.cfg.Seed)
	row, err := baselines.BSSEval(ctx, a.sampler, method, baselines.BSSOptions{Split: a.split, Examples: *a.examples, Seed: a.cfg.Seed})
	if err != nil {
		return nil, err
	}
	fmt.Print(row.Table())
	return row, nil
}

// runAnchor runs -attack anchor: separation given k clean rows.
func runAnchor(ctx context.Context, a *baselineArgs) (any, error) {
	m, err := baselines.ParseAnchorMethod(*a.anchorMethod)
	if err != nil {
		return nil, fmt.Errorf("-anchor-method: %w", err)
	}
	seed := a.cfg.Seed
	row, err := baselines.AnchorEval(ctx, a.sampler, baselines.AnchorEvalOptions{Split: a.split, Examples: *a.examples,
		Anchors: *a.anchors, Anchor: baselines.AnchorOptions{Method: m, ICA: baselines.FastICAOptions{Seed: seed}}, Seed: seed})
	if err != nil {
		return nil, err
	}
	fmt.Print(row.Table())
	return row, nil
}

// rowspaceMassNote explains why the row-space mass sits far below its top-1: the scores are
// log-odds of containment at no learned scale, and a candidate is scored on all its rows while an
// example holds only tokens_per_text of them, so the positives lead without dominating the softmax.
const rowspaceMassNote = "  (mass is the softmax, at temperature 1, of each candidate's containment log-odds over all its rows,\n" +
	"  of which an example holds only tokens_per_text: the positives can rank first (top1, recall 1) and\n" +
	"  still hold little of the softmax. Compare mass between row-space runs; top1 and recall with the\n" +
	"  learned attacks.)\n"

// bssMethod names a separation method for BSSEval.
func bssMethod(name string, seed uint64) baselines.BSSMethod {
	run := map[string]baselines.BSSFunc{
		"fastica": func(ctx context.Context, u *mat.Dense) (baselines.Separation, error) {
			return baselines.FastICA(ctx, u, baselines.FastICAOptions{Seed: seed})
		},
		"jade": func(ctx context.Context, u *mat.Dense) (baselines.Separation, error) {
			return baselines.JADE(ctx, u, baselines.JADEOptions{})
		},
		"fobi": func(ctx context.Context, u *mat.Dense) (baselines.Separation, error) {
			return baselines.FOBI(ctx, u, baselines.FOBIOptions{})
		},
		"jd": func(ctx context.Context, u *mat.Dense) (baselines.Separation, error) {
			return baselines.SOBI(ctx, u, baselines.SOBIOptions{})
		},
	}
	return baselines.BSSMethod{Name: name, Run: run[name]}
}

// attackArg returns the value of the -attack flag in args ("" when it is not given), stopping at "--".
func attackArg(args []string) string {
	for i, a := range args {
		switch {
		case a == "--":
			return ""
		case a == "-attack" || a == "--attack":
			if i+1 < len(args) {
				return args[i+1]
			}
		case strings.HasPrefix(a, "-attack=") || strings.HasPrefix(a, "--attack="):
			return a[strings.IndexByte(a, '=')+1:]
		}
	}
	return ""
}
