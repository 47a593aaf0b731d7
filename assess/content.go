package assess

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// contentName is content recovery's name in attacker.attacks.
const contentName = "content"

// contentAttack is content recovery of secret templates on the decoder's rows (baselines/content,
// docs/content-recovery.md "Decoders"). Each victim is a filled template (secrets.templates) in a
// batch of the deployment's prompts: the sampler puts it in place of one of them (content.Run's
// victim example), GELO mixes the call at the setting, and at every scored block the attacker,
// who knows the template and the candidate set, scores every candidate's rows from the slot to
// the end of the text against U. It claims a secret only where U proves it (content.Decide below
// full rank, the neighbour refutation, the end-of-text test) and proves a secret absent where no
// candidate can be it; everything else is "ranked first, not claimed". A victim is a row of its
// own (Unit.Secret); the template's look-alike victims, whose secret is not among the candidates,
// must never be claimed to hold one.
type contentAttack struct{}

func (contentAttack) Name() string { return contentName }

// Success: the attacker's answer (its claim, else its deepest block's first-ranked candidate, a
// guess against the chance level 1/candidates) is the secret.
func (contentAttack) Success() string   { return "recovers the secret" }
func (contentAttack) Claimed() string   { return "secrets claimed (proven from U)" }
func (contentAttack) Undecided() string { return "not claimed" }

// Budget is every template's budget (the reports give each template's beside it, contentBudget).
func (contentAttack) Budget(d Deployment) string {
	if len(d.Secrets.Templates) == 0 {
		return "no secret templates"
	}
	var parts []string
	for _, t := range d.Secrets.Templates {
		parts = append(parts, t.Name+": "+contentBudget(d, t))
	}
	return strings.Join(parts, "; ")
}

// contentBudget is the attacker's budget on template t.
func contentBudget(d Deployment, t SecretTemplate) string {
	return fmt.Sprintf("blocks scored %s; template %q over %s, every candidate's rows embedded once per block and scored from the slot to the end of the text; a claim needs, below full rank, the residual within the bound with a lead of 1 decade, every other candidate and up to %d neighbours one edit away beyond it, and the row after its text beyond it for every next token of the vocabulary (the end-of-text test); past full rank nothing is claimed; %d victims and %d look-alikes whose secret is absent (one character longer, or a neighbour)",
		joinInts(d.Attacker.Blocks), t.Pattern, t.describeSet(), content.DefaultNeighbourBudget, d.Secrets.Victims, d.Secrets.AbsentVictims)
}

// Check: it needs secret templates, and the attacker scores only offloaded blocks.
func (contentAttack) Check(d Deployment) error {
	if len(d.Secrets.Templates) == 0 {
		return errors.New("no secret templates (secrets.templates)")
	}
	for _, b := range d.Attacker.Blocks {
		if !slices.Contains(d.Offload.Blocks, b) {
			return fmt.Errorf("the attacker scores block %d, which GELO does not offload (offload.blocks %v)", b, d.Offload.Blocks)
		}
	}
	return nil
}

// SecretVictim is content recovery's victim of a unit: template Template's victim Victim, whose
// secret (drawn by content.Run from Seed) is among the candidates unless Absent says how it is
// not (AbsentLonger, AbsentNeighbour).
type SecretVictim struct {
	Template, Victim int
	Absent           string
	Seed             uint64
}

// Run attacks one victim at every scored block: the batch's prompts' rows make the sampler's
// corpus at the block, content.Run puts the victim in place of one of them (its rows as the
// deployer computed them) and decides; the row counts the claims over the blocks.
func (contentAttack) Run(ctx context.Context, env *Env, u Unit) ([]Row, error) {
	v, sets := u.Secret, env.secrets
	if v == nil || sets == nil {
		return nil, errors.New("content: a unit without its victim, or the secret sets not opened (Run opens them before the first batch)")
	}
	d, t := env.Deployment, env.Target
	tmpl := d.Secrets.Templates[v.Template]
	blocks := d.Attacker.Blocks
	_, corpora, _, err := loadBatch(ctx, env, u.Prompts, blocks)
	if err != nil {
		return nil, err
	}
	row := Row{Setting: u.Setting, Attack: env.Deployment.Attacker.Attacks[u.AttackIndex], Batch: u.Batch, Prompt: v.Victim,
		TextID: gelo.VictimTextID, D: t.D, P: t.P, Template: tmpl.Name, SecretAbsent: v.Absent}
	stats := BatchStats{Texts: len(u.Prompts), Blocks: slices.Clone(blocks)}
	var tally claimTally
	for k, l := range blocks {
		set, err := sets.candidates(ctx, v.Template, l)
		if err != nil {
			return nil, err
		}
		s, err := gelo.NewSampler(corpora[l], blockSampler(env, u, l, d.Batch.TokensPerText))
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		rho, err := content.DefaultRecompute(set.emb, u.Setting.DeployerPrecision)
		if err != nil {
			return nil, err
		}
		var text, secret string
		deploy := func(ctx context.Context, texts []string) (*content.Rows, error) {
			if len(texts) != 1 {
				return nil, fmt.Errorf("content drew %d victims, want 1", len(texts))
			}
			var e error
			if text, secret, e = sets.victim(v, texts[0]); e != nil {
				return nil, e
			}
			return deployerRows(ctx, env, set.emb, l, text)
		}
		res, err := content.Run(ctx, s, set.emb, content.Options{Template: tmpl.template(), Candidates: set.cands, Victims: 1,
			Split: data.Val, Seed: v.Seed, Score: content.SlotWorst, Absent: v.Absent == AbsentNeighbour, Recompute: rho,
			Deployer: deploy})
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		if len(res.Victims) != 1 {
			return nil, fmt.Errorf("block %d: content gave %d victims, want 1", l, len(res.Victims))
		}
		vic := res.Victims[0]
		if k == 0 {
			row.Text, row.Secret, row.Candidates = text, secret, set.cands.Len()
			if v.Absent == AbsentNeighbour {
				row.Candidates-- // the secret is not scored
			}
			toks, err := t.Tok.Encode(text, true)
			if err != nil {
				return nil, fmt.Errorf("victim %q: %w", text, err)
			}
			row.Tokens = toks[:min(len(toks), d.Batch.TokensPerText)] // as the deployer cuts it
			stats.Clean, stats.Shields = u.Setting.splitRows(vic.N)
			stats.Observed = vic.NObs
		} else if text != row.Text {
			return nil, fmt.Errorf("block %d drew the victim %q, block %d %q: the secret's draw differs between blocks", blocks[0], row.Text, l, text)
		}
		row.Verdicts = append(row.Verdicts, vic.Verdict)
		row.Guesses = append(row.Guesses, vic.Guess)
		if v.Absent == "" {
			row.Rank = vic.Outcomes[len(vic.Outcomes)-1].Rank // the ranking Decide used
			row.SecretRanks = append(row.SecretRanks, row.Rank)
		}
		stats.Rank = append(stats.Rank, vic.Rank)
		if vic.Neighbours != nil {
			stats.Passes += vic.Neighbours.Tested
		}
		if vic.End != nil {
			stats.Passes += vic.End.Tested
		}
		tally.add(vic, v.Absent == "", secret)
	}
	row.Stats = stats
	tally.fill(&row, v.Absent == "")
	if v.Absent == "" {
		row.Success = tally.answer(row.Guesses) == row.Secret
	}
	return []Row{row}, nil
}

// claimTally counts a victim's claims over the scored blocks.
type claimTally struct {
	right, wrong, provenAbsent int
	// claimed says a block claimed (a candidate, or that none is the secret); claim is the first
	// such claim in the order of the scored blocks ("" for "not among the candidates").
	claimed bool
	claim   string
}

// add counts one block's decision on a victim whose secret is among the candidates (present) or
// not: the secret claimed is right, another candidate claimed is wrong, and so is any candidate
// claimed for a look-alike; "not among the candidates" is right for a look-alike only.
func (c *claimTally) add(vic content.Victim, present bool, secret string) {
	if !c.claimed && (vic.Claimed || vic.Verdict == content.VerdictAbsent) {
		c.claimed = true
		if vic.Claimed {
			c.claim = vic.Guess
		}
	}
	switch {
	case vic.Claimed && present && vic.Guess == secret:
		c.right++
	case vic.Claimed:
		c.wrong++
	case vic.Verdict == content.VerdictAbsent && present:
		c.wrong++
	case vic.Verdict == content.VerdictAbsent:
		c.provenAbsent++
	}
}

// fill writes the tally's claims into the victim's row: a present secret is claimed when some
// block claims it; a look-alike's claim is its proof of absence; a victim without any claim is
// not claimed (CannotTell).
func (c claimTally) fill(r *Row, present bool) {
	r.Stats.Claims, r.Stats.ClaimsRight = c.right+c.wrong+c.provenAbsent, c.right+c.provenAbsent
	r.WrongClaims = c.wrong
	if present {
		r.Claimed = c.right > 0
	} else {
		r.Claimed = c.provenAbsent > 0
	}
	r.CannotTell = c.right+c.wrong+c.provenAbsent == 0
}

// answer is the attacker's answer for the victim: the first claim of a block (a candidate, or ""
// for "not among the candidates"), else the candidate the deepest scored block ranks first (a
// ranked guess). The victim's secret is recovered when the answer is the secret, proven or not,
// as decode reads a prompt exactly whether or not it can claim it.
func (c claimTally) answer(guesses []string) string {
	if c.claimed || len(guesses) == 0 {
		return c.claim
	}
	return guesses[len(guesses)-1]
}

// deployerRows are the victim text's rows at block l as the deployer computed them: emb's
// forward pass (content's own, the candidates'), through env.DeployerRows when the deployer's
// differs.
func deployerRows(ctx context.Context, env *Env, emb *content.Embedder, l int, text string) (*content.Rows, error) {
	rows, err := emb.Embed(ctx, []string{text}, 0, 1, nil)
	if err != nil {
		return nil, err
	}
	if env.DeployerRows == nil {
		return rows, nil
	}
	dep, err := env.DeployerRows(l, gelo.VictimTextID, slices.Clone(rows.Data))
	if err != nil {
		return nil, fmt.Errorf("victim, block %d: the deployer's rows: %w", l, err)
	}
	if len(dep) != len(rows.Data) {
		return nil, fmt.Errorf("victim, block %d: the deployer gave %d values, want %d", l, len(dep), len(rows.Data))
	}
	rows.Data = dep
	return rows, nil
}

// splitRows splits the n rows of X of a call into clean rows and shields as the sampler counts
// them at s (a fixed count, or ceil(frac x clean)).
func (s Setting) splitRows(n int) (clean, shields int) {
	for c := n; c >= 0; c-- {
		if c+s.Shields(c) == n {
			return c, n - c
		}
	}
	return n, 0
}
