package decode

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
)

// Llama is a Model over a Llama-family checkpoint (models/causallm's Decoder on a backend): the
// attacker's copy of the open weights.
type Llama struct {
	m      *llama.Model
	dc     *causallm.Decoder
	maxLen int
	batch  int // candidates per ForwardAlternatives call
	// lent are the caches handed to prefixes since the last RecyclePrefixes, spare those free
	// for new prefixes, made the number of caches allocated in all.
	lent, spare []*causallm.Cache
	made        int
}

// extendBatch is how many candidate tokens one forward pass extends a prefix by: enough to read
// each weight matrix once for a whole bag (at d 4096, 256 rows of activations are ~60 MB).
const extendBatch = 256

// NewLlama wraps m for texts of at most maxLen tokens, computing on be (the weights are placed
// there once; see causallm.NewDecoder), or on a CPU backend of its own when be is nil. be stays
// the caller's to close.
func NewLlama(be engine.Backend, m *llama.Model, maxLen int) (*Llama, error) {
	if maxLen < 1 || maxLen > m.Cfg.MaxLen() {
		return nil, fmt.Errorf("decode: texts of %d tokens: want 1 .. %d (the model's longest sequence)", maxLen, m.Cfg.MaxLen())
	}
	dc, err := causallm.OpenDecoder(be, m)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return &Llama{m: m, dc: dc, maxLen: maxLen, batch: max(maxLen, extendBatch)}, nil
}

// Close stops the decoder's backend when NewLlama made it; the weights and a caller's backend stay
// the caller's.
func (l *Llama) Close() error { return l.dc.Close() }

// Decoder is the forward the wrapper runs: its weights placed on its backend once, for other
// users of the same weights on that device (content recovery's embedders in assess).
func (l *Llama) Decoder() *causallm.Decoder { return l.dc }

// D is the hidden width.
func (l *Llama) D() int { return l.m.Cfg.Hidden }

// Blocks is the number of decoder layers.
func (l *Llama) Blocks() int { return l.m.Cfg.Layers }

// Vocab is the embedding table's row count.
func (l *Llama) Vocab() int { return l.m.Cfg.VocabSize }

// errEnough stops a forward pass once the attacked blocks' rows are taken.
var errEnough = errors.New("decode: rows taken")

// Rows is the forward pass of one text, blocks' attention-input rows for l < upto.
func (l *Llama) Rows(tokens []int, upto int) ([][]float32, error) {
	if len(tokens) > l.maxLen {
		return nil, fmt.Errorf("text of %d tokens, more than %d", len(tokens), l.maxLen)
	}
	d := l.D()
	ids := make([]int32, len(tokens))
	for i, t := range tokens {
		ids[i] = int32(t)
	}
	out := make([][]float32, upto)
	defer l.dc.TapOnly(attnInputs(0, upto)...)()
	err := l.dc.Forward(context.Background(), [][]int32{ids}, func(p llama.Point, layer int, x []float32) error {
		if p != llama.AttnInput {
			return nil
		}
		out[layer] = append([]float32(nil), x[:len(tokens)*d]...)
		if layer == upto-1 {
			return errEnough
		}
		return nil
	}, nil)
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	return out, nil
}

// attnInputs are blocks lo..hi-1's attention inputs: the points a pass's tap reads, declared so
// that a GPU brings no other block's rows to the host.
func attnInputs(lo, hi int) []causallm.TapPoint {
	var out []causallm.TapPoint
	for l := lo; l < hi; l++ {
		out = append(out, causallm.TapPoint{Point: llama.AttnInput, Layer: l})
	}
	return out
}

// Block0 is RMSNorm(E[v])·g_0 for v in [lo, hi): block 0's attention input, position-free.
// It is the one decoder formula computed outside the Decoder, on purpose: the norm in float64
// (the Decoder's RMSNorm is float32) puts these rows on the accurate side of the recomputation
// bound the bag is tested with, and reading the vocabulary's rows needs no pass through a block.
func (l *Llama) Block0(lo, hi int, dst []float32) error {
	if lo < 0 || hi > l.Vocab() || lo > hi {
		return fmt.Errorf("tokens [%d, %d) of a vocabulary of %d", lo, hi, l.Vocab())
	}
	d := l.D()
	g, e := make([]float32, d), make([]float32, d)
	if err := l.m.Read(llama.AttnNorm, 0, g); err != nil {
		return err
	}
	eps := l.m.Cfg.RMSEps
	for v := lo; v < hi; v++ {
		if err := l.m.ReadRows(llama.Embedding, -1, v, v+1, e); err != nil {
			return err
		}
		ss := 0.0
		for _, x := range e {
			ss += float64(x) * float64(x)
		}
		r := 1 / math.Sqrt(ss/float64(d)+eps)
		row := dst[(v-lo)*d : (v-lo+1)*d]
		for i, x := range e {
			row[i] = float32(float64(x)*r) * g[i]
		}
	}
	return nil
}

// MaxLen is the longest text the wrapper was sized for.
func (l *Llama) MaxLen() int { return l.maxLen }

// NewPrefix is the empty prefix.
func (l *Llama) NewPrefix() Prefix { return &llamaPrefix{l: l} }

// llamaPrefix keeps a KV cache of the prefix (nil while empty).
type llamaPrefix struct {
	l     *Llama
	cache *causallm.Cache
}

func (p *llamaPrefix) Len() int {
	if p.cache == nil {
		return 0
	}
	return p.cache.Len()
}

func (p *llamaPrefix) ensure() error {
	if p.cache != nil {
		return nil
	}
	c, err := p.l.newCache()
	if err != nil {
		return err
	}
	p.cache = c
	return nil
}

// newCache is an empty cache of maxLen tokens: a spare one when there is one, else a new one.
func (l *Llama) newCache() (*causallm.Cache, error) {
	var c *causallm.Cache
	if n := len(l.spare); n > 0 {
		c, l.spare = l.spare[n-1], l.spare[:n-1]
		c.Reset()
	} else {
		var err error
		if c, err = l.dc.NewCache(l.maxLen); err != nil {
			return nil, err
		}
		l.made++
	}
	l.lent = append(l.lent, c)
	return c, nil
}

// RecyclePrefixes makes the caches of every prefix made since the last call spare: decode.Run
// calls it after each batch, so a run of many batches holds the caches of one batch at most
// (on a GPU each is blocks x maxLen x kv x 8 bytes of device memory, never freed).
func (l *Llama) RecyclePrefixes() {
	l.spare = append(l.spare, l.lent...)
	l.lent = l.lent[:0]
}

// Extend runs every candidate as the next token against the prefix's cache, Extend's batch of
// candidates a pass (ExtendAll of this one prefix: each weight matrix read once for all of them),
// stopping after block upto-1's attention input; the cache is unchanged.
func (p *llamaPrefix) Extend(cands []int, upto int, dst []float32) error {
	w := (upto - 1) * p.l.D() // one candidate's rows
	for lo := 0; lo < len(cands); lo += p.l.batch {
		hi := min(len(cands), lo+p.l.batch)
		if err := p.l.ExtendAll([]Prefix{p}, cands[lo:hi], upto, dst[lo*w:hi*w]); err != nil {
			return err
		}
	}
	return nil
}

// prefixRows is the most candidate rows ExtendAll runs in one pass: four of Extend's batches, so
// that below full rank (bags of tens of tokens) a step's live prefixes share each weight read.
const prefixRows = 4 * extendBatch

// BatchRows is the most candidate rows one ExtendAll pass takes.
func (l *Llama) BatchRows() int { return prefixRows }

// ExtendAll extends every prefix of ps (this wrapper's) by cands in one pass
// (causallm.Decoder.ForwardAlternativesOf), stopping after block upto-1's attention input:
// dst (len(ps), len(cands), upto-1, d). The prefixes are unchanged.
func (l *Llama) ExtendAll(ps []Prefix, cands []int, upto int, dst []float32) error {
	caches := make([]*causallm.Cache, len(ps))
	ids := make([][]int32, len(ps))
	for i, p := range ps {
		lp, ok := p.(*llamaPrefix)
		if !ok || lp.l != l {
			return fmt.Errorf("prefix %d is not this model's", i)
		}
		if err := lp.ensure(); err != nil {
			return err
		}
		if lp.cache.Len() >= l.maxLen {
			return fmt.Errorf("prefix %d of %d tokens is at the length limit", i, lp.cache.Len())
		}
		caches[i] = lp.cache
		ids[i] = make([]int32, len(cands))
		for j, tok := range cands {
			ids[i][j] = int32(tok)
		}
	}
	d := l.D()
	defer l.dc.TapOnly(attnInputs(min(1, upto-1), upto)...)()
	err := l.dc.ForwardAlternativesOf(context.Background(), caches, ids, func(pt llama.Point, layer int, x []float32) error {
		if pt != llama.AttnInput || layer == 0 {
			return nil
		}
		for j := range len(ps) * len(cands) { // row j: prefix j / len(cands), candidate j % len(cands)
			copy(dst[(j*(upto-1)+layer-1)*d:(j*(upto-1)+layer)*d], x[j*d:(j+1)*d])
		}
		if layer == upto-1 {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return err
	}
	return nil
}

// Append is the prefix with tok run through every block into a copy of the cache.
func (p *llamaPrefix) Append(tok int) (Prefix, error) {
	if err := p.ensure(); err != nil {
		return nil, err
	}
	c, err := p.l.newCache()
	if err != nil {
		return nil, err
	}
	if err := p.l.dc.CopyCache(c, p.cache); err != nil {
		return nil, err
	}
	if err := p.l.dc.ForwardNext(context.Background(), c, []int32{int32(tok)}, nil, nil); err != nil {
		return nil, err
	}
	return &llamaPrefix{l: p.l, cache: c}, nil
}
