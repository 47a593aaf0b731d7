package main

import (
	"fmt"
	"runtime"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/gelo-research/geloattack/runner"
)

// maxSetElems bounds the GELO example decode draws per attacked block, whatever the memory: the
// n x n mixing matrix A and the (shields, d) shield rows each hold at most 2^32 elements (16 GiB
// in float32), so a -shield-rows or -positives of the flags' own ranges cannot ask for terabytes
// even with GELOATTACK_SKIP_PREFLIGHT set.
const maxSetElems = 1 << 32

// checkSetSize refuses a sampler whose example of texts cut to maxTokens tokens would hold more
// than maxSetElems shield elements (shields x d) or mixing-matrix elements (n x n).
func checkSetSize(sc gelo.Config, maxTokens, d int) error {
	n, clean := setSize(sc, maxTokens)
	k := n - clean
	if e := int64(k) * int64(d); e > maxSetElems {
		return fmt.Errorf("-shield-rows (or shield_frac) %d x d %d = %d shield elements a block: over the limit of 2^32; fewer shields, or a smaller model", k, d, e)
	}
	if e := int64(n) * int64(n); e > maxSetElems {
		return fmt.Errorf("set size n = %d positives x %d tokens + %d shields = %d: the n x n mixing matrix would hold %d elements, over the limit of 2^32 (n <= 65536); fewer -positives, -max-tokens or shields",
			int(sc.Positives.Max), maxTokens, k, n, e)
	}
	return nil
}

// setSize is the largest set an example of texts cut to maxTokens tokens holds, and its clean rows.
func setSize(sc gelo.Config, maxTokens int) (n, clean int) {
	sc.TokensPerText = gelo.Fixed(float64(maxTokens))
	return sc.MaxN(), int(sc.Positives.Max) * maxTokens
}

// decodePlan is what decode is about to do, for its resource pre-flight.
type decodePlan struct {
	cfg                      llama.Config
	sc                       gelo.Config
	vocab, texts             int            // the tokenizer's ids; the texts decoded (0 before they are read)
	src                      *corpus.Source // nil before the texts are read
	maxTokens, beam, rankBag int
	blocks                   []int
	deepest                  int
	bagOnly, model           bool // model: the weights are loaded (not -deployer-texts)
}

// budget estimates decode by part: the weights of the blocks it loads (0..deepest, as stored in
// the files: runner.StoredWeights), the tokenizer and the
// texts, and with the model: the forward pass's workspace (candidate batches of 256 rows against
// prefixes of -max-tokens), the live prefixes' KV caches (twice the beam, and one per text), the
// texts' rows at every attacked block, the GELO example of each block (the mixing matrix, its
// generator's QR and the rows), the membership spaces, block 0's scores of the whole vocabulary,
// and the order search's candidate rows (the bag: the whole vocabulary past full rank, or
// -rank-bag).
func (p decodePlan) budget(modelDir string) runner.Budget {
	c := p.cfg
	b := runner.Budget{What: "decode -model " + modelDir,
		Reduce: "-max-texts, -max-tokens, -positives, -shield-rows or -shield-frac, -beam, -blocks, or -bag-only, or use a smaller model"}
	if p.src != nil {
		b.Add(runner.TokenizerPart(p.vocab), runner.TextsPart(len(p.src.Texts), p.src.Bytes()))
	}
	if !p.model {
		return b // -deployer-texts: the weights are not read
	}
	d, nb := int64(c.Hidden), int64(len(p.blocks))
	n, _ := setSize(p.sc, p.maxTokens)
	n64, m := int64(n), int64(min(n, c.Hidden))
	positives := int64(p.sc.Positives.Max)
	beam := int64(p.beam)
	if beam == 0 {
		beam = 4 * max(positives, 1)
	}
	b.Add(runner.StoredWeights(modelDir, c, p.deepest+1)...)
	b.Add(
		runner.Part{Name: "workspace", Bytes: causallm.WorkspaceBytes(c, max(p.maxTokens, 256), p.maxTokens, runtime.GOMAXPROCS(0))},
		runner.Part{Name: fmt.Sprintf("texts' rows (%d texts x %d tokens x d %d at %d blocks)", p.texts, p.maxTokens, d, nb),
			Bytes: runner.Product(4, nb, int64(p.texts), int64(p.maxTokens), d)},
		runner.Part{Name: fmt.Sprintf("GELO examples (n %d at %d blocks)", n, nb),
			Bytes: runner.Product(nb, 4*n64*n64+16*n64*d) + 24*n64*n64},
		runner.Part{Name: "membership spaces", Bytes: runner.Product(8, nb, m*m+2*n64*m)},
		runner.Part{Name: fmt.Sprintf("vocabulary scores (%d tokens)", c.VocabSize), Bytes: 64*int64(c.VocabSize) + 20*2048*d},
	)
	if !p.bagOnly {
		cands := int64(c.VocabSize)
		if p.rankBag > 0 {
			cands = min(cands, int64(p.rankBag))
		}
		prefixes := 2*beam + positives
		b.Add(runner.Part{Name: fmt.Sprintf("KV caches (%d prefixes of %d tokens)", prefixes, p.maxTokens),
			Bytes: runner.Product(prefixes, c.CacheBytes(p.maxTokens))},
			runner.Part{Name: fmt.Sprintf("candidate rows (%d candidates, blocks 1..%d)", cands, p.deepest),
				Bytes: runner.Product(cands, d, 4*int64(p.deepest+1)+16)})
	}
	return b
}
