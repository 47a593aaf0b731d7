package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/store"
)

// The presence attack (baseline -attack rowspace) on rows a deployer we did not write computed
// (issue 36): GELO mixes the deployer's rows of the examples' texts, and the candidates are the
// store's rows, this repository's forward of the same model. The exchange is recover's and
// decode's: -deployer-texts writes the token ids of every text the examples take rows from
// (bench/torch_deploy.py --tokens), -deployer-rows reads what the deployer wrote (--out).

// exampleTexts returns the indices in st (s's corpus) of every text examples 0..n-1 of split take
// rows from (positives, and donors of manifold shields), in order of first use.
func exampleTexts(ctx context.Context, s *gelo.Sampler, st *store.Store, split data.Split, n int) ([]int, error) {
	seen := map[int64]bool{}
	var out []int
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ex, err := s.Example(split, int64(i))
		if err != nil {
			return nil, err
		}
		for _, id := range ex.RowText {
			if id < 0 || seen[id] {
				continue
			}
			seen[id] = true
			j, ok := st.IndexOf(id)
			if !ok {
				return nil, fmt.Errorf("example %d: text id %d is not in store %s", i, id, st.Dir())
			}
			out = append(out, j)
		}
	}
	return out, nil
}

// deployerStore returns the sampler's corpus as the decoder store the deployer flags need.
func deployerStore(s *gelo.Sampler) (*store.Store, error) {
	st, ok := s.Corpus().(*store.Store)
	if !ok || st.Meta().Decoder == nil {
		return nil, errors.New("-deployer-texts and -deployer-rows attack a decoder store (`store extract -model` of a decoder): give one with -store or the config's store.path")
	}
	if st.Meta().Decoder.Dedup != "" && st.Meta().Decoder.Dedup != "none" {
		return nil, fmt.Errorf("store %s was extracted with -dedup %s: its texts lack some rows the deployer computes, so the mixed rows would not be the store's texts' rows; extract one with -dedup none", st.Dir(), st.Meta().Decoder.Dedup)
	}
	return st, nil
}

// storeTexts returns the stored strings of st's texts idx, refusing a text without one.
func storeTexts(st *store.Store, idx []int) ([]string, error) {
	out := make([]string, len(idx))
	for k, i := range idx {
		t, ok := st.Text(i)
		if !ok {
			return nil, fmt.Errorf("store %s: text id %d has no stored text for the deployer to run", st.Dir(), st.TextID(i))
		}
		out[k] = t
	}
	return out, nil
}

// writeExampleTexts writes the texts idx of st as the deployer's input: each as its store text id,
// its token ids as the store's forward pass read them, and its special prefix.
func writeExampleTexts(path string, st *store.Store, emb *content.Embedder, idx []int) error {
	texts, err := storeTexts(st, idx)
	if err != nil {
		return err
	}
	in, err := emb.DeployerTexts(texts)
	if err != nil {
		return err
	}
	out := make([]deployer.Text, len(in))
	for k, x := range in {
		out[k] = deployer.Text{ID: st.TextID(idx[k]), Tokens: x.Tokens, BOS: x.BOS}
	}
	var buf bytes.Buffer
	if err := deployer.WriteTexts(&buf, out); err != nil {
		return fmt.Errorf("-deployer-texts %s: %w", path, err)
	}
	if err := checkpoints.WriteFileAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("-deployer-texts: %w", err)
	}
	fmt.Fprintf(os.Stderr, "baseline: wrote the %d texts the examples take rows from, for the deployer, to %s\n", len(out), path)
	return nil
}

// deployerCorpus is a store whose texts idx read the deployer's rows instead of the stored ones:
// what GELO mixes when the deployer computed the rows. Every other method is the store's, so a
// sampler draws the same texts, windows and shields from it; reading the rows of a text the
// deployer did not compute is an error (the examples would mix this repository's rows).
type deployerCorpus struct {
	*store.Store
	rows map[int][]float32 // corpus index -> (NumTokens, D), laid out as the store's rows
}

// newDeployerCorpus lays out the deployer's rows of st's texts idx as the store's extraction laid
// out its own (content.Embedder.FromDeployer: BOS rows dropped, norm, float16 rounding), checking
// that the deployer saw the attacker's tokens and that each text's rows are the stored text's
// tokens at the stored positions.
func newDeployerCorpus(st *store.Store, emb *content.Embedder, dep *deployer.Rows, idx []int) (*deployerCorpus, error) {
	texts, err := storeTexts(st, idx)
	if err != nil {
		return nil, err
	}
	layer := st.Meta().Layer
	laid, err := emb.FromDeployer(texts, func(k int, text content.DeployerText) ([]float32, error) {
		toks := make([]int, len(text.Tokens))
		for i, id := range text.Tokens {
			toks[i] = int(id)
		}
		x, err := dep.Text(st.TextID(idx[k]), toks, layer)
		if err != nil {
			return nil, fmt.Errorf("-deployer-rows: %w (write the deployer's input with baseline -deployer-texts and the same -store, -config, -split, -examples and sampler flags)", err)
		}
		return x, nil
	})
	if err != nil {
		return nil, err
	}
	c := &deployerCorpus{Store: st, rows: make(map[int][]float32, len(idx))}
	for k, i := range idx {
		n := st.NumTokens(i)
		ids, pos := make([]int32, n), make([]int32, n)
		if err := st.TokenIDs(i, 0, n, ids); err != nil {
			return nil, err
		}
		if err := st.Positions(i, 0, n, pos); err != nil {
			return nil, err
		}
		if !slices.Equal(ids, laid.IDs[k]) || !slices.Equal(pos, laid.Pos[k]) {
			return nil, fmt.Errorf("-deployer-rows: text id %d: the deployer's rows are tokens %v at %v, the store's %v at %v", st.TextID(i), laid.IDs[k], laid.Pos[k], ids, pos)
		}
		c.rows[i] = laid.Text(k)
	}
	return c, nil
}

// Rows copies the deployer's rows [start, start+n) of text i into dst (dst: (n, D)).
func (c *deployerCorpus) Rows(i, start, n int, dst []float32) error {
	x, ok := c.rows[i]
	if !ok {
		return fmt.Errorf("-deployer-rows: the examples take rows of text id %d, which the deployer did not compute: write its input with baseline -deployer-texts and the same flags", c.TextID(i))
	}
	d := c.D()
	if start < 0 || n < 0 || (start+n)*d > len(x) || len(dst) < n*d {
		return fmt.Errorf("-deployer-rows: text id %d: rows [%d, %d) of %d", c.TextID(i), start, start+n, len(x)/d)
	}
	copy(dst[:n*d], x[start*d:(start+n)*d])
	return nil
}
