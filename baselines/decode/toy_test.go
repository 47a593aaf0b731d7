package decode

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// toy is a small causal model with the structure the attack relies on, for the search's tests:
// block 0's rows depend on the token alone, block l+1's row at t on tokens <= t through
// h_{l+1}(t) = h_l(t) + tanh(W_l mean_{s<=t} h_l(s)), and X_l(t) = RMSNorm(h_l(t)). The real
// decoder's tests are in models/llama.
type toy struct {
	v, d, blocks int
	e            []float64   // (v, d)
	w            [][]float64 // per block: (d, d)
}

func newToy(v, d, blocks int, seed uint64) *toy {
	rng := rand.New(rand.NewPCG(seed, 99))
	t := &toy{v: v, d: d, blocks: blocks, e: make([]float64, v*d)}
	for i := range t.e {
		t.e[i] = rng.NormFloat64()
	}
	for l := 0; l < blocks; l++ {
		w := make([]float64, d*d)
		for i := range w {
			w[i] = rng.NormFloat64() / math.Sqrt(float64(d))
		}
		t.w = append(t.w, w)
	}
	return t
}

func (t *toy) D() int      { return t.d }
func (t *toy) MaxLen() int { return 1 << 20 }
func (t *toy) Blocks() int { return t.blocks }
func (t *toy) Vocab() int  { return t.v }

func rmsnorm(h []float64, dst []float32) {
	s := 0.0
	for _, x := range h {
		s += x * x
	}
	r := 1 / math.Sqrt(s/float64(len(h))+1e-6)
	for i, x := range h {
		dst[i] = float32(x * r)
	}
}

func (t *toy) Block0(lo, hi int, dst []float32) error {
	if lo < 0 || hi > t.v {
		return fmt.Errorf("tokens [%d, %d) of %d", lo, hi, t.v)
	}
	for i := lo; i < hi; i++ {
		rmsnorm(t.e[i*t.d:(i+1)*t.d], dst[(i-lo)*t.d:(i-lo+1)*t.d])
	}
	return nil
}

// toyPrefix keeps, per block, the sum of h_l over the prefix.
type toyPrefix struct {
	m   *toy
	n   int
	sum [][]float64 // per block l < blocks: (d)
}

func (t *toy) NewPrefix() Prefix {
	p := &toyPrefix{m: t}
	for l := 0; l < t.blocks; l++ {
		p.sum = append(p.sum, make([]float64, t.d))
	}
	return p
}

func (p *toyPrefix) Len() int { return p.n }

// step computes h_l at the next position for token tok: hs[l] (d) for l < blocks.
func (p *toyPrefix) step(tok int) [][]float64 {
	m := p.m
	h := append([]float64(nil), m.e[tok*m.d:(tok+1)*m.d]...)
	hs := [][]float64{h}
	for l := 0; l+1 < m.blocks; l++ {
		next := make([]float64, m.d)
		for i := range next {
			acc := 0.0
			for j := 0; j < m.d; j++ {
				acc += m.w[l][i*m.d+j] * (p.sum[l][j] + h[j]) / float64(p.n+1)
			}
			next[i] = h[i] + math.Tanh(acc)
		}
		h = next
		hs = append(hs, h)
	}
	return hs
}

func (p *toyPrefix) Extend(cands []int, upto int, dst []float32) error {
	d := p.m.d
	for c, tok := range cands {
		hs := p.step(tok)
		for l := 1; l < upto; l++ {
			rmsnorm(hs[l], dst[(c*(upto-1)+l-1)*d:(c*(upto-1)+l)*d])
		}
	}
	return nil
}

func (p *toyPrefix) Append(tok int) (Prefix, error) {
	hs := p.step(tok)
	q := &toyPrefix{m: p.m, n: p.n + 1}
	for l := range p.sum {
		s := append([]float64(nil), p.sum[l]...)
		for i := range s {
			s[i] += hs[l][i]
		}
		q.sum = append(q.sum, s)
	}
	return q, nil
}

func (t *toy) Rows(tokens []int, upto int) ([][]float32, error) {
	out := make([][]float32, upto)
	for l := range out {
		out[l] = make([]float32, len(tokens)*t.d)
	}
	var p Prefix = t.NewPrefix()
	for i, tok := range tokens {
		hs := p.(*toyPrefix).step(tok)
		for l := 0; l < upto; l++ {
			rmsnorm(hs[l], out[l][i*t.d:(i+1)*t.d])
		}
		var err error
		if p, err = p.Append(tok); err != nil {
			return nil, err
		}
	}
	return out, nil
}
