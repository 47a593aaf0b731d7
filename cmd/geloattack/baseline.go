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
	"github.com/gelo-research/geloattack/baselines/attacks"
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
	Short:     "training-free attacks: " + strings.Join(attacks.Names(attacks.OnCLI()), " | "),
	Long: "Runs a training-free attack (SPEC §7) on examples drawn by the config's sampler, the same stream the\n" +
		"learned attacks are evaluated on. rowspace ranks candidate texts by how much of their rows lies in\n" +
		"rowspace(U_obs) and reports retrieval mass, top-1 and recall@|P| with chance, and its claims: candidate\n" +
		"texts proven absent (no window of rows the sampler could take passes the bound every row of X meets,\n" +
		"allowing for the recomputation error rho; a positive proven absent would be a wrong claim). With a\n" +
		"decoder store and -model, -deployer-texts FILE writes the examples' texts for bench/torch_deploy.py and\n" +
		"-deployer-rows DIR mixes the rows it computed, the candidates staying the store's; fastica, jade, fobi and\n" +
		"jd (SOBI-style joint diagonalisation) separate U and report p95 and mean |cos| to the clean rows after\n" +
		"Hungarian matching and the Gram error (SPEC §6), beside the same figures for as many random rows of\n" +
		"the split (what a random guess of rows reaches); anchor gives the attacker k clean rows.\n" +
		ownCommandsNote(),
	Flags:    baselineFlags,
	Delegate: baselineDelegate,
}

// ownCommandsNote is the line of baseline's help that names the attacks that are commands of
// their own: "content is geloattack recover, with its flags (geloattack recover -h); ...".
func ownCommandsNote() string {
	var parts []string
	for _, a := range attacks.OnCLI() {
		if a.Command != attacks.Baseline {
			parts = append(parts, fmt.Sprintf("%s is geloattack %s, with its flags (geloattack %s -h)", a.Name, a.Command, a.Command))
		}
	}
	return strings.Join(parts, ";\n") + "."
}

// attackUsage is the -attack flag's help: the names, then what the attacks that are commands of
// their own are ("content: sensitive-content recovery: the flags of geloattack recover -h").
func attackUsage() string {
	var notes []string
	for _, a := range attacks.OnCLI() {
		if a.Command != attacks.Baseline {
			what, _, _ := strings.Cut(a.Summary, ":")
			notes = append(notes, fmt.Sprintf("%s: %s: the flags of geloattack %s -h", a.Name, what, a.Command))
		}
	}
	return strings.Join(attacks.Names(attacks.OnCLI()), " | ") + " (" + strings.Join(notes, "; ") + ")"
}

// baselineDelegate selects the command of an attack that is a command of its own (-attack content
// is recover): the arguments are parsed by that command's flags and the -attack flag that
// selected it.
func baselineDelegate(args []string) *Command {
	name := attackArg(args)
	own := cliAttacks[name].command
	if own == nil {
		return nil
	}
	c := *own
	c.Flags = func(fs *flag.FlagSet) runFunc {
		fs.String("attack", name, attackUsage())
		return own.Flags(fs)
	}
	return &c
}

// baselineEnv is what the attacks on baseline's flags share: the config, the split, the sampler
// drawing the examples and -examples.
type baselineEnv struct {
	cfg      config.Run
	split    data.Split
	sampler  *gelo.Sampler
	examples int
}

// baselineFlags defines the flags of `geloattack baseline` and returns what runs it: the flags
// every attack on them shares, then each attack's own (cliAttacks), whose use with another
// -attack is refused.
func baselineFlags(fs *flag.FlagSet) runFunc {
	env := &baselineEnv{}
	attack := fs.String("attack", "rowspace", attackUsage())
	cfgPath := fs.String("config", "", "run config whose store and sampler draw the examples; empty = the embedded quickstart")
	storeDir := fs.String("store", "", "store directory to draw the examples and candidates from (overrides the config's store.path)")
	splitName := fs.String("split", "val", "split the examples and candidates come from: train or val")
	intVar(fs, &env.examples, "examples", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20},
		"examples to score; left out: train.eval_batches x train.batch_size for rowspace, 2 otherwise")
	out := fs.String("out", "", "also write the result as JSON to this file")
	addSamplerOverrides(fs, "texts per example")
	runs := map[string]baselineRun{}
	owner := map[string]string{} // an attack's own flag -> the attack
	for _, at := range attacks.OnCLI() {
		b := cliAttacks[at.Name]
		if b.flags == nil {
			continue
		}
		before := map[string]bool{}
		fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
		runs[at.Name] = b.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if !before[f.Name] {
				owner[f.Name] = at.Name
			}
		})
	}
	return func(ctx context.Context, args []string) error {
		run, ok := runs[*attack]
		if !ok {
			return fmt.Errorf("-attack %q: want %s", *attack, orList(attacks.Names(attacks.OnCLI())))
		}
		var misplaced error
		fs.Visit(func(f *flag.Flag) {
			if o, ok := owner[f.Name]; ok && o != *attack && misplaced == nil {
				misplaced = fmt.Errorf("-%s applies to -attack %s, not %s", f.Name, o, *attack)
			}
		})
		if misplaced != nil {
			return misplaced
		}
		split, err := data.ParseSplit(*splitName)
		if err != nil {
			return fmt.Errorf("-split: %w", err)
		}
		env.split = split
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		if *storeDir != "" {
			cfg.Store.Path = *storeDir
		}
		if cfg.Sampler, err = samplerOf(ctx, fs, cfg.Sampler); err != nil {
			return err
		}
		env.cfg = cfg
		corpus, closeFn, err := runner.OpenCorpus(cfg)
		if err != nil {
			return err
		}
		defer closeFn()
		if env.sampler, err = gelo.NewSampler(corpus, cfg.Sampler); err != nil {
			return err
		}
		result, err := run(ctx, env)
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

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// bssFlags is a blind-source-separation attack (-attack fastica, jade, fobi or jd): no flags of
// its own, and its run.
func bssFlags(name string) func(*flag.FlagSet) baselineRun {
	return func(*flag.FlagSet) baselineRun {
		return func(ctx context.Context, env *baselineEnv) (any, error) { return runBSS(ctx, env, name) }
	}
}

// runBSS runs the separation method name on env.
func runBSS(ctx context.Context, env *baselineEnv, name string) (any, error) {
	method := bssMethod(name, env.cfg.Seed)
	row, err := baselines.BSSEval(ctx, env.sampler, method, baselines.BSSOptions{Split: env.split, Examples: env.examples, Seed: env.cfg.Seed})
	if err != nil {
		return nil, err
	}
	fmt.Print(row.Table())
	return row, nil
}

// anchorFlags defines -attack anchor's own flags and returns its run: separation given k clean
// rows.
func anchorFlags(fs *flag.FlagSet) baselineRun {
	anchors := intFlag(fs, "anchors", 8, field.Bounds{Int: true, Min: 1, Max: 1 << 16}, "anchor: number k of clean rows the attacker knows")
	method := fs.String("anchor-method", "subtract", "anchor: subtract | project | constrained")
	return func(ctx context.Context, env *baselineEnv) (any, error) {
		return runAnchor(ctx, env, *anchors, *method)
	}
}

// runAnchor runs -attack anchor on env with k anchors and the named method.
func runAnchor(ctx context.Context, env *baselineEnv, k int, method string) (any, error) {
	m, err := baselines.ParseAnchorMethod(method)
	if err != nil {
		return nil, fmt.Errorf("-anchor-method: %w", err)
	}
	seed := env.cfg.Seed
	row, err := baselines.AnchorEval(ctx, env.sampler, baselines.AnchorEvalOptions{Split: env.split, Examples: env.examples,
		Anchors: k, Anchor: baselines.AnchorOptions{Method: m, ICA: baselines.FastICAOptions{Seed: seed}}, Seed: seed})
	if err != nil {
		return nil, err
	}
	fmt.Print(row.Table())
	return row, nil
}

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
