package assess

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/data"
)

// decodeAttack is prompt decoding (baselines/decode, docs/prompt-decoding.md): the bag of tokens
// from block 0's U, then each text in order by a certified beam search over the other scored
// blocks, claims only where U proves them.
type decodeAttack struct{}

func (decodeAttack) Name() string    { return "decode" }
func (decodeAttack) Success() string { return "reads prompts exactly" }
func (decodeAttack) Claimed() string { return "claimed (proven from U)" }

// Undecided: decode flags no row; a prompt read without proof is a success but no claim.
func (decodeAttack) Undecided() string { return "" }

func (decodeAttack) Budget(d Deployment) string {
	beam := "4 per text"
	if d.Attacker.Beam > 0 {
		beam = fmt.Sprint(d.Attacker.Beam)
	}
	steps := fmt.Sprintf("%d tokens (one more than the prompts' cut, to prove a text's end) or n_obs, the less", d.Batch.TokensPerText+1)
	if d.Attacker.MaxSteps > 0 {
		steps = fmt.Sprintf("%d tokens", min(d.Attacker.MaxSteps, d.Batch.TokensPerText+1))
	}
	score := "the worst block's excess"
	if d.Attacker.Joint {
		score = "the sum of the blocks' excesses (joint)"
	}
	search, bag := "certified beam search", "the whole certified bag (no cut)"
	if d.Attacker.Rank {
		search = "ranking beam search where certification fails"
		if d.Attacker.RankBag > 0 {
			bag = fmt.Sprintf("the bag cut to its %d best tokens", d.Attacker.RankBag)
		}
	}
	return fmt.Sprintf("blocks scored %s (bag from block 0, order from the others); %s, beam %s, ranked by %s; %s; texts read up to %s",
		joinInts(d.Attacker.Blocks), search, beam, score, bag, steps)
}

func (decodeAttack) Check(d Deployment) error { return checkBlocksScored(d, true) }

// Run decodes one batch: decode.Run over a corpus whose val side is exactly the batch's prompts
// (the sampler draws all of them) and whose train side is the fillers.
func (decodeAttack) Run(ctx context.Context, env *Env, u Unit) ([]Row, error) {
	d, t := env.Deployment, env.Target
	texts, ids := batchCorpus(t, u.Prompts)
	opt := decode.Options{Sampler: u.Setting.sampler(u.Seed, d.Prompts.ValFrac, len(u.Prompts)), Split: data.Val, Batches: 1,
		Blocks: d.Attacker.Blocks, Beam: d.Attacker.Beam, Joint: d.Attacker.Joint, MaxSteps: d.Attacker.MaxSteps,
		Rank: d.Attacker.Rank, RankBag: d.Attacker.RankBag,
		TextIDs: ids, NoOrderMargin: true, DeployerPrecision: u.Setting.DeployerPrecision, Progress: env.Log}
	res, err := decode.Run(ctx, t.Model, texts, opt)
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("decode gave %d batch results, want 1", len(res))
	}
	return decodeRows(env, u, res[0])
}

// batchCorpus is the texts and ids decode and presence give the sampler: the batch's prompts
// (val side) and the fillers (train side).
func batchCorpus(t *Target, prompts []Prompt) ([][]int, []int64) {
	var texts [][]int
	var ids []int64
	for _, p := range append(slices.Clone(prompts), t.Fillers...) {
		texts = append(texts, p.Tokens)
		ids = append(ids, p.ID)
	}
	return texts, ids
}

// decodeRows turns a batch's result into a row per prompt: the truth (drawn in the sampler's
// order) matched back to the prompts, and per prompt whether a decoded text equals it, whether a
// claimed one does, the wrong claims it draws, its token accuracy, the closest decoded text and
// its bag recall.
func decodeRows(env *Env, u Unit, r decode.BatchResult) ([]Row, error) {
	t := env.Target
	if len(r.Truth) != len(u.Prompts) {
		return nil, fmt.Errorf("decode drew %d texts for a batch of %d", len(r.Truth), len(u.Prompts))
	}
	// truthOf[j] is the prompt (index into u.Prompts) of the j-th true text.
	truthOf := make([]int, len(r.Truth))
	used := make([]bool, len(u.Prompts))
	for j, tr := range r.Truth {
		truthOf[j] = -1
		for i, p := range u.Prompts {
			if !used[i] && slices.Equal(p.Tokens, tr) {
				truthOf[j], used[i] = i, true
				break
			}
		}
		if truthOf[j] < 0 {
			return nil, fmt.Errorf("decode drew a text that is not one of the batch's prompts")
		}
	}
	clean := 0
	for _, p := range u.Prompts {
		clean += len(p.Tokens)
	}
	stats := BatchStats{Texts: len(u.Prompts), Clean: clean, Shields: r.N - clean, Observed: r.NObs,
		Blocks: slices.Clone(env.Deployment.Attacker.Blocks), Rank: r.Rank, BagSize: len(r.Bag),
		BagPrecision: ptr(r.BagPrecision), BagRecall: ptr(r.BagRecall), BagMargin: rounded(r.BagMargin),
		Passes: r.Forwards, Claims: r.Claims, ClaimsRight: r.ClaimsRight, Overclaimed: r.Overclaimed}
	rows := make([]Row, len(u.Prompts))
	for i, p := range u.Prompts {
		rows[i] = baseRow(env, u, i, p, stats)
		rows[i].TokenAcc = 0
		best := -1
		for k, dt := range r.Decoded {
			acc := decode.Positionwise(dt.Tokens, p.Tokens)
			if best < 0 || acc > rows[i].TokenAcc {
				best, rows[i].TokenAcc = k, acc
			}
			if slices.Equal(dt.Tokens, p.Tokens) {
				rows[i].Success = true
			}
		}
		if best >= 0 {
			dt := r.Decoded[best]
			rows[i].Decoded, rows[i].DecodedText, rows[i].DecodedClaimed = slices.Clone(dt.Tokens), t.text(dt.Tokens), dt.Claimed
		}
		rows[i].BagRecall = ptr(bagRecall(p.Tokens, r.Bag))
	}
	// Claims: each claimed text credits the first true text it equals that no claim credited yet;
	// one that credits none is wrong, and is counted on the prompt it matches best.
	for _, dt := range r.Decoded {
		if !dt.Claimed {
			continue
		}
		credited := false
		for i, p := range u.Prompts {
			if !rows[i].Claimed && slices.Equal(dt.Tokens, p.Tokens) {
				rows[i].Claimed, credited = true, true
				break
			}
		}
		if credited {
			continue
		}
		bestI, bestAcc := 0, -1.0
		for i, p := range u.Prompts {
			if acc := decode.Positionwise(dt.Tokens, p.Tokens); acc > bestAcc {
				bestI, bestAcc = i, acc
			}
		}
		rows[bestI].WrongClaims++
	}
	return rows, nil
}

// baseRow is the row of prompt p (place i in the batch) with what every attack fills alike.
func baseRow(env *Env, u Unit, i int, p Prompt, stats BatchStats) Row {
	return Row{Setting: u.Setting, Attack: env.Deployment.Attacker.Attacks[u.AttackIndex], Batch: u.Batch, Pos: i,
		Prompt: p.Index, TextID: p.ID, Tokens: slices.Clone(p.Tokens), Text: p.Text, D: env.Target.D, P: env.Target.P,
		Stats: stats}
}

// bagRecall is the fraction of the distinct tokens of toks in bag.
func bagRecall(toks, bag []int) float64 {
	distinct := slices.Compact(slices.Sorted(slices.Values(toks)))
	in := 0
	for _, tok := range distinct {
		if slices.Contains(bag, tok) {
			in++
		}
	}
	return float64(in) / float64(len(distinct))
}

// joinInts writes 0, 1, 2.
func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
