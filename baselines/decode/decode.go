package decode

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gelo-research/geloattack/engine/blas"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// Run draws Batches GELO batches of texts (token ids, each a text of the source) through m and
// reads them back. Claims: a decoded text is claimed when every attacked block has an absolute
// test (below full rank the residual, at full rank with every row observed the leverage), every
// step of it was certified, led the best extension left out by ClaimLead decades and proves
// something beyond the rows already explained, its end led every extension by one more token as
// a step leads, and the batch's claims fit in U (claim.go).
//
// A batch's result depends on its index alone (the sampler's streams are per index, and a batch
// keeps no state of the ones before), so the batches Options.Skip leaves out change nothing in
// the others. When ctx is cancelled Run returns the batches finished so far with ctx's error; the
// batch it was in is dropped.
//
// Every BLAS call runs single-threaded (blas.Library.Serial): OpenBLAS splits a threaded call's
// sums by its thread count, GOMAXPROCS by default, and the figures would follow the machine.
func Run(ctx context.Context, m Model, texts [][]int, opt Options) (out []BatchResult, err error) {
	blas.Default().Serial(func() { out, err = run(ctx, m, texts, opt) })
	return out, err
}

func run(ctx context.Context, m Model, texts [][]int, opt Options) ([]BatchResult, error) {
	a, err := newAttack(m, opt, len(texts))
	if err != nil {
		return nil, err
	}
	samplers, err := a.samplers(ctx, texts, opt)
	if err != nil {
		return nil, err
	}
	var out []BatchResult
	ws := new(gelo.Workspace)
	for b := range int64(opt.Batches) {
		if opt.Skip != nil && opt.Skip(b) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		res, err := a.batch(ctx, samplers, ws, opt.Split, b, texts)
		if r, ok := m.(PrefixRecycler); ok {
			r.RecyclePrefixes()
		}
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			return out, fmt.Errorf("decode: batch %d: %w", b, err)
		}
		if opt.OnBatch != nil {
			if err := opt.OnBatch(*res); err != nil {
				return out, err
			}
		}
		out = append(out, *res)
	}
	return out, nil
}

// attack holds what one batch's decoding needs: the settings newAttack resolved, then each
// batch's state (reset by batch).
type attack struct {
	m                 Model
	d, upto           int
	blocks            []int
	order             []int // the attacked blocks >= 1, in the order of blocks: what a step is scored on
	u                 float64
	rho               map[int]float64 // the recomputation error each attacked block's tests allow
	beam              int
	branch, claimLead float64
	allObserved       bool
	search            orderSearch // how the order is read, and from which bag
	scoring           scoring     // what ranks extensions and measures leads
	orderTopK         float64     // the top-k fraction with jointTopK
	maxSteps          int
	progress          func(string)
	noOrderMargin     bool
	bagOnly           bool

	// Each batch's state.
	batchIndex int64
	start      time.Time
	spaces     map[int]*membership.Space
	bagCut     bool    // the bag was cut (rankSearch's budget): no claims
	leftOutThr float64 // excess a left-out extension needs for its step to count towards a claim
	forwards   int
}

// samplers are the deployer's GELO samplers, one per attacked block, over the rows of every
// source text at that block: Sampler with TokensPerText the longest text (window sampling, so
// every text enters whole) and a fresh A and fresh shields per block's protected call.
func (a *attack) samplers(ctx context.Context, texts [][]int, opt Options) (map[int]*gelo.Sampler, error) {
	corpora := make([]*data.MemCorpus, a.upto) // one per block: the deployer's rows of every text
	for l := range corpora {
		corpora[l] = data.NewMemCorpus(a.d, 1)
	}
	longest := 0
	for i, toks := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(toks) == 0 {
			return nil, fmt.Errorf("decode: text %d is empty", i)
		}
		id := int64(i)
		if opt.TextIDs != nil {
			id = opt.TextIDs[i]
		}
		rows, err := a.deployerRows(opt.Deployer, id, toks) // per block: (len(toks), d)
		if err != nil {
			return nil, fmt.Errorf("decode: text %d (id %d): %w", i, id, err)
		}
		for _, l := range a.blocks {
			if err := corpora[l].Add(id, rows[l], []float32{0}); err != nil {
				return nil, fmt.Errorf("decode: text %d: %w", i, err)
			}
		}
		longest = max(longest, len(toks))
	}
	cfg := opt.Sampler
	cfg.TokensPerText, cfg.TokenSampling = gelo.Fixed(float64(longest)), gelo.TokenWindow
	samplers := map[int]*gelo.Sampler{}
	for _, l := range a.blocks {
		c := cfg
		c.Call = uint64(l) + 1
		s, err := gelo.NewSampler(corpora[l], c)
		if err != nil {
			return nil, fmt.Errorf("decode: block %d: %w", l, err)
		}
		samplers[l] = s
	}
	return samplers, nil
}

// batch draws batch index's example at every attacked block and decodes it: the spaces, the bag,
// then (unless BagOnly) the order and the claims.
func (a *attack) batch(ctx context.Context, samplers map[int]*gelo.Sampler, ws *gelo.Workspace, split data.Split, index int64, texts [][]int) (*BatchResult, error) {
	a.batchIndex, a.start = index, time.Now()
	a.spaces, a.bagCut, a.forwards = map[int]*membership.Space{}, false, 0
	res := &BatchResult{Index: index, D: a.d}
	if err := a.observe(samplers, ws, split, index, texts, res); err != nil {
		return nil, err
	}
	if err := a.readBag(ctx, res); err != nil {
		return nil, err
	}
	if a.bagOnly {
		res.OrderMargin, res.Exact, res.TokenAcc = math.NaN(), math.NaN(), math.NaN()
	} else if err := a.readOrder(ctx, res); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(a.start).Seconds()
	return res, nil
}

// observe draws the batch's example at every attacked block and builds each block's space from
// its observed U: res gets the truth (from block 0's draw: every block draws the same texts), the
// row counts and the ranks.
func (a *attack) observe(samplers map[int]*gelo.Sampler, ws *gelo.Workspace, split data.Split, index int64, texts [][]int, res *BatchResult) error {
	for k, l := range a.blocks {
		ex, err := samplers[l].ExampleWith(ws, split, index)
		if err != nil {
			return fmt.Errorf("block %d: %w", l, err)
		}
		if k == 0 {
			for _, ti := range ex.PositiveIdx {
				res.Truth = append(res.Truth, texts[ti])
			}
			res.N, res.NObs = ex.N, ex.NObs
		}
		sp, err := a.space(ex, l)
		if err != nil {
			return fmt.Errorf("block %d: %w", l, err)
		}
		a.spaces[l] = sp
		res.Rank = append(res.Rank, sp.Rank())
		a.report("block %d: U %d x %d, rank %d", l, ex.NObs, a.d, sp.Rank())
	}
	a.leftOutThr = a.leftOutBound()
	return nil
}

// space is the row space of an example's observed U at block l, (NObs, d), tested at the
// observed dtype's round-off and with block l's recomputation error.
func (a *attack) space(ex *gelo.Example, l int) (*membership.Space, error) {
	uObs := toDense(ex.UObs, ex.NObs, a.d)
	return membership.New(uObs, membership.Options{UnitRoundoff: a.u, AllObserved: a.allObserved,
		RankTol: membership.RankTol(uObs, a.u), Recompute: a.rho[l]})
}

// readOrder reads the texts from res.Bag, measures the order margin (an evaluation), decides the
// claims and scores the decoded texts against the truth.
func (a *attack) readOrder(ctx context.Context, res *BatchResult) error {
	decoded, err := a.search.read(ctx, a, res.Bag, res.NObs)
	if err != nil {
		return err
	}
	res.OrderMargin = math.NaN()
	if !a.noOrderMargin {
		if res.OrderMargin, err = a.orderMargin(res.Truth, res.Bag); err != nil {
			return err
		}
	}
	res.Overclaimed = a.decide(decoded, res.NObs)
	res.Claims, res.ClaimsRight = tally(decoded, res.Truth)
	for i := range decoded {
		decoded[i].hist = nil // the claims are decided: a batch result need not hold the rows
	}
	res.Decoded = decoded
	res.score()
	res.Forwards = a.forwards
	return nil
}

// report sends a progress line, prefixed with the batch, the candidate passes so far and the
// batch's elapsed time, to Options.Progress.
func (a *attack) report(format string, args ...any) {
	if a.progress == nil {
		return
	}
	a.progress(fmt.Sprintf("batch %d (%.0f s, %d candidate passes): ", a.batchIndex, time.Since(a.start).Seconds(), a.forwards) + fmt.Sprintf(format, args...))
}

// toDense copies float32 rows (n, d) into a float64 matrix.
func toDense(x []float32, n, d int) *mat.Dense {
	out := mat.NewDense(n, d, nil)
	for i, v := range x[:n*d] {
		out.RawMatrix().Data[i] = float64(v)
	}
	return out
}

// deployerRows are the rows the deployer mixed of one text at every block < a.upto (nil at the
// blocks not attacked when they come from dep): the model's own forward, or dep's rows, which
// another stack computed, at the attacked blocks.
func (a *attack) deployerRows(dep Deployer, id int64, toks []int) ([][]float32, error) {
	if dep == nil {
		return a.m.Rows(toks, a.upto)
	}
	rows := make([][]float32, a.upto)
	for _, l := range a.blocks {
		r, err := dep.Rows(id, toks, l)
		if err != nil {
			return nil, err
		}
		if len(r) != len(toks)*a.d {
			return nil, fmt.Errorf("block %d: %d deployer values for %d tokens of width %d", l, len(r), len(toks), a.d)
		}
		rows[l] = r
	}
	return rows, nil
}
