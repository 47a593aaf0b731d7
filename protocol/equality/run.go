package equality

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/models/bert"
)

// Input is one text to evaluate: its stable id (keys its random streams) and its token ids,
// framed by [CLS] ... [SEP].
type Input struct {
	// ID is the text's stable id (corpus.Text.ID for Run).
	ID int64
	// Tokens are the token ids, [CLS] and [SEP] included.
	Tokens []int32
}

// Result is what one equality run measured.
type Result struct {
	// Config is the configuration run, with Layers filled in.
	Config Config
	// Model names the model (its directory for Run; "" when Evaluate was given a model).
	Model string
	// NumLayers and Hidden are the model's block count and width.
	NumLayers, Hidden int
	// Texts and Tokens count what was evaluated; Truncated counts texts cut at MaxTokens.
	Texts, Tokens, Truncated int
	// MeanRowNorm is the mean L2 norm of the plain run's final-layer rows, the scale against which
	// HiddenMaxAbs reads.
	MeanRowNorm float64
	// Rows holds, per precision, the precision-only run and then one run per mix.
	Rows []Row
	// Elapsed is the wall time of the forward passes.
	Elapsed time.Duration
}

// Row is one run compared with the references.
type Row struct {
	// Precision is the accelerator's storage format.
	Precision string
	// Mix is "none" (storage rounding without GELO), "orthogonal" or "kappa=K".
	Mix string
	// Kappa is cond(A): 1 for orthogonal, 0 for none.
	Kappa float64
	// VsPlain compares with the plain float32 forward pass.
	VsPlain Metrics
	// VsPrecision compares a GELO run with the same precision without GELO (nil for Mix "none"):
	// what GELO adds on top of the precision.
	VsPrecision *Metrics
	// ProjRelErr and ProjRelErrMax are the mean and largest relative error ||y - y32||_F / ||y32||_F
	// of one projection call on one text, y32 the float32 projection of the same input (+Inf once
	// a call's output was not finite).
	ProjRelErr, ProjRelErrMax float64
	// Calls counts the projection calls; ShieldRows the shield rows they added in all.
	Calls, ShieldRows int64
	// MaxStored is the largest magnitude the accelerator stored (U and Y; for "none" the rounded
	// inputs and outputs): fp16 overflows to infinity from 65520 on.
	MaxStored float64
	// Seconds is the run's wall time.
	Seconds float64
}

// NoMix is Row.Mix for the runs without GELO.
const NoMix = "none"

// Run loads the model, tokenizer and texts that cfg names and runs Evaluate on them. progress,
// when not nil, receives one line per step.
func Run(ctx context.Context, cfg Config, progress io.Writer) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	logf := logger(progress)
	lib := blas.Default()
	m, err := bert.LoadModel(cfg.ModelDir, lib)
	if err != nil {
		return Result{}, fmt.Errorf("equality: %w", err)
	}
	if cfg.MaxTokens > m.MaxLen() {
		return Result{}, fmt.Errorf("equality config: MaxTokens: %d, want <= %d (the model's max_position_embeddings)", cfg.MaxTokens, m.MaxLen())
	}
	tok, err := wordpiece.Load(filepath.Join(cfg.ModelDir, "tokenizer.json"))
	if err != nil {
		return Result{}, fmt.Errorf("equality: %w", err)
	}
	if tok.VocabSize() > m.Cfg.VocabSize {
		return Result{}, fmt.Errorf("equality: tokenizer.json has %d tokens but config.json vocab_size is %d", tok.VocabSize(), m.Cfg.VocabSize)
	}
	src, err := corpus.ReadSource(cfg.TextsSource, cfg.Corpora)
	if err != nil {
		return Result{}, fmt.Errorf("equality: %w", err)
	}
	if len(src.Texts) < cfg.Texts {
		return Result{}, fmt.Errorf("equality config: Texts: %d, but %s holds only %d texts", cfg.Texts, cfg.TextsSource, len(src.Texts))
	}
	inputs := make([]Input, cfg.Texts)
	truncated := 0
	for i, t := range src.Texts[:cfg.Texts] {
		inputs[i] = Input{ID: t.ID, Tokens: tok.Encode(t.Text, cfg.MaxTokens)}
		if len(tok.Encode(t.Text, 0)) > cfg.MaxTokens {
			truncated++
		}
	}
	logf("equality: model %s (%d layers, d %d), %d texts of %s, BLAS %s", cfg.ModelDir, m.NumLayers(), m.Hidden(), len(inputs), cfg.TextsSource, lib.Name())
	res, err := Evaluate(ctx, m, inputs, cfg, progress)
	res.Model, res.Truncated = cfg.ModelDir, truncated
	return res, err
}

// Evaluate runs the plain forward pass and every configured run over inputs and compares them.
// It uses the protocol fields of cfg (Layers through Workers); the source fields (ModelDir,
// TextsSource, Corpora, Texts, MaxTokens) are not read. Cancelling ctx stops it between
// projection calls with ctx's error.
func Evaluate(ctx context.Context, m *bert.Model, inputs []Input, cfg Config, progress io.Writer) (Result, error) {
	maxLen, tokens, err := checkEvaluate(m, inputs, cfg)
	if err != nil {
		return Result{}, err
	}
	L, h := m.NumLayers(), m.Hidden()
	if len(cfg.Layers) == 0 {
		cfg.Layers = make([]int, L)
		for i := range cfg.Layers {
			cfg.Layers[i] = i + 1
		}
	}
	layers := make([]bool, L+1)
	for _, l := range cfg.Layers {
		layers[l] = true
	}
	workers := cfg.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	logf := logger(progress)
	lib := blas.Default()
	// The forward pass and the hooks split work over rows and texts themselves, each making
	// single-threaded GEMM calls; OpenBLAS's own threads would only oversubscribe the cores.
	prevThreads := lib.Threads()
	lib.SetThreads(1)
	defer lib.SetThreads(prevThreads)

	ws, err := m.NewWorkspace(cfg.BatchTokens, maxLen, workers)
	if err != nil {
		return Result{}, fmt.Errorf("equality: %w", err)
	}
	runs := planRuns(ctx, lib, cfg, layers, workers, len(inputs)*h)
	batches := planBatches(inputs, cfg.BatchTokens)
	logf("equality: %d texts, %d tokens in %d batches; GELO on Q, K, V, O of layers %v; %d runs per batch (plain, %d precisions x (precision only + %d mixes)); shields %.3g of rows at %.3gx; trusted side %s",
		len(inputs), tokens, len(batches), cfg.Layers, len(runs), len(cfg.Precisions), len(cfg.mixes()), cfg.ShieldFrac, cfg.ShieldScale, cfg.Trusted)

	// Final-layer rows of one batch, (batch tokens, h): the plain and precision-only runs keep
	// theirs as references for the batch; GELO runs share one buffer, compared as soon as filled.
	hiddens := make([][]float32, len(runs))
	scratchHidden := make([]float32, cfg.BatchTokens*h)
	for i, r := range runs {
		hiddens[i] = scratchHidden
		if r.vsPrec == nil {
			hiddens[i] = make([]float32, cfg.BatchTokens*h)
		}
	}
	var normSum float64
	done := 0 // tokens of the batches finished
	start := time.Now()
	for bi, b := range batches {
		if err := forwardBatch(ctx, m, ws, inputs, b, runs, hiddens, L, h); err != nil {
			return Result{}, err
		}
		for r := 0; r < b.tokens; r++ {
			normSum += norm(hiddens[0][r*h : (r+1)*h])
		}
		done += b.tokens
		el := time.Since(start)
		eta := time.Duration(float64(el) / float64(done) * float64(tokens-done))
		logf("equality: batch %d/%d: texts %d..%d (%d tokens), %d runs; %s elapsed, ETA %s",
			bi+1, len(batches), b.lo, b.hi-1, b.tokens, len(runs), el.Round(time.Second/10), eta.Round(time.Second))
	}

	res := Result{
		Config: cfg, NumLayers: L, Hidden: h, Texts: len(inputs), Tokens: tokens,
		MeanRowNorm: normSum / float64(tokens), Elapsed: time.Since(start),
	}
	res.Rows = collectRows(runs, len(inputs), h)
	return res, nil
}

// checkEvaluate refuses a config or inputs Evaluate cannot run, naming every problem, and returns
// the longest text and the total tokens.
func checkEvaluate(m *bert.Model, inputs []Input, cfg Config) (maxLen, tokens int, err error) {
	errs := cfg.validateProtocol()
	L := m.NumLayers()
	for _, l := range cfg.Layers {
		if l > L {
			errs = append(errs, fmt.Errorf("Layers: %d, the model has blocks 1..%d", l, L))
		}
	}
	if len(inputs) < 2 {
		errs = append(errs, fmt.Errorf("texts: %d, want >= 2 (a nearest neighbour needs another text)", len(inputs)))
	}
	for i, in := range inputs {
		if len(in.Tokens) == 0 || len(in.Tokens) > m.MaxLen() {
			errs = append(errs, fmt.Errorf("text %d (id %d): %d tokens, want 1..%d", i, in.ID, len(in.Tokens), m.MaxLen()))
		}
		maxLen = max(maxLen, len(in.Tokens))
		tokens += len(in.Tokens)
	}
	if cfg.BatchTokens >= 1 && maxLen > cfg.BatchTokens {
		errs = append(errs, fmt.Errorf("BatchTokens: %d is below the longest text (%d tokens)", cfg.BatchTokens, maxLen))
	}
	if len(errs) > 0 {
		return 0, 0, fmt.Errorf("equality config: %w", errors.Join(errs...))
	}
	return maxLen, tokens, nil
}

// evalRun is one forward configuration Evaluate runs over every batch: index 0 the plain pass;
// then per precision the precision-only run and one per mix.
type evalRun struct {
	row     Row
	hook    *hook
	vsPlain *acc
	vsPrec  *acc
	prec    int // index of this precision's precision-only run (GELO runs)
	embs    []float32
	elapsed time.Duration
}

// planRuns lists the runs: the plain pass, then per precision the precision-only run and its
// mixes. embLen is texts x h, each run's embedding buffer.
func planRuns(ctx context.Context, lib *blas.Library, cfg Config, layers []bool, workers, embLen int) []*evalRun {
	runs := []*evalRun{{embs: make([]float32, embLen)}}
	for _, p := range cfg.Precisions {
		pi := len(runs)
		runs = append(runs, &evalRun{
			row:  Row{Precision: p, Mix: NoMix},
			hook: newHook(ctx, lib, cfg, layers, p, nil, workers), vsPlain: newAcc(),
			embs: make([]float32, embLen),
		})
		for _, mx := range cfg.mixes() {
			mx := mx
			runs = append(runs, &evalRun{
				row:  Row{Precision: p, Mix: mx.Name(), Kappa: mx.Kappa},
				hook: newHook(ctx, lib, cfg, layers, p, &mx, workers), vsPlain: newAcc(), vsPrec: newAcc(),
				prec: pi, embs: make([]float32, embLen),
			})
		}
	}
	return runs
}

// evalBatch is the texts lo..hi-1, tokens in all.
type evalBatch struct{ lo, hi, tokens int }

// planBatches cuts the inputs into batches of consecutive texts within the token budget.
func planBatches(inputs []Input, budget int) []evalBatch {
	var batches []evalBatch
	for lo := 0; lo < len(inputs); {
		hi, n := lo, 0
		for hi < len(inputs) && n+len(inputs[hi].Tokens) <= budget {
			n += len(inputs[hi].Tokens)
			hi++
		}
		batches = append(batches, evalBatch{lo, hi, n})
		lo = hi
	}
	return batches
}

// forwardBatch runs every run over batch b and compares each GELO or precision run's final rows
// and embeddings with the plain run's (and a GELO run's with its precision-only run's).
// hiddens[k]: (batch tokens, h), run k's final rows.
func forwardBatch(ctx context.Context, m *bert.Model, ws *bert.Workspace, inputs []Input, b evalBatch, runs []*evalRun, hiddens [][]float32, L, h int) error {
	seqs := make([][]int32, b.hi-b.lo)
	ids := make([]int64, b.hi-b.lo)
	for i := range seqs {
		seqs[i], ids[i] = inputs[b.lo+i].Tokens, inputs[b.lo+i].ID
	}
	for ri, r := range runs {
		t0 := time.Now()
		ws.Hook = nil
		if r.hook != nil {
			r.hook.ids = ids
			ws.Hook = r.hook
		}
		err := m.Forward(ctx, ws, seqs, L, hiddens[ri][:b.tokens*h], r.embs[b.lo*h:b.hi*h])
		ws.Hook = nil
		if err != nil {
			return fmt.Errorf("equality: %s run, texts %d..%d: %w", runName(r.row), b.lo, b.hi-1, err)
		}
		r.elapsed += time.Since(t0)
		if ri == 0 {
			continue
		}
		row := 0
		for i := b.lo; i < b.hi; i++ {
			t := len(inputs[i].Tokens)
			get := func(k int) ([]float32, []float32) {
				return hiddens[k][row*h : (row+t)*h], runs[k].embs[i*h : (i+1)*h]
			}
			hid, emb := get(ri)
			refH, refE := get(0)
			r.vsPlain.add(hid, refH, emb, refE, h)
			if r.vsPrec != nil {
				pH, pE := get(r.prec)
				r.vsPrec.add(hid, pH, emb, pE, h)
			}
			row += t
		}
	}
	return nil
}

// collectRows turns the runs' accumulators into the result's rows (every run but the plain one),
// with the nearest-neighbour agreement of their embeddings. texts x h is each run's embeddings.
func collectRows(runs []*evalRun, texts, h int) []Row {
	var rows []Row
	refNN := nearest(runs[0].embs, texts, h)
	for _, r := range runs[1:] {
		nn := nearest(r.embs, texts, h)
		r.row.VsPlain = r.vsPlain.metrics(nnEqual(nn, refNN))
		if r.vsPrec != nil {
			pm := r.vsPrec.metrics(nnEqual(nn, nearest(runs[r.prec].embs, texts, h)))
			r.row.VsPrecision = &pm
		}
		r.row.ProjRelErr, r.row.ProjRelErrMax, r.row.Calls, r.row.ShieldRows, r.row.MaxStored = r.hook.projStats()
		r.row.Seconds = r.elapsed.Seconds()
		rows = append(rows, r.row)
	}
	return rows
}

// runName names a run in messages.
func runName(r Row) string {
	switch {
	case r.Precision == "":
		return "plain"
	case r.Mix == NoMix:
		return r.Precision + " precision-only"
	}
	return r.Precision + " " + r.Mix
}

// Precision returns the rows of one precision, precision-only first, in run order.
func (r Result) Precision(p string) []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Precision == p {
			out = append(out, row)
		}
	}
	return out
}

// Find returns the row of a precision and mix name ("none", "orthogonal", "kappa=K").
func (r Result) Find(precision, mix string) (Row, bool) {
	i := slices.IndexFunc(r.Rows, func(row Row) bool { return row.Precision == precision && row.Mix == mix })
	if i < 0 {
		return Row{}, false
	}
	return r.Rows[i], true
}

// logger returns a printf that writes lines to w, or does nothing for a nil w.
func logger(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}
