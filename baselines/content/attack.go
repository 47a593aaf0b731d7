package content

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/gelo-research/geloattack/baselines"
	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/eval"
)

// Options configures Run.
type Options struct {
	// Template is the victim's prompt; Candidates its embedded candidate fills.
	Template   Template
	Candidates *Candidates
	// Victims is the number of victim examples (each a fresh example with its own secret).
	Victims int
	// Split is the split the examples' other texts come from; FirstExample the index of the first
	// example in that split's stream (victim v uses example FirstExample+v).
	Split        data.Split
	FirstExample int64
	// Seed draws the secrets (uniformly among the candidates, independently per victim).
	Seed uint64
	// Score ranks the candidates; Compare lists further scores reported beside it (they cost
	// a pass over every row of every candidate when they read more than the secret rows).
	Score   Score
	Compare []Score
	// ClaimGap is the lead (decades) of the best candidate over the second that a claim (below
	// full rank, by the residual) needs besides the absolute test (Decide; 0: 1 decade).
	ClaimGap float64
	// Absent removes each victim's secret from the candidates it is scored against: the case
	// where the secret is not among them, which an honest attack must answer with
	// VerdictAbsent or VerdictRanked, never a claim.
	Absent bool
	// Recompute is the recomputation error every absolute test allows for (DefaultRecompute from
	// the deployer's precision, or ExplicitRecompute). The zero value assumes the candidate rows
	// bit-equal to the victim's, which holds only for the very kernel on the very batches.
	Recompute Recompute
	// NeighbourBudget is the most neighbours of a claimed candidate embedded and tested before the
	// claim stands (CheckNeighbours; 0: DefaultNeighbourBudget). The neighbours are strings one
	// edit from the claimed fill (NeighbourSpec.Of) over the alphabet of every candidate fill, the
	// scored candidates left out.
	NeighbourBudget int
	// Deployer, when not nil, computes the victims' rows as the deployer did (another stack or
	// precision: the rows GELO mixes), one text per entry of texts, victim v's text at index v
	// (Embedder.FromDeployer lays out rows an external deployer wrote); nil: emb's own forward
	// pass, in a pass of its own. Recompute must bound how far they lie from emb's rows.
	Deployer func(ctx context.Context, texts []string) (*Rows, error)
	// DeployerStack names what computed the victims' rows when Deployer is an external stack's
	// (deployer.Info.Stack, e.g. "PyTorch 1.13.0 bf16 ..."), for the result's header; empty:
	// this repository's forward pass.
	DeployerStack string
	// Progress, when not nil, receives a line every few seconds.
	Progress io.Writer
}

// Victim is the record of one victim example.
type Victim struct {
	// Example is the example index; Secret the secret's candidate index; Value the secret itself.
	Example int64  `json:"example"`
	Secret  int    `json:"secret"`
	Value   string `json:"value"`
	// N, NObs: rows of X and observed rows of U; Rank the numerical rank of U_obs at RankTol.
	N       int     `json:"n"`
	NObs    int     `json:"n_obs"`
	Rank    int     `json:"rank"`
	RankTol float64 `json:"rank_tol"`
	// VictimRows is how many of the victim's rows the sampler kept, of VictimTokens.
	VictimRows   int `json:"victim_rows"`
	VictimTokens int `json:"victim_tokens"`
	// Outcomes per score, in Result.Scores order: the residual scores, then leverage, topk
	// (at the k the leads chose) and attack (the ranking Decide used).
	Outcomes []Outcome `json:"outcomes"`
	// Verdict is Decide's (claim, not among the candidates, ranked first, not claimed), Measure
	// and K what it rested on; Claimed says it claimed; Guess is the candidate it ranks first.
	Verdict string `json:"verdict"`
	Measure string `json:"measure"`
	K       int    `json:"k,omitempty"`
	Claimed bool   `json:"claimed"`
	Guess   string `json:"guess"`
	// SecretAbsent says the secret was removed from the candidates (Options.Absent): any claim
	// is then wrong.
	SecretAbsent bool `json:"secret_absent,omitempty"`
	// ResidualBound is the residual fraction a candidate had to stay within below full rank
	// (membership.Space.ResidualBound, recomputation error included); 0 at full rank, where
	// each row has its own leverage bound instead.
	ResidualBound float64 `json:"residual_bound,omitempty"`
	// Neighbours is the neighbour test of a claim (CheckNeighbours): how many neighbours of the
	// claimed candidate were tested, how many passed, the closest and its score; nil where Decide
	// made no claim to test. Withdrawn says a neighbour passed and the claim became "ranked first,
	// not claimed".
	Neighbours *NeighbourReport `json:"neighbours,omitempty"`
	Withdrawn  bool             `json:"withdrawn,omitempty"`
	// End is the end-of-text test of a decoder's claim (CheckEnd), nil where none ran;
	// EndWithdrawn says it withdrew the claim (a text going on after the claimed one passed too,
	// or the row after it need not be observed).
	End          *EndReport `json:"end,omitempty"`
	EndWithdrawn bool       `json:"end_withdrawn,omitempty"`
}

// Summary aggregates one score over the victims.
type Summary struct {
	Score string `json:"score"`
	// Recovery is the fraction of victims whose secret is ranked first; Chance is 1/|C|.
	Recovery float64 `json:"recovery"`
	Chance   float64 `json:"chance"`
	// MedianRank and MeanRank of the secret (1 = first).
	MedianRank float64 `json:"median_rank"`
	MeanRank   float64 `json:"mean_rank"`
	// Margin quantiles (best wrong minus secret, decades): min, p5, p25, p50, p75, p95, max.
	Margin [7]float64 `json:"margin_quantiles"`
	// SecretMedian and BestWrongMedian are the median scores (log10 outside fraction).
	SecretMedian    float64 `json:"secret_median"`
	BestWrongMedian float64 `json:"best_wrong_median"`
}

// Result is the outcome of Run.
type Result struct {
	Template   Template `json:"template"`
	Candidates int      `json:"candidates"`
	Victims    []Victim `json:"victims"`
	// Scores names the scores of Summaries and of each victim's Outcomes; the first is primary.
	Scores    []string  `json:"scores"`
	Summaries []Summary `json:"summaries"`
	// D is the row width; N, NObs, Rank are means over the victims; RankMin, RankMax the extremes.
	D       int     `json:"d"`
	N       float64 `json:"n_mean"`
	NObs    float64 `json:"n_obs_mean"`
	Rank    float64 `json:"rank_mean"`
	RankMin int     `json:"rank_min"`
	RankMax int     `json:"rank_max"`
	// FullRank is the fraction of victims whose U_obs has numerical rank d.
	FullRank float64 `json:"full_rank"`
	// Claimed is the fraction of victims where the attack claimed a recovery; ClaimedCorrect the
	// fraction of those claims that were right (-1 without claims); Absent the fraction answered
	// "not among the candidates"; Ranked the fraction answered "ranked first, not claimed".
	Claimed        float64 `json:"claimed"`
	ClaimedCorrect float64 `json:"claimed_correct"`
	Absent         float64 `json:"absent"`
	Ranked         float64 `json:"ranked"`
	// Withdrawn is the fraction of victims whose claim a neighbour withdrew; Neighbours the mean
	// number of neighbours tested per tested claim and NeighbourSeconds the wall time of their
	// forward passes and scores, in all.
	Withdrawn        float64 `json:"withdrawn"`
	Neighbours       float64 `json:"neighbours_per_claim"`
	NeighbourSeconds float64 `json:"neighbour_seconds"`
	// Causal says the rows are a decoder's: the slot scores read from the secret to the end of
	// the text, and claims take the end-of-text test. EndWithdrawn is the fraction of victims
	// whose claim it withdrew and EndSeconds its wall time, in all.
	Causal       bool    `json:"causal,omitempty"`
	EndWithdrawn float64 `json:"end_withdrawn,omitempty"`
	EndSeconds   float64 `json:"end_seconds,omitempty"`
	// Recompute is the recomputation error the absolute tests allowed for.
	Recompute Recompute `json:"recompute"`
	// Deployer names the stack that computed the victims' rows (Options.DeployerStack); empty:
	// this repository's forward pass.
	Deployer string `json:"deployer,omitempty"`
	// DeployerGap is how far the deployer's victim rows lie from this repository's rows of the same
	// texts (RowGap), where Options.Deployer gave them: the measured recomputation error, which
	// Recompute.Rho must cover for the verdicts to hold. It uses the true texts: an evaluation's
	// check, read by no verdict.
	DeployerGap *Gap `json:"deployer_gap,omitempty"`
	// ObserveDtype is the sampler's; Seconds the wall time of the victims' loop (candidates
	// embedded before); VictimSeconds per victim.
	ObserveDtype  string  `json:"observe_dtype"`
	Seconds       float64 `json:"seconds"`
	VictimSeconds float64 `json:"victim_seconds"`
}

// Run places Victims victims in examples of s and ranks the candidates for each. The victims'
// hidden states come from emb in a pass of their own (batched differently from the candidates',
// as a deployer's pass would be).
func Run(ctx context.Context, s *gelo.Sampler, emb *Embedder, opt Options) (*Result, error) {
	c := opt.Candidates
	if c == nil || c.Len() < 2 {
		return nil, fmt.Errorf("content: need at least 2 candidates")
	}
	if opt.Victims < 1 {
		return nil, fmt.Errorf("content: victims %d, want >= 1", opt.Victims)
	}
	if s.Corpus().D() != emb.D() {
		return nil, fmt.Errorf("content: store rows are %d wide but the model's are %d", s.Corpus().D(), emb.D())
	}
	if err := emb.CheckTemplate(opt.Template); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	claimGap := opt.ClaimGap
	if claimGap == 0 {
		claimGap = 1
	}
	kinds := append([]Score{opt.Score}, opt.Compare...)
	cfg := s.Config()
	u, err := membership.UnitRoundoff(string(cfg.ObserveDtype))
	if err != nil {
		return nil, err
	}
	res := &Result{Template: opt.Template, Candidates: c.Len(), D: emb.D(), ObserveDtype: string(cfg.ObserveDtype),
		RankMin: math.MaxInt, Recompute: opt.Recompute, Causal: emb.Causal(), Deployer: opt.DeployerStack}
	for _, k := range kinds {
		res.Scores = append(res.Scores, k.String())
	}
	res.Scores = append(res.Scores, membership.Leverage.String(), membership.TopK.String(), "attack")

	secrets := Secrets(opt.Seed, opt.Victims, c.Len())
	texts := make([]string, opt.Victims)
	for v, s := range secrets {
		texts[v] = c.Texts[s]
	}
	deploy := opt.Deployer
	if deploy == nil {
		deploy = func(ctx context.Context, texts []string) (*Rows, error) { return emb.Embed(ctx, texts, 0, 0, nil) }
	}
	vrows, err := deploy(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("content: victims: %w", err)
	}
	if vrows.Len() != len(texts) || vrows.D != emb.D() {
		return nil, fmt.Errorf("content: victims: the deployer gave %d texts of width %d for %d of width %d", vrows.Len(), vrows.D, len(texts), emb.D())
	}
	if opt.Deployer != nil {
		// The evaluation's check that Recompute covers this deployer: emb's own rows against its
		// of the same (true) texts. No verdict reads it; the attacker could not compute it. A
		// deployer whose rows are of other tokens than emb's rows of the texts (assess's
		// look-alikes and its deployer's cut of a victim) has no gap to measure: none is recorded.
		own, err := emb.Embed(ctx, texts, 0, 0, nil)
		if err != nil {
			return nil, fmt.Errorf("content: victims, this repository's rows: %w", err)
		}
		if sameLayout(own, vrows) {
			if res.DeployerGap, err = RowGap(own, vrows); err != nil {
				return nil, fmt.Errorf("content: victims: %w", err)
			}
		}
	}

	nbr := newNeighbourhood(emb, opt)
	ties := rand.New(rand.NewPCG(opt.Seed, 0x7135))
	start, last := time.Now(), time.Now()
	if !c.Kept() {
		c.Keep() // every victim scores the same candidate rows
		defer c.Release()
	}
	ws := new(gelo.Workspace)
	d := emb.D()
	for v := 0; v < opt.Victims; v++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		idx := opt.FirstExample + int64(v)
		ex, _, err := s.ExampleWithVictim(ws, opt.Split, idx, vrows.Text(v))
		if err != nil {
			return nil, fmt.Errorf("content: victim %d: %w", v, err)
		}
		uObs := mat.NewDense(ex.NObs, d, nil) // (n_obs, d)
		for i, x := range ex.UObs {
			uObs.RawMatrix().Data[i] = float64(x)
		}
		tol := membership.RankTol(uObs, u)
		ms, err := membership.New(uObs, membership.Options{UnitRoundoff: u, AllObserved: cfg.ObsRows == 1, RankTol: tol,
			Recompute: opt.Recompute.Rho})
		if err != nil {
			return nil, fmt.Errorf("content: victim %d (example %d): %w", v, idx, err)
		}
		scores, err := c.ScoreResidual(ms, kinds)
		if err != nil {
			return nil, fmt.Errorf("content: victim %d: %w", v, err)
		}
		meas, err := c.Measure(ms)
		if err != nil {
			return nil, fmt.Errorf("content: victim %d: %w", v, err)
		}
		if opt.Absent {
			// The secret is not among the candidates: nothing can score it.
			all := append(append([][]float64{}, scores...), append([][]float64{meas.Leverage}, meas.TopK...)...)
			if meas.LeverageExcess != nil {
				all = append(all, meas.LeverageExcess)
			}
			for _, sc := range all {
				sc[secrets[v]] = math.MaxFloat64 // finite, so that the JSON result encodes
			}
		}
		dec := Decide(ms, scores[0], meas, claimGap)
		var nrep *NeighbourReport
		if dec.Verdict == VerdictClaim {
			t0 := time.Now()
			absent := -1
			if opt.Absent {
				absent = secrets[v]
			}
			if dec, err = nbr.check(ctx, ms, dec, absent); err != nil {
				return nil, fmt.Errorf("content: victim %d (example %d): %w", v, idx, err)
			}
			res.NeighbourSeconds += time.Since(t0).Seconds()
			nrep = &dec.Neighbours
		}
		if dec.Verdict == VerdictClaim && emb.Causal() {
			t0 := time.Now()
			if dec, err = checkEnd(ctx, emb, ms, cfg, c, dec); err != nil {
				return nil, fmt.Errorf("content: victim %d (example %d): %w", v, idx, err)
			}
			res.EndSeconds += time.Since(t0).Seconds()
		}
		scores = append(scores, meas.Leverage, dec.TopK, dec.Ranking)
		rec := Victim{Example: idx, Secret: secrets[v], Value: c.Values[secrets[v]], N: ex.N, NObs: ex.NObs,
			Rank: ms.Rank(), RankTol: tol, VictimTokens: vrows.Off[v+1] - vrows.Off[v]}
		for _, t := range ex.HText {
			if t == gelo.VictimTextID {
				rec.VictimRows++
			}
		}
		for k := range scores {
			o, err := LocateTies(scores[k], secrets[v], ties)
			if err != nil {
				return nil, err
			}
			rec.Outcomes = append(rec.Outcomes, o)
		}
		rec.Guess = c.Values[dec.Best]
		rec.Verdict, rec.Measure, rec.K = dec.Verdict, dec.Measure, dec.K
		rec.Claimed = dec.Verdict == VerdictClaim
		rec.SecretAbsent = opt.Absent
		if !ms.FullRank() {
			rec.ResidualBound = ms.ResidualBound()
		}
		rec.Neighbours, rec.Withdrawn = nrep, dec.Withdrawn
		rec.End, rec.EndWithdrawn = dec.End, dec.EndWithdrawn
		res.Victims = append(res.Victims, rec)
		if opt.Progress != nil && (time.Since(last) > 5*time.Second || v == opt.Victims-1) {
			last = time.Now()
			el := time.Since(start).Seconds()
			fmt.Fprintf(opt.Progress, "content: victim %d/%d, %.1f s (%.2f s each), rank %d of n %d\n",
				v+1, opt.Victims, el, el/float64(v+1), rec.Rank, rec.N)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.VictimSeconds = res.Seconds / float64(opt.Victims)
	res.summarise()
	return res, nil
}

// Secrets draws the secret of each of victims victims among candidates candidates, as Run draws
// them from Options.Seed: uniformly, independently per victim. An external deployer's input
// (the victims' texts) is written from the same draw.
func Secrets(seed uint64, victims, candidates int) []int {
	rng := rand.New(rand.NewPCG(seed, 0x71c7))
	secrets := make([]int, victims)
	for v := range secrets {
		secrets[v] = rng.IntN(candidates)
	}
	return secrets
}

// summarise fills the aggregate fields from res.Victims.
func (res *Result) summarise() {
	nv := float64(len(res.Victims))
	var claims, right, full, absent, ranked, withdrawn, tested, neighbours, ended int
	for _, v := range res.Victims {
		res.N += float64(v.N) / nv
		res.NObs += float64(v.NObs) / nv
		res.Rank += float64(v.Rank) / nv
		res.RankMin = min(res.RankMin, v.Rank)
		res.RankMax = max(res.RankMax, v.Rank)
		if v.Rank >= res.D {
			full++
		}
		if v.Claimed {
			claims++
			if v.Guess == v.Value && !v.SecretAbsent {
				right++
			}
		}
		if v.Neighbours != nil {
			tested++
			neighbours += v.Neighbours.Tested
		}
		if v.Withdrawn {
			withdrawn++
		}
		if v.EndWithdrawn {
			ended++
		}
		switch v.Verdict {
		case VerdictAbsent:
			absent++
		case VerdictRanked:
			ranked++
		}
	}
	res.FullRank = float64(full) / nv
	res.Claimed = float64(claims) / nv
	res.Absent = float64(absent) / nv
	res.Ranked = float64(ranked) / nv
	res.Withdrawn = float64(withdrawn) / nv
	res.EndWithdrawn = float64(ended) / nv
	if tested > 0 {
		res.Neighbours = float64(neighbours) / float64(tested)
	}
	res.ClaimedCorrect = -1
	if claims > 0 {
		res.ClaimedCorrect = float64(right) / float64(claims)
	}
	for k, name := range res.Scores {
		sm := Summary{Score: name, Chance: 1 / float64(res.Candidates)}
		var ranks, margins, sec, bw []float64
		for _, v := range res.Victims {
			o := v.Outcomes[k]
			if o.Rank == 1 {
				sm.Recovery += 1 / nv
			}
			ranks = append(ranks, float64(o.Rank))
			bw = append(bw, o.BestWrong)
			if v.SecretAbsent {
				continue // no secret score to compare with
			}
			margins = append(margins, o.Margin)
			sec = append(sec, o.Secret)
			sm.MeanRank += float64(o.Rank) / nv
		}
		sm.MedianRank = quantile(ranks, 0.5)
		sm.BestWrongMedian = quantile(bw, 0.5)
		if len(sec) > 0 {
			for i, q := range []float64{0, 0.05, 0.25, 0.5, 0.75, 0.95, 1} {
				sm.Margin[i] = quantile(margins, q)
			}
			sm.SecretMedian = quantile(sec, 0.5)
		}
		res.Summaries = append(res.Summaries, sm)
	}
}

// quantile is the q-quantile of x by linear interpolation between order statistics (x is sorted
// in place).
func quantile(x []float64, q float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	slices.Sort(x)
	p := q * float64(len(x)-1)
	i := int(p)
	if i >= len(x)-1 {
		return x[len(x)-1]
	}
	return x[i] + (p-float64(i))*(x[i+1]-x[i])
}

// Table renders the result's summaries as a Markdown table.
func (res *Result) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", res.Recompute)
	if res.Deployer != "" {
		fmt.Fprintf(&b, "victims' rows computed by the deployer's stack: %s\n", res.Deployer)
	}
	if g := res.DeployerGap; g != nil {
		within := "within rho"
		if g.Max > res.Recompute.Rho {
			within = "BEYOND rho: the absolute verdicts assume a bound this deployer exceeds"
		}
		fmt.Fprintf(&b, "the deployer's victim rows lie %.3g relative from this repository's rows of the same texts at most (median %.3g, %d rows): %s %.3g\n",
			g.Max, g.Median, g.Rows, within, res.Recompute.Rho)
	}
	if res.Causal {
		fmt.Fprintf(&b, "decoder rows: each candidate scored on its rows from the secret to the end of the text; a claim also needs every next token's row after its text beyond the bound (claims withdrawn by it %.2f, %.1f s)\n",
			res.EndWithdrawn, res.EndSeconds)
	}
	fmt.Fprintf(&b, "template %q, |C| = %d, %d victims, observe %s: n %.1f, n_obs %.1f, rank %.1f (min %d, max %d) of d %d, full rank %.2f; claimed %.2f (right %.2f), ranked first, not claimed %.2f (claims withdrawn by a neighbour %.2f; %.1f neighbours per claim tested, %.1f s), not among the candidates %.2f; %.1f s (%.3f s/victim)\n\n",
		res.Template.Pattern, res.Candidates, len(res.Victims), orNone(res.ObserveDtype), res.N, res.NObs, res.Rank, res.RankMin, res.RankMax, res.D,
		res.FullRank, res.Claimed, res.ClaimedCorrect, res.Ranked, res.Withdrawn, res.Neighbours, res.NeighbourSeconds, res.Absent, res.Seconds, res.VictimSeconds)
	b.WriteString(res.VerdictCounts())
	b.WriteString("\n\n| score | recovery | chance | median rank | mean rank | margin min | p5 | p50 | p95 | secret med | best wrong med |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range res.Summaries {
		fmt.Fprintf(&b, "| %s | %.3f | %.2g | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
			s.Score, s.Recovery, s.Chance, s.MedianRank, s.MeanRank, s.Margin[0], s.Margin[1], s.Margin[3], s.Margin[5], s.SecretMedian, s.BestWrongMedian)
	}
	return b.String()
}

// VerdictCounts counts the verdicts over the victims, each with its exact 95% interval
// (eval.ClopperPearson): claims, wrong claims (a guess that is not the secret, or any claim with
// the secret absent), claims withdrawn by a neighbour, "ranked first, not claimed" and "not among
// the candidates".
func (res *Result) VerdictCounts() string {
	n := len(res.Victims)
	if n == 0 {
		return "no victims"
	}
	var claim, wrong, withdrawn, ended, ranked, absent int
	for _, v := range res.Victims {
		if v.Claimed {
			claim++
			if v.SecretAbsent || v.Guess != v.Value {
				wrong++
			}
		}
		if v.Withdrawn {
			withdrawn++
		}
		if v.EndWithdrawn {
			ended++
		}
		switch v.Verdict {
		case VerdictRanked:
			ranked++
		case VerdictAbsent:
			absent++
		}
	}
	ci := func(k int) string {
		p, err := eval.ClopperPearson(k, n, 0.95)
		if err != nil {
			return err.Error()
		}
		return p.String()
	}
	end := ""
	if res.Causal {
		end = ", withdrawn by the end-of-text test " + ci(ended)
	}
	return fmt.Sprintf("verdicts, of %d victims with exact 95%% intervals: claimed %s, wrong claims %s, withdrawn by a neighbour %s%s, ranked first, not claimed %s, not among the candidates %s",
		n, ci(claim), ci(wrong), ci(withdrawn), end, ci(ranked), ci(absent))
}

// orNone spells an empty dtype as none.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Embed builds the candidates of template t from values: fills, forward pass, the rows the slot
// scores read (SlotRows).
func Embed(ctx context.Context, emb *Embedder, t Template, values []string, progress io.Writer) (*Candidates, error) {
	c := &Candidates{Values: values, Texts: make([]string, len(values))}
	for i, v := range values {
		c.Texts[i] = t.Fill(v)
	}
	rows, err := emb.Embed(ctx, c.Texts, 0, 0, progress)
	if err != nil {
		return nil, err
	}
	c.Rows = rows
	if c.Slot, err = emb.SlotRows(t, values, rows); err != nil {
		return nil, err
	}
	return c, nil
}

// checkEnd runs the end-of-text test (CheckEnd) on a decoder's claim of candidate dec.Best of c,
// whose text's rows the sampler cfg must keep with the row after them.
func checkEnd(ctx context.Context, emb *Embedder, ms *membership.Space, cfg gelo.Config, c *Candidates, dec Decision) (Decision, error) {
	b := dec.Best
	void := EndVoid(cfg, c.Rows.Off[b+1]-c.Rows.Off[b])
	var blocks []*baselines.PreparedRows
	have := false
	if void == "" && dec.Verdict == VerdictClaim {
		n, v, err := emb.nextRows(ctx, c.Texts[b])
		if err != nil {
			return dec, err
		}
		if void = v; n != nil {
			if blocks, err = n.prepared(); err != nil {
				return dec, err
			}
			have = true
		}
	}
	return checkEndPrepared(ms, dec, blocks, have, void)
}
