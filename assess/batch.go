package assess

import (
	"context"
	"fmt"
	"slices"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
)

// drawnBatch is one batch as the accelerator saw it at some blocks, beside the attacker's own
// recomputation of every text's rows.
type drawnBatch struct {
	// texts and ids are the sampler's corpus: the batch's prompts (val side) and the fillers
	// (train side).
	texts [][]int
	ids   []int64
	// rows are the attacker's rows per text id: rows[id][l] (len(tokens), d) for l <= the
	// largest block drawn.
	rows map[int64][][]float32
	// examples are the drawn examples per block: U at that block, with its secrets.
	examples map[int]*gelo.Example
}

// drawBatch draws batch u's U at each of blocks as decode does (the same sampler, corpus and call
// salt per block, so the same A and shields as its batch): the sampler's corpus holds the
// deployer's rows (env.DeployerRows, or the attacker's own recomputation), and the attacker keeps
// its own rows of every text to score.
func drawBatch(ctx context.Context, env *Env, u Unit, blocks []int) (*drawnBatch, error) {
	b, corpora, longest, err := loadBatch(ctx, env, u.Prompts, blocks)
	if err != nil {
		return nil, err
	}
	b.examples = map[int]*gelo.Example{}
	for _, l := range blocks {
		s, err := gelo.NewSampler(corpora[l], blockSampler(env, u, l, longest))
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		ex, err := s.Example(data.Val, 0)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", l, err)
		}
		b.examples[l] = ex
	}
	return b, nil
}

// blockSampler is the sampler configuration of batch u at block l: u's setting and seed, every
// text of the corpus's val side drawn whole (window sampling of tokens texts long), and the call
// salt decode gives block l, so that every attack sees the same A and shields at a block.
func blockSampler(env *Env, u Unit, l, tokens int) gelo.Config {
	cfg := u.Setting.sampler(u.Seed, env.Deployment.Prompts.ValFrac, len(u.Prompts))
	cfg.TokensPerText, cfg.TokenSampling = gelo.Fixed(float64(tokens)), gelo.TokenWindow
	cfg.Call = uint64(l) + 1 // decode's salt: the same A and shields as its batch
	return cfg
}

// loadBatch computes the rows of prompts and the fillers at blocks: the attacker's rows of every
// text (b.rows) and, per block, the sampler's corpus of the deployer's rows (env.DeployerRows, or
// the attacker's own) with the prompts on its val side and the fillers on its train side. longest
// is the longest text's token count.
func loadBatch(ctx context.Context, env *Env, prompts []Prompt, blocks []int) (b *drawnBatch, corpora []*data.MemCorpus, longest int, err error) {
	t := env.Target
	upto := slices.Max(blocks) + 1
	b = &drawnBatch{rows: map[int64][][]float32{}}
	b.texts, b.ids = batchCorpus(t, prompts)
	corpora = make([]*data.MemCorpus, upto)
	for l := range corpora {
		corpora[l] = data.NewMemCorpus(t.D, 1)
	}
	for i, toks := range b.texts {
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, err
		}
		r, err := t.Model.Rows(toks, upto)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("text %d: %w", b.ids[i], err)
		}
		b.rows[b.ids[i]] = r
		for _, l := range blocks {
			dep := r[l]
			if env.DeployerRows != nil {
				if dep, err = env.DeployerRows(l, b.ids[i], slices.Clone(r[l])); err != nil {
					return nil, nil, 0, fmt.Errorf("text %d, block %d: the deployer's rows: %w", b.ids[i], l, err)
				}
				if len(dep) != len(r[l]) {
					return nil, nil, 0, fmt.Errorf("text %d, block %d: the deployer gave %d values, want %d", b.ids[i], l, len(dep), len(r[l]))
				}
			}
			if err := corpora[l].Add(b.ids[i], dep, []float32{0}); err != nil {
				return nil, nil, 0, err
			}
		}
		longest = max(longest, len(toks))
	}
	return b, corpora, longest, nil
}
