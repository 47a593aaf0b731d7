package engine

import "math"

// TEMPORARY (lead's branch only): stand-ins for kvattn's NewBuffer and SpanAttention, replaced at merge.

func NewBuffer(be Backend, name string, shape ...int) (*Tensor, error) {
	n := 1
	for _, s := range shape {
		n *= s
	}
	st, err := be.Alloc(n)
	if err != nil {
		return nil, err
	}
	t := &Tensor{ndim: len(shape), size: n, st: st, name: name, node: -1}
	copy(t.shape[:], shape)
	return t, nil
}

func (tp *Tape) SpanAttention(q, k, v, kc, vc *Tensor, cached int, first []int32, heads, kvHeads int) *Tensor {
	if !tp.usable("SpanAttention", q, k, v, kc, vc) {
		return tp.placeholder()
	}
	N, qw, kw := q.Rows(), q.Cols(), k.Cols()
	hd := qw / heads
	rep := heads / kvHeads
	qh, kh, vh := q.ToHost(), k.ToHost(), v.ToHost()
	var kch, vch []float32
	if cached > 0 {
		kch, vch = kc.ToHost(), vc.ToHost()
	}
	out := make([]float32, N*qw)
	scale := float32(1 / math.Sqrt(float64(hd)))
	for r := 0; r < N; r++ {
		for h := 0; h < heads; h++ {
			g := h / rep
			qq := qh[r*qw+h*hd : r*qw+(h+1)*hd]
			var keys, vals [][]float32
			for j := 0; j < cached; j++ {
				keys = append(keys, kch[j*kw+g*hd:j*kw+(g+1)*hd])
				vals = append(vals, vch[j*kw+g*hd:j*kw+(g+1)*hd])
			}
			for j := int(first[r]); j <= r; j++ {
				keys = append(keys, kh[j*kw+g*hd:j*kw+(g+1)*hd])
				vals = append(vals, vh[j*kw+g*hd:j*kw+(g+1)*hd])
			}
			sc := make([]float32, len(keys))
			mx := float32(math.Inf(-1))
			for j, kk := range keys {
				var s float32
				for i := range kk {
					s += qq[i] * kk[i]
				}
				sc[j] = s * scale
				mx = max(mx, sc[j])
			}
			var sum float32
			for j := range sc {
				sc[j] = float32(math.Exp(float64(sc[j] - mx)))
				sum += sc[j]
			}
			o := out[r*qw+h*hd : r*qw+(h+1)*hd]
			for j, vv := range vals {
				p := sc[j] / sum
				for i := range vv {
					o[i] += p * vv[i]
				}
			}
		}
	}
	return tp.Input(out, N, qw)
}
