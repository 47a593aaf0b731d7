package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/baselines/presence"
	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/eval"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/termtext"
)

// rowspaceArgs holds -attack rowspace's own flags.
type rowspaceArgs struct {
	fs                                *flag.FlagSet
	batch, extra                      *optInt
	bestRow                           *bool
	modelDir, depTexts, depRows, prec *string
	rho                               *float64
}

// rowspaceFlags defines -attack rowspace's own flags and returns its run: row-space containment
// retrieval, and proofs of absence.
func rowspaceFlags(fs *flag.FlagSet) baselineRun {
	a := &rowspaceArgs{
		fs:       fs,
		batch:    overrideInt(fs, "batch", "train.batch_size", "rowspace: examples whose positives form one candidate set (the learned attacks' in-batch pools)"),
		extra:    overrideInt(fs, "extra-negatives", "loss.extra_negatives", "rowspace: random texts added to each candidate set"),
		bestRow:  fs.Bool("best-row", false, "rowspace: score a candidate by its best-contained row instead of its rows' energy inside the row space"),
		modelDir: fs.String("model", "", "rowspace: the decoder directory the store was extracted with (-deployer-texts, -deployer-rows)"),
		depTexts: fs.String("deployer-texts", "", "rowspace: write the texts the examples take rows from (token ids, JSON lines) for an external deployer (bench/torch_deploy.py --tokens FILE) and stop; a decoder store and its -model"),
		depRows: fs.String("deployer-rows", "", "rowspace: mix the rows an external deployer computed (bench/torch_deploy.py --out DIR from -deployer-texts' file, the store's point at its layer) instead of the store's; "+
			"the candidates stay the store's rows, and the proofs of absence allow for the deployer's recomputation error"),
		prec: fs.String("deployer-precision", "", "rowspace: with -deployer-rows, the deployer's declared compute precision ("+strings.Join(membership.ComputePrecisions, ", ")+
			"; left out: the rows' dtype), which sets rho as recover's does"),
		rho: new(float64),
	}
	floatVar(fs, a.rho, "recompute-error", 0, field.Bounds{Min: 0, Max: 1, MaxOpen: true, Zero: "the candidates' rows are the rows mixed, bit for bit: true without -deployer-rows"},
		"rowspace: recomputation error rho, a bound on ||x_att - x_dep|| / ||x_dep|| between a candidate's row and the row mixed; left out: 0, or from -deployer-precision with -deployer-rows")
	return func(ctx context.Context, env *baselineEnv) (any, error) { return runRowSpace(ctx, env, a) }
}

// rowspaceResult is -attack rowspace's result: the retrieval figures and presence claims, which
// stack computed the mixed rows, and the recomputation error the claims allow for.
type rowspaceResult struct {
	baselines.RowSpaceRow
	// Deployer names the stack that computed the mixed rows; empty: the store's (this
	// repository's forward).
	Deployer string `json:"deployer,omitempty"`
	// Recompute is rho and where it came from.
	Recompute content.Recompute `json:"recompute"`
}

// runRowSpace runs -attack rowspace on env with its flags' values.
func runRowSpace(ctx context.Context, env *baselineEnv, a *rowspaceArgs) (any, error) {
	cfg := env.cfg
	opts := baselines.RowSpaceOptions{Split: env.split, Examples: env.examples, Batch: cfg.Train.BatchSize,
		ExtraNegatives: cfg.Loss.ExtraNegatives, Seed: cfg.Seed}
	a.batch.apply(&opts.Batch)
	a.extra.apply(&opts.ExtraNegatives)
	if opts.Examples == 0 { // -examples left out (it refuses 0)
		opts.Examples = cfg.Train.EvalBatches * cfg.Train.BatchSize
	}
	if *a.bestRow {
		opts.Aggregate = baselines.BestRow
	}
	s := env.sampler
	res := rowspaceResult{}
	if flagWasSet(a.fs, "recompute-error") {
		rc, err := content.ExplicitRecompute(*a.rho)
		if err != nil {
			return nil, fmt.Errorf("-recompute-error: %w", err)
		}
		res.Recompute = rc
	}
	switch {
	case *a.depTexts != "" && *a.depRows != "":
		return nil, errors.New("-deployer-texts writes the deployer's input and stops; -deployer-rows attacks its output: give one")
	case *a.prec != "" && *a.depRows == "":
		return nil, errors.New("-deployer-precision applies with -deployer-rows: without them the candidates' rows are the rows mixed, bit for bit")
	case *a.prec != "" && !slices.Contains(membership.ComputePrecisions, *a.prec):
		return nil, fmt.Errorf("-deployer-precision %q: want one of %s", *a.prec, strings.Join(membership.ComputePrecisions, ", "))
	case *a.depTexts != "" || *a.depRows != "":
		if *a.modelDir == "" {
			return nil, errors.New("-deployer-texts and -deployer-rows need -model, the decoder directory the store was extracted with")
		}
		ds, err := deployerSampler(ctx, env, a, opts.Examples, &res)
		if err != nil || ds == nil {
			return nil, err // nil, nil: -deployer-texts wrote its file
		}
		opts.Candidates, s = s.Corpus(), ds
	}
	test, err := presence.Test(cfg.Sampler.ObserveDtype, res.Recompute.Rho)
	if err != nil {
		return nil, err
	}
	opts.Absence = test
	row, err := baselines.RowSpaceRetrieval(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	res.RowSpaceRow = row
	if res.Deployer != "" {
		fmt.Printf("mixed rows computed by the deployer's stack: %s; candidates: the store's rows (this repository's forward)\n", res.Deployer)
	}
	fmt.Printf("row-space containment on %s, obs_rows %g, observe_dtype %s, %.1f candidates per set:\n"+
		"  mass   %v\n  top1   %v\n  recall %v\n  median source residual %.3g\n",
		row.Split, row.ObsRows, row.ObserveDtype, row.Candidates, row.Mass, row.Top1, row.Recall, row.SourceResidual)
	fmt.Print(rowspaceMassNote)
	fmt.Print(absenceReport(row.Absence, res.Recompute))
	return res, nil
}

// deployerSampler reads the deployer's rows (or, with -deployer-texts, writes its input and
// returns nil) and returns a sampler that mixes them: the same texts, windows and shields as env's
// sampler, with the deployer's rows of the examples' texts. It sets res's deployer and, unless
// -recompute-error gave it, its recomputation error.
func deployerSampler(ctx context.Context, env *baselineEnv, a *rowspaceArgs, examples int, res *rowspaceResult) (*gelo.Sampler, error) {
	st, err := deployerStore(env.sampler)
	if err != nil {
		return nil, err
	}
	meta := st.Meta()
	// The deployer's rows are read and checked against the model's config.json before the weights
	// are loaded: every refusal comes before the long load.
	var dep *deployer.Rows
	if *a.depRows != "" {
		if dep, err = deployer.ReadRows(ctx, *a.depRows, meta.Decoder.Point, []int{meta.Layer}); err != nil {
			return nil, fmt.Errorf("-deployer-rows: %w", err)
		}
		if err := dep.Info.CheckModel(*a.modelDir); err != nil {
			return nil, fmt.Errorf("-deployer-rows: %w", err)
		}
	}
	emb, err := openDecoderEmbedder(*a.modelDir, meta)
	if err != nil {
		return nil, fmt.Errorf("-model: %w", err)
	}
	if _, err := emb.Verify(ctx, st, 4); err != nil {
		return nil, fmt.Errorf("store %s against model %s: %w", st.Dir(), *a.modelDir, err)
	}
	idx, err := exampleTexts(ctx, env.sampler, st, env.split, examples)
	if err != nil {
		return nil, err
	}
	if dep == nil {
		return nil, writeExampleTexts(*a.depTexts, st, emb, idx)
	}
	res.Deployer = dep.Info.Stack()
	fmt.Fprintf(os.Stderr, "baseline: the examples' rows: %s, from %s\n", termtext.Escape(res.Deployer), *a.depRows)
	if !flagWasSet(a.fs, "recompute-error") {
		prec := *a.prec
		if prec == "" {
			prec = dep.Info.DType
		}
		if res.Recompute, err = content.DefaultRecompute(emb, prec); err != nil {
			return nil, err
		}
		// The candidates are the store's rows: computed in tf32 or bf16, they err too.
		var note string
		if res.Recompute, note, err = withStoreRows(res.Recompute, meta); err != nil {
			return nil, err
		}
		if note != "" {
			fmt.Fprintf(os.Stderr, "baseline: %s\n", note)
		}
	}
	c, err := newDeployerCorpus(st, emb, dep, idx)
	if err != nil {
		return nil, err
	}
	return gelo.NewSampler(c, env.cfg.Sampler)
}

// absenceReport is the presence claims' lines: decoys proven absent (right) and positives proven
// absent (wrong), with exact 95% intervals, under the recomputation error rc.
func absenceReport(a *baselines.AbsenceCounts, rc content.Recompute) string {
	if a == nil {
		return ""
	}
	var b strings.Builder
	src := "the candidates' rows are the rows mixed"
	switch {
	case rc.Precision != "":
		src = fmt.Sprintf("deployer %s through %d blocks of width %d, the store's rounding included", rc.Precision, rc.Blocks, rc.Width)
	case rc.Rho > 0:
		src = "given with -recompute-error"
	}
	fmt.Fprintf(&b, "presence claims (proofs of absence; recomputation error rho %.3g: %s): a text is proven absent when no window\n"+
		"  of its rows the sampler could take passes the bound every row of X meets (below full rank the residual,\n"+
		"  past it the leverage); presence is never claimed\n", rc.Rho, src)
	if a.Void > 0 {
		fmt.Fprintf(&b, "  %d examples void (centred rows: the rows mixed are not the texts' rows)\n", a.Void)
	}
	for _, c := range []struct {
		what string
		k, n int
	}{{"decoys proven absent (right)", a.DecoysProven, a.Decoys}, {"positives proven absent (wrong claims)", a.PositivesProven, a.Positives}} {
		if c.n == 0 {
			continue
		}
		p, err := eval.ClopperPearson(c.k, c.n, 0.95)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "  %-40s %s\n", c.what, p)
	}
	return b.String()
}

// rowspaceMassNote explains why the row-space mass sits far below its top-1: the scores are
// log-odds of containment at no learned scale, and a candidate is scored on all its rows while an
// example holds only tokens_per_text of them, so the positives lead without dominating the softmax.
const rowspaceMassNote = "  (mass is the softmax, at temperature 1, of each candidate's containment log-odds over all its rows,\n" +
	"  of which an example holds only tokens_per_text: the positives can rank first (top1, recall 1) and\n" +
	"  still hold little of the softmax. Compare mass between row-space runs; top1 and recall with the\n" +
	"  learned attacks.)\n"
