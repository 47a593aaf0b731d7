package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/termtext"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/runner"
)

var cmdRecover = &Command{
	Name:      "recover",
	UsageLine: "-store STORE [-model DIR] [-template pin|name|birth|PATTERN] [-suffix TEXT] [-set ...] [flags]\n       geloattack baseline -attack content [the same flags]",
	Short:     attackSummary("content"),
	Long: `Sensitive-content recovery (docs/content-recovery.md). A victim text made from a template with a
secret slot ("my PIN is {x}") is placed in an ordinary GELO example beside other texts of the
store (the config's sampler: positives, tokens per text, shields, mixing, kappa, obs_rows,
observe_dtype). The attacker fills the template with every candidate, computes each candidate's
hidden states with the store's own model, layer, truncation and special-token handling (from the
store's meta.json; the re-computed rows of a few store texts must match the stored ones, else it
refuses), and ranks the candidates by how well their rows lie in rowspace(U_obs), at a numerical
rank tolerance suited to the observed dtype, and past full rank by leverage against (U^T U)^+ and by
containment in U's top-k singular directions (baselines/membership). It reports exact recovery
(secret ranked first) per score, the secret's rank, the margin (best wrong score minus the secret's,
in decades; > 0 = recovered), chance 1/|C|, and the numerical rank of U_obs beside n.

The attacker's candidate rows are never bit-equal to the rows the deployer mixed (another BLAS
kernel, batch or precision changes the last bits, and a float16 store turns them into flipped
rounding), so every absolute test allows a recomputation error rho: -deployer-precision gives
the default for the deployer's declared compute precision, -recompute-error sets it; the run's
first line says which is in force. Each victim gets one verdict:
  claim                      below full rank only: the best candidate's secret rows are contained
                             within ((10 u_eff + rho)/(1 - rho))^2, it leads the next by
                             -claim-gap decades, every other candidate fails that test, and so
                             does every neighbour of it: up to -neighbours strings one edit away
                             that are not candidates (its prefixes, one character appended,
                             deleted, substituted or inserted, over the candidates' characters),
                             embedded like the candidates; one passing withdraws the claim;
  not among the candidates   proven: no candidate passes a test the secret's rows are guaranteed
                             to pass (every row observed; below full rank no direction of U lost
                             to rounding; past full rank every candidate's leverage above its
                             row's own bound (sqrt(1.25) + rho |x|/((1 - rho) sigma_min(U)))^2);
  ranked first, not claimed  everything else: past full rank always (a prefix or near-duplicate
                             of the secret passes the leverage test too), a short lead, rows dropped.
-grid runs a one-axis-at-a-time grid around the base cell (the flags' settings).

Decoders: with -model a Hugging Face decoder directory (Llama, Mistral, Qwen2, Qwen3 with its
tokenizer.json) and a store that ` + "`store extract -model`" + ` made from it, the victims' and the
candidates' rows come from extraction's decoder pass at the store's layer and point (its BOS,
truncation and norm). A causal model's rows up to the secret's end are also the rows of every
longer secret that starts like it ("1603" inside "16037"), so each candidate is scored on its rows
from the secret to the END of the text, and a template whose slot is last is refused: give one
with text after {x}, or append text with -suffix (e.g. -suffix " ok"). A decoder's claim also
takes the end-of-text test: the row of the claimed text followed by every token of the
vocabulary must fail the bound (else the victim's text may go on after it, as "no no no no no"
goes on in "no no no no no no"), and that row must be observable: every row observed, window
sampling, and tokens_per_text above the claimed text's rows.

A deployer we did not write: -deployer-texts FILE writes the victims' texts (the secrets the same
flags draw, as token ids; with -grid, the victims of every cell the grid and -axes run) for
bench/torch_deploy.py --tokens FILE (a decoder store) or bench/torch_bert_deploy.py --tokens FILE
(an encoder store) and stops; each distinct text is written once (a secret drawn twice, cells of
one set and template), ids 0, 1, .... -deployer-rows DIR attacks the rows it computed (--out DIR:
a decoder's point at the store's layer, BOS kept; an encoder's hidden_states at the store's layer,
[CLS] and [SEP] kept) instead of the model's own forward, with or without -grid: GELO mixes the
deployer's rows (the store's special-token dropping, norm and float16 rounding applied to them as
to the store's), the candidates are recomputed here. Each victim's rows are the deployer's text
of exactly the victim's token ids, found by its tokens (texts of equal tokens: the lowest id's
rows, equal for a deployer that runs each text alone); a victim of any cell without one is
refused before the candidates are embedded, naming the cell. The rows are refused unless
deployer.json names -model's config.json, and so is a run with a NaN or infinite row, or with
more or fewer .npz files than its texts; the run names the deployer's stack, and
-deployer-precision defaults to its dtype (bf16 rows need the bf16 bound): a finer one runs with
a WARNING in the header (its rho is too small for the rows), -recompute-error sets rho outright.
An output (-out, -table, -deployer-texts) inside the -store, -model or -deployer-rows directory
is refused before any work.

Before attacking, -verify store texts are recomputed here in fp32 and compared with the stored
rows, within the recomputation bound of a deployer of the store's own compute precision
(meta.json compute_precision: a tf32 or bf16 store from store extract -precision is allowed
that precision's bound), else it refuses.`,
	Flags: recoverFlags,
}

// recoverArgs holds the flags of `geloattack recover` (and `geloattack baseline -attack content`),
// as defineRecoverArgs defines them on fs.
type recoverArgs struct {
	fs *flag.FlagSet

	cfgPath, storeDir, modelDir, corpusDir, tmpl, suffix, set  *string
	years, depTexts, depRows                                   *string
	nCand, victims, nbBudget, verifyN                          *int
	splitName, scoreName, compare, precision, axes, out, table *string
	first, seed                                                *int64
	claimGap, rhoFlag                                          *float64
	absent, grid, quiet                                        *bool

	// sets are the candidate sets' values read so far, by -set name (cellValues).
	sets map[string][]string
}

// defineRecoverArgs defines the flags of `geloattack recover` on fs.
func defineRecoverArgs(fs *flag.FlagSet) *recoverArgs {
	defModel, _ := corpus.DefaultModelDir()
	defCorpus, _ := corpus.DefaultCorpusDir()
	a := &recoverArgs{
		fs:        fs,
		cfgPath:   fs.String("config", "", "run config whose store and sampler settings are used (empty: the embedded quickstart's sampler; then -store is required)"),
		storeDir:  fs.String("store", "", "store directory built by `geloattack store extract` (overrides the config's store.path)"),
		modelDir:  fs.String("model", defModel, "model directory (config.json, tokenizer.json, *.safetensors) the store was extracted with: a BERT-family encoder, or a Llama/Mistral/Qwen2/Qwen3 decoder ($"+corpus.EnvModel+" overrides the default)"),
		corpusDir: fs.String("corpus", defCorpus, "corpus directory of scripts/fetch-data.sh; the name set reads WordNet from it"),
		tmpl:      fs.String("template", "pin", "victim template: pin (\"my PIN is {x}\"), name (\"my name is {x}\"), birth (\"I was born on {x}\"), or any text holding {x} once"),
		suffix:    fs.String("suffix", "", "text appended to the template (and to -grid's date template): a decoder needs text after {x}, and refuses a template whose slot is last (e.g. -suffix \" ok\")"),
		set:       fs.String("set", "", "candidate set: pin (0000-9999), date (every day of -years, \"March 5, 1987\"), name (WordNet person names, 3,886), or file:PATH (one candidate per line, # comments);\nempty: the template's own set (pin, name, birth -> date; a custom template needs -set)"),
		years:     fs.String("years", "1925:2024", "date set: FIRST:LAST years, inclusive"),
		nCand:     intFlag(fs, "candidates", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 24, Zero: "all"}, "keep this many candidates of the set, a seeded uniform subset; the secret is drawn among those kept"),
		victims:   intFlag(fs, "victims", 100, field.Bounds{Int: true, Min: 1, Max: 1 << 20}, "victim examples (each its own example and secret)"),
		splitName: fs.String("split", "val", "split the examples' other texts come from: train or val"),
		first:     int64Flag(fs, "first-example", 0, field.Bounds{Int: true, Min: 0, Max: 1 << 40}, "example index of the first victim in the split's stream"),
		seed:      int64Flag(fs, "seed", 0, field.Bounds{Int: true, Min: 0, Max: 1 << 62}, "seed of the secrets and of the candidate subset (left out: the config's seed)"),
		scoreName: fs.String("score", "slot_worst", "ranking score: slot_worst (worst residual over the secret's own rows), slot_energy, worst, energy (all rows), best_row (fooled by [CLS])"),
		compare:   fs.String("compare", "", "comma-separated further scores reported beside -score (all: every score; scores over all rows cost a pass over every row)"),
		claimGap:  fs.Float64("claim-gap", 1, "decades by which the best candidate must lead the second for a claim (below full rank; the best must also be contained within ((10 u_eff + rho)/(1 - rho))^2)"),
		nbBudget: intFlag(fs, "neighbours", content.DefaultNeighbourBudget, field.Bounds{Int: true, Min: 1, Max: 1 << 16},
			"most neighbours of a claimed candidate (strings one edit away that are not candidates: prefixes and appends first) embedded and tested before the claim stands"),
		precision: fs.String("deployer-precision", membership.PrecisionFP32, "the deployer's declared compute precision, "+strings.Join(membership.ComputePrecisions, ", ")+": sets the default recomputation error rho (membership.RecomputeError through the store's layer at its width, plus the store's float16 rounding on both sides)"),
		rhoFlag:   new(float64),
		absent:    fs.Bool("absent", false, "remove each victim's secret from the candidates it is scored against: an honest attack answers \"not among the candidates\" or \"ranked first, not claimed\", never a claim"),
		grid:      fs.Bool("grid", false, "run the one-axis-at-a-time grid (candidates, shield, dtype, obs_rows, mix, rows, defence) around the flags' base cell"),
		axes:      fs.String("axes", "", "with -grid: comma-separated axes to run (empty: all): "+strings.Join(content.GridAxes, ",")),
		verifyN:   intFlag(fs, "verify", 4, field.Bounds{Int: true, Min: 1, Max: 1000}, "store texts re-computed and compared with the stored rows before attacking (refuses a row beyond the recomputation bound of the store's meta.json compute_precision)"),
		out:       fs.String("out", "", "write the result (or every grid cell) as JSON to this file"),
		table:     fs.String("table", "", "with -grid: also write the Markdown grid table to this file"),
		quiet:     fs.Bool("quiet", false, "no progress output"),
		depTexts:  fs.String("deployer-texts", "", "write the victims' texts (token ids, as JSON lines, each distinct text once) to this file for an external deployer (bench/torch_deploy.py, or bench/torch_bert_deploy.py for an encoder store: --tokens FILE) and stop; with -grid the file holds the victims of every cell the grid (-axes) runs"),
		depRows:   fs.String("deployer-rows", "", "attack the victims' rows an external deployer computed (bench/torch_deploy.py or bench/torch_bert_deploy.py --out DIR from -deployer-texts' file, the store's point at its layer, special tokens kept) instead of the model's own forward, each victim's found by its token ids, the lowest id's of equal texts (with -grid: in every cell; a victim missing is refused before the work); -deployer-precision defaults to the deployer's dtype (a finer one is warned of in the header)"),
	}
	floatVar(fs, a.rhoFlag, "recompute-error", 0, field.Bounds{Min: 0, Max: 1, MaxOpen: true, Zero: "rows bit-equal to the deployer's, true only for its very kernel and batches"},
		"recomputation error rho: a bound on ||x_att - x_dep|| / ||x_dep|| between the attacker's candidate row and the row the deployer mixed, storage rounding included; left out: from -deployer-precision, given: overrides it")
	// Sampler overrides: each changes the config's base cell.
	addSamplerOverrides(fs, "texts per example, the victim included")
	return a
}

// recoverFlags defines the flags of `geloattack recover` and returns what runs it.
func recoverFlags(fs *flag.FlagSet) runFunc {
	a := defineRecoverArgs(fs)
	return func(ctx context.Context, args []string) error { return runRecover(ctx, a) }
}

// recoverPlan is what validate makes of recoverArgs: the parsed values the attack runs on.
type recoverPlan struct {
	split      data.Split
	cfg        config.Run
	sampler    gelo.Config
	score      content.Score
	compare    []content.Score
	template   content.Template
	secretSeed uint64
	progress   io.Writer
}

// validate checks the flags against each other and the config, before any work.
func (a *recoverArgs) validate(ctx context.Context) (*recoverPlan, error) {
	split, err := data.ParseSplit(*a.splitName)
	if err != nil {
		return nil, fmt.Errorf("-split: %w", err)
	}
	cfg, err := loadConfig(*a.cfgPath)
	if err != nil {
		return nil, err
	}
	if *a.storeDir != "" {
		cfg.Store.Path = *a.storeDir
	}
	if cfg.Store.Path == "" {
		return nil, errors.New("recover: no store: give -store STORE or a -config whose store.path names one (the attack needs a store extracted from real text)")
	}
	sc, err := samplerOf(ctx, a.fs, cfg.Sampler)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	score, err := content.ParseScore(*a.scoreName)
	if err != nil {
		return nil, fmt.Errorf("-score: %w", err)
	}
	var cmp []content.Score
	if *a.compare == "all" {
		for _, k := range content.Scores {
			if k != score {
				cmp = append(cmp, k)
			}
		}
	} else if *a.compare != "" {
		for _, name := range strings.Split(*a.compare, ",") {
			k, err := content.ParseScore(strings.TrimSpace(name))
			if err != nil {
				return nil, fmt.Errorf("-compare: %w", err)
			}
			cmp = append(cmp, k)
		}
	}
	if !(*a.claimGap > 0) {
		return nil, fmt.Errorf("-claim-gap %v: want a positive number of decades", *a.claimGap)
	}
	if !slices.Contains(membership.ComputePrecisions, *a.precision) {
		return nil, fmt.Errorf("-deployer-precision %q: want one of %s", *a.precision, strings.Join(membership.ComputePrecisions, ", "))
	}
	t, defSet, err := parseTemplate(*a.tmpl)
	if err != nil {
		return nil, err
	}
	t.Pattern += *a.suffix
	if *a.depTexts != "" && *a.depRows != "" {
		return nil, errors.New("recover: -deployer-texts writes the deployer's input and stops; -deployer-rows attacks its output: give one")
	}
	if hf.IsDecoderDir(*a.modelDir) {
		check := []content.Template{t}
		if *a.grid && (*a.axes == "" || slices.Contains(strings.Split(*a.axes, ","), "candidates")) {
			check = append(check, content.Template{Name: "birth", Pattern: content.TemplateBirth.Pattern + *a.suffix}) // the dates cell's
		}
		for _, tp := range check {
			if err := content.CheckCausalTemplate(tp); err != nil {
				return nil, fmt.Errorf("recover: -model %s is a decoder: %w (or append some with -suffix, e.g. -suffix \" ok\")", *a.modelDir, err)
			}
		}
	}
	if *a.set == "" {
		if defSet == "" {
			return nil, fmt.Errorf("-template %q is custom: give -set pin|date|name|file:PATH", *a.tmpl)
		}
		*a.set = defSet
	}
	secretSeed := cfg.Seed
	if flagWasSet(a.fs, "seed") {
		secretSeed = uint64(*a.seed)
	}
	var progress io.Writer = os.Stderr
	if *a.quiet {
		progress = nil
	}
	return &recoverPlan{split: split, cfg: cfg, sampler: sc, score: score, compare: cmp, template: t,
		secretSeed: secretSeed, progress: progress}, nil
}

// runRecover runs the content-recovery attack that a's flags describe.
func runRecover(ctx context.Context, a *recoverArgs) error {
	p, err := a.validate(ctx)
	if err != nil {
		return err
	}
	split, cfg, sc, score, cmp, t := p.split, p.cfg, p.sampler, p.score, p.compare, p.template
	secretSeed, progress := p.secretSeed, p.progress
	if err := checkOutputsOutsideInputs([][2]string{{"out", *a.out}, {"table", *a.table}, {"deployer-texts", *a.depTexts}},
		[][2]string{{"store", runner.ExpandPath(cfg.Store.Path)}, {"model", *a.modelDir}, {"deployer-rows", *a.depRows}}); err != nil {
		return err
	}

	// The store, the model, and the check that the model reproduces the store.
	st, err := store.Open(runner.ExpandPath(cfg.Store.Path))
	if err != nil {
		return err
	}
	defer st.Close()
	meta := st.Meta()
	// The deployer's rows are read and checked against the model's config.json before the weights
	// are loaded: every refusal comes before the long load.
	var dep *deployer.Rows
	boundNote := "" // a header line when the bound asked for is finer than the deployer's dtype
	if *a.depRows != "" {
		if dep, err = readDeployerRows(ctx, *a.depRows, *a.modelDir, meta); err != nil {
			return err
		}
		if !flagWasSet(a.fs, "deployer-precision") {
			*a.precision = dep.Info.DType
		} else if !flagWasSet(a.fs, "recompute-error") {
			if boundNote, err = finerBoundNote(*a.precision, dep.Info.DType); err != nil {
				return err
			}
			logf(os.Stderr, "recover: %s", boundNote)
		}
		fmt.Fprintf(os.Stderr, "recover: the victims' rows: %s, from %s\n", termtext.Escape(dep.Info.Stack()), *a.depRows)
	}
	emb, err := openEmbedder(*a.modelDir, meta)
	if err != nil {
		return err
	}
	cells, err := a.cells(t, sc, meta.D)
	if err != nil {
		return err
	}
	var victims [][]string // victims[i]: the texts content.Run attacks in cells[i], for a deployer
	if dep != nil || *a.depTexts != "" {
		victims = make([][]string, len(cells))
		for i, c := range cells {
			if victims[i], err = a.victimTexts(c, secretSeed); err != nil {
				return fmt.Errorf("recover: %s: %w", c.name(), err)
			}
		}
	}
	if dep != nil {
		// Every cell's victims in the deployer's rows, before the store check and the candidates.
		if err := checkDeployerCovers(emb, dep, meta.Layer, cells, victims); err != nil {
			return err
		}
	}
	t0 := time.Now()
	worst, err := emb.Verify(ctx, st, *a.verifyN)
	if err != nil {
		return fmt.Errorf("recover: store %s against model %s: %w", st.Dir(), *a.modelDir, err)
	}
	bound, err := emb.VerifyBound(meta)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	point := ""
	if meta.Decoder != nil {
		point = fmt.Sprintf(", decoder %s %s", termtext.Escape(meta.Decoder.Architecture), termtext.Escape(meta.Decoder.Point))
	}
	logf(progress, "recover: store %s (%s%s, layer %d, d %d, special tokens %s, computed in %s); model %s reproduces %d stored texts to %.2g relative, within %.2g (%.1f s)\n",
		st.Dir(), termtext.Escape(meta.Model), point, meta.Layer, meta.D, meta.SpecialTokens, meta.RowPrecision(), *a.modelDir, *a.verifyN, worst, bound.Rho, time.Since(t0).Seconds())
	var rho content.Recompute
	if flagWasSet(a.fs, "recompute-error") {
		rho, err = content.ExplicitRecompute(*a.rhoFlag)
	} else {
		rho, err = content.DefaultRecompute(emb, *a.precision)
	}
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}

	if *a.depTexts != "" {
		return writeVictimTexts(*a.depTexts, emb, cells, victims)
	}

	// Candidate sets, embedded once each: the grid embeds a set whole and takes its cells'
	// subsets from it.
	cache := map[string]*content.Candidates{}
	getSet := func(c recoverCell) (*content.Candidates, error) {
		all, vals, err := a.cellValues(c, secretSeed)
		if err != nil {
			return nil, err
		}
		key := func(n int) string { return fmt.Sprintf("%s|%s|%d", c.tp.Pattern, c.set, n) } // a set's subset of n is one (seeded)
		if got, ok := cache[key(len(vals))]; ok {
			return got, nil
		}
		embed := vals // one cell: only its candidates
		if *a.grid {
			embed = all
		}
		whole, ok := cache[key(len(embed))]
		if !ok {
			t1 := time.Now()
			logf(progress, "recover: embedding %d candidates of %q (%s)\n", len(embed), c.tp.Pattern, c.set)
			if whole, err = content.Embed(ctx, emb, c.tp, embed, progress); err != nil {
				return nil, err
			}
			logf(progress, "recover: %d candidates, %d tokens in %.1f s: %.0f tokens/s (wall %.1f s)\n",
				whole.Len(), whole.Rows.Tokens, whole.Rows.Seconds, float64(whole.Rows.Tokens)/whole.Rows.Seconds, time.Since(t1).Seconds())
			cache[key(len(embed))] = whole
		}
		if len(embed) == len(vals) {
			return whole, nil
		}
		sub := subsetCandidates(whole, vals)
		cache[key(len(vals))] = sub
		return sub, nil
	}
	runCell := func(c recoverCell) (*content.Result, error) {
		cand, err := getSet(c)
		if err != nil {
			return nil, err
		}
		s, err := gelo.NewSampler(st, c.sampler)
		if err != nil {
			return nil, err
		}
		opt := content.Options{
			Template: c.tp, Candidates: cand, Victims: *a.victims, Split: split, FirstExample: *a.first,
			Seed: secretSeed, Score: score, Compare: cmp, ClaimGap: *a.claimGap, Absent: *a.absent, Recompute: rho,
			NeighbourBudget: *a.nbBudget, Progress: progress,
		}
		if dep != nil {
			opt.Deployer, opt.DeployerStack = victimRows(emb, dep, meta.Layer), dep.Info.Stack()
		}
		return content.Run(ctx, s, emb, opt)
	}

	if !*a.grid {
		res, err := runCell(cells[0])
		if err != nil {
			return err
		}
		fmt.Print(boundNote + res.Table())
		return writeJSON(*a.out, res)
	}

	type cellOut struct {
		Axis, Value string
		Result      *content.Result
	}
	var outs []cellOut
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "%s\n%s\n%s", rho, boundNote, content.GridHeader)
	fmt.Print(tbl.String())
	for i, c := range cells {
		logf(progress, "recover: grid cell %d/%d: %s = %s\n", i+1, len(cells), c.grid.Axis, c.grid.Value)
		res, err := runCell(c)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name(), err)
		}
		row := content.GridRow(*c.grid, res)
		fmt.Print(row)
		tbl.WriteString(row)
		outs = append(outs, cellOut{c.grid.Axis, c.grid.Value, res})
	}
	if *a.table != "" {
		if err := checkpoints.WriteFileAtomic(*a.table, []byte(tbl.String())); err != nil {
			return err
		}
	}
	return writeJSON(*a.out, outs)
}

// parseTemplate maps a -template value to a template and its default candidate set.
func parseTemplate(s string) (content.Template, string, error) {
	switch s {
	case "pin":
		return content.TemplatePIN, "pin", nil
	case "name":
		return content.TemplateName, "name", nil
	case "birth":
		return content.TemplateBirth, "date", nil
	}
	t, err := content.ParseTemplate("custom", s)
	if err != nil {
		return t, "", fmt.Errorf("-template: %w (or pin, name, birth)", err)
	}
	return t, "", nil
}

// candidateValues reads a built-in set or a file:PATH set.
func candidateValues(name, years, corpusDir string) ([]string, error) {
	switch {
	case name == "pin":
		return content.PINs(), nil
	case name == "date":
		a, b, ok := strings.Cut(years, ":")
		from, err1 := strconv.Atoi(a)
		to, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("-years %q: want FIRST:LAST, e.g. 1925:2024", years)
		}
		v, err := content.Dates(from, to)
		if err != nil {
			return nil, fmt.Errorf("-years: %w", err)
		}
		return v, nil
	case name == "name":
		return content.Names(corpusDir)
	case strings.HasPrefix(name, "file:"):
		return content.ReadCandidates(strings.TrimPrefix(name, "file:"))
	}
	return nil, fmt.Errorf("-set %q: want pin, date, name or file:PATH", name)
}

// subsetCandidates keeps the candidates of all whose values are vals (a subset of all's values,
// in all's order, as content.Subset keeps them), sharing the embedded rows.
func subsetCandidates(all *content.Candidates, vals []string) *content.Candidates {
	keep := make(map[string]bool, len(vals))
	for _, v := range vals {
		keep[v] = true
	}
	sub := &content.Candidates{Rows: &content.Rows{D: all.Rows.D, Off: []int{0}}}
	for i, v := range all.Values {
		if !keep[v] {
			continue
		}
		sub.Values = append(sub.Values, v)
		sub.Texts = append(sub.Texts, all.Texts[i])
		sub.Slot = append(sub.Slot, all.Slot[i])
		sub.Rows.Data = append(sub.Rows.Data, all.Rows.Text(i)...)
		sub.Rows.Off = append(sub.Rows.Off, sub.Rows.Off[len(sub.Rows.Off)-1]+all.Rows.Off[i+1]-all.Rows.Off[i])
		sub.Rows.IDs = append(sub.Rows.IDs, all.Rows.IDs[i])
		sub.Rows.Pos = append(sub.Rows.Pos, all.Rows.Pos[i])
	}
	return sub
}

// openEmbedder loads the model and tokenizer and refuses a store made with another model.
func openEmbedder(modelDir string, meta store.Meta) (*content.Embedder, error) {
	if modelDir == "" {
		return nil, errors.New("recover: -model has no default here (no user cache directory); give it")
	}
	if hf.IsDecoderDir(modelDir) {
		return openDecoderEmbedder(modelDir, meta)
	}
	m, err := bert.LoadModel(modelDir, blas.Default())
	if err != nil {
		return nil, fmt.Errorf("recover: %w (fetch the default model with scripts/fetch-data.sh model)", err)
	}
	name := defaultModelName(modelDir, m.Cfg)
	if meta.Model != name && !strings.Contains(meta.Model, strings.TrimPrefix(name, "npm:")) {
		return nil, fmt.Errorf("recover: store meta.json model %q does not name the model in %s (%q): extract candidates with the store's own model",
			termtext.Escape(meta.Model), modelDir, termtext.Escape(name))
	}
	tok, err := wordpiece.Load(filepath.Join(modelDir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	emb, err := content.NewEmbedder(m, tok, meta)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	return emb, nil
}

// logf prints progress when w is not nil.
func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

// writeJSON writes v to path (nothing when path is empty).
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the result for %s: %w", path, err)
	}
	if err := checkpoints.WriteFileAtomic(path, append(b, '\n')); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	return nil
}

// openDecoderEmbedder loads a decoder directory and its tokenizer.json, and refuses a store made
// with another model (meta.json's model name, then architecture, tokenizer hash, width, layer and
// point in content.NewDecoderEmbedder; Verify then compares rows).
func openDecoderEmbedder(modelDir string, meta store.Meta) (*content.Embedder, error) {
	mc, err := hf.LoadConfig(modelDir)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	if name := hf.ModelName(nil, modelDir); meta.Model != name {
		return nil, fmt.Errorf("recover: store meta.json model %q does not name the decoder in %s (%q): extract candidates with the store's own model",
			termtext.Escape(meta.Model), modelDir, termtext.Escape(name))
	}
	if _, err := hf.Check(modelDir); err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	tok, err := openDecoderTokenizer(modelDir, mc.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	m, err := hf.Load(modelDir, blas.Default())
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	emb, err := content.NewDecoderEmbedder(m, nil, tok, meta)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	return emb, nil
}
