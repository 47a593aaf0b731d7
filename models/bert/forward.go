package bert

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/gelo-research/geloattack/internal/workpool"
)

// Workspace holds every activation buffer of a forward pass, sized once for a token budget and a
// longest sequence, so that batches run without allocating. A workspace serves one Forward call
// at a time.
type Workspace struct {
	maxTokens, maxLen, workers int

	x   []float32 // (maxTokens, h): the residual stream
	x1  []float32 // (maxTokens, h): after attention + first LayerNorm
	qkv []float32 // (maxTokens, 3h)
	att []float32 // (maxTokens, h): attention output before the output projection
	tmp []float32 // (maxTokens, h)
	ffn []float32 // (maxTokens, ffn)

	scores [][]float32 // per worker: (maxLen, maxLen)
	offs   []int       // first row of each sequence, plus the total

	// Hook, when not nil, computes the attention projections of the blocks it selects in place of
	// the forward pass. Nil (the default) leaves the forward pass exactly as without hooks.
	Hook LinearHook
}

// Projection names one attention projection of one block for a LinearHook.
type Projection struct {
	// Layer is the block, numbered like Forward's layer argument: 1..NumLayers (its output).
	Layer int
	// Which is ProjQuery, ProjKey, ProjValue or ProjOutput.
	Which string
}

// The attention projections a LinearHook sees, in the order a block computes them.
const (
	ProjQuery  = "q" // attention.self.query
	ProjKey    = "k" // attention.self.key
	ProjValue  = "v" // attention.self.value
	ProjOutput = "o" // attention.output.dense (before the residual and LayerNorm)
)

// LinearHook lets a caller compute the query, key, value and output projections of chosen blocks
// itself, for example to simulate sending them to another device that computes in another
// precision, or under obfuscation. The forward pass calls Hooked once per block and, when it
// answers true, Linear four times (q, k, v, then o) instead of its own GEMMs; the rest of the
// block is unchanged. Linear runs on Forward's goroutine and may parallelise internally.
type LinearHook interface {
	// Hooked reports whether the projections of block layer (1..NumLayers) go to Linear.
	Hooked(layer int) bool
	// Linear sets dst (n, out) = x (n, in) . w^T (w: (out, in)) + b (b: (out)), n = offs[len(offs)-1],
	// to whatever precision it models. offs holds the first row of each sequence of the batch plus
	// n (rows of different sequences never interact in a projection, so a hook may treat each
	// sequence as its own block of rows). x, w, b and offs are read-only, and the hook must keep
	// none of the five slices after returning. An error stops Forward, which returns it wrapped.
	Linear(p Projection, offs []int, x []float32, in int, w, b []float32, out int, dst []float32) error
}

// NewWorkspace sizes a workspace for batches of at most maxTokens tokens in all and maxLen tokens
// per sequence, run on workers goroutines (< 1: GOMAXPROCS).
func (m *Model) NewWorkspace(maxTokens, maxLen, workers int) (*Workspace, error) {
	if maxLen < 1 || maxLen > m.Cfg.MaxPositions {
		return nil, fmt.Errorf("workspace: max sequence length %d: want 1..%d (max_position_embeddings)", maxLen, m.Cfg.MaxPositions)
	}
	if maxTokens < maxLen {
		return nil, fmt.Errorf("workspace: token budget %d is below the max sequence length %d", maxTokens, maxLen)
	}
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	h, f := m.Cfg.HiddenSize, m.Cfg.IntermediateSize
	ws := &Workspace{
		maxTokens: maxTokens, maxLen: maxLen, workers: workers,
		x: make([]float32, maxTokens*h), x1: make([]float32, maxTokens*h),
		qkv: make([]float32, maxTokens*3*h), att: make([]float32, maxTokens*h),
		tmp: make([]float32, maxTokens*h), ffn: make([]float32, maxTokens*f),
		scores: make([][]float32, workers),
	}
	for i := range ws.scores {
		ws.scores[i] = make([]float32, maxLen*maxLen)
	}
	return ws, nil
}

// Forward runs the encoder on a batch of token-id sequences (each already framed by [CLS] ... [SEP]
// and at most the workspace's maxLen long). The batch is packed without padding: the tokens of all
// sequences are stacked into one (n, h) matrix for the dense layers, and attention runs per
// sequence, so each token attends exactly to the tokens of its own text — the result an attention
// mask gives a padded batch, without computing the padding.
//
// hidden (len >= n*h, n = total tokens) receives the hidden states of layer `layer` (0 = embedding
// output, 1..NumLayers = block outputs), rows in batch order; pooled (len >= len(seqs)*h) receives
// each sequence's sentence embedding: the mean of its last-layer rows, L2-normalised (the pooling
// of sentence-transformers' all-MiniLM-L6-v2). Either may be nil.
func (m *Model) Forward(ctx context.Context, ws *Workspace, seqs [][]int32, layer int, hidden, pooled []float32) error {
	h := m.Cfg.HiddenSize
	if layer < 0 || layer > m.Cfg.NumLayers {
		return fmt.Errorf("forward: layer %d: want 0..%d", layer, m.Cfg.NumLayers)
	}
	ws.offs = ws.offs[:0]
	n := 0
	for i, s := range seqs {
		if len(s) == 0 || len(s) > ws.maxLen {
			return fmt.Errorf("forward: sequence %d has %d tokens: want 1..%d", i, len(s), ws.maxLen)
		}
		for j, id := range s {
			if id < 0 || int(id) >= m.Cfg.VocabSize {
				return fmt.Errorf("forward: sequence %d token %d: id %d outside the vocabulary (size %d)", i, j, id, m.Cfg.VocabSize)
			}
		}
		ws.offs = append(ws.offs, n)
		n += len(s)
	}
	ws.offs = append(ws.offs, n)
	if n > ws.maxTokens {
		return fmt.Errorf("forward: batch of %d tokens exceeds the workspace budget %d", n, ws.maxTokens)
	}
	if hidden != nil && len(hidden) < n*h {
		return fmt.Errorf("forward: hidden has %d values, want %d (%d tokens x %d)", len(hidden), n*h, n, h)
	}
	if pooled != nil && len(pooled) < len(seqs)*h {
		return fmt.Errorf("forward: pooled has %d values, want %d (%d texts x %d)", len(pooled), len(seqs)*h, len(seqs), h)
	}
	if n == 0 {
		return nil
	}

	m.embed(ws, seqs, n)
	if layer == 0 && hidden != nil {
		copy(hidden[:n*h], ws.x[:n*h])
	}
	for i := range m.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ws.Hook != nil && ws.Hook.Hooked(i+1) {
			if err := m.hookedBlock(ws, i+1, n); err != nil {
				return fmt.Errorf("forward: layer %d: %w", i+1, err)
			}
		} else {
			m.block(ws, &m.layers[i], n)
		}
		if layer == i+1 && hidden != nil {
			copy(hidden[:n*h], ws.x[:n*h])
		}
	}
	if pooled != nil {
		m.pool(ws, len(seqs), pooled)
	}
	return nil
}

// embed writes LayerNorm(word + position + type-0 embeddings) of every token into ws.x.
func (m *Model) embed(ws *Workspace, seqs [][]int32, n int) {
	h := m.Cfg.HiddenSize
	eps := float32(m.Cfg.LayerNormEps)
	typ := m.typeEmb[:h]
	parallel(ws.workers, len(seqs), func(lo, hi int) {
		for s := lo; s < hi; s++ {
			for p, id := range seqs[s] {
				row := ws.x[(ws.offs[s]+p)*h : (ws.offs[s]+p+1)*h]
				w := m.wordEmb[int(id)*h : int(id+1)*h]
				pe := m.posEmb[p*h : (p+1)*h]
				for j := range row {
					row[j] = w[j] + pe[j] + typ[j]
				}
				layerNorm(row, m.embLNW, m.embLNB, eps)
			}
		}
	})
}

// block runs one post-norm transformer layer on ws.x in place:
// x1 = LN(x + Attn(x)), x = LN(x1 + FFN(x1)), FFN = W2 GELU(W1 x1 + b1) + b2.
func (m *Model) block(ws *Workspace, l *layerWeights, n int) {
	h := m.Cfg.HiddenSize
	eps := float32(m.Cfg.LayerNormEps)

	// qkv: (n, 3h) = x (n, h) . qkvW^T (h, 3h) + b
	m.linear(ws, ws.x, h, l.qkvW, l.qkvB, 3*h, ws.qkv, n)
	m.attention(ws)
	// x1 = LN(att . outW^T + outB + x)
	m.linear(ws, ws.att, h, l.outW, nil, h, ws.tmp, n)
	addNorm(ws, n, h, ws.tmp, l.outB, ws.x, ws.x1, l.ln1W, l.ln1B, eps)
	m.feedForward(ws, l, n)
}

// feedForward runs the second half of a block on ws.x1 into ws.x:
// x = LN(x1 + FFN(x1)), FFN = W2 GELU(W1 x1 + b1) + b2.
func (m *Model) feedForward(ws *Workspace, l *layerWeights, n int) {
	h, f := m.Cfg.HiddenSize, m.Cfg.IntermediateSize
	eps := float32(m.Cfg.LayerNormEps)
	// ffn: (n, f) = GELU(x1 . W1^T + b1)
	m.linear(ws, ws.x1, h, l.ffnW1, nil, f, ws.ffn, n)
	parallel(ws.workers, n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := ws.ffn[r*f : (r+1)*f]
			for j, v := range row {
				row[j] = gelu(v + l.ffnB1[j])
			}
		}
	})
	// x = LN(ffn . W2^T + b2 + x1)
	m.linear(ws, ws.ffn, f, l.ffnW2, nil, h, ws.tmp, n)
	addNorm(ws, n, h, ws.tmp, l.ffnB2, ws.x1, ws.x, l.ln2W, l.ln2B, eps)
}

// addNorm sets dst = LayerNorm(src + bias + res) row by row over the workers, all (n, h) but the
// bias (h); a nil bias adds none (a hook's projection adds its own).
func addNorm(ws *Workspace, n, h int, src, bias, res, dst, w, b []float32, eps float32) {
	parallel(ws.workers, n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row, rs, d := src[r*h:(r+1)*h], res[r*h:(r+1)*h], dst[r*h:(r+1)*h]
			if bias == nil {
				for j := range d {
					d[j] = row[j] + rs[j]
				}
			} else {
				for j := range d {
					d[j] = row[j] + bias[j] + rs[j]
				}
			}
			layerNorm(d, w, b, eps)
		}
	})
}

// hookedBlock is block with the four attention projections computed by ws.Hook. It is a separate
// function rather than branches inside block so that the unhooked pass runs exactly its old code.
// Q, K and V go through the hook one at a time (the hook sees each weight as an nn.Linear of its
// own) via ws.tmp, which is free until the output projection, and are scattered into qkv's columns.
func (m *Model) hookedBlock(ws *Workspace, layer, n int) error {
	l := &m.layers[layer-1]
	h := m.Cfg.HiddenSize
	eps := float32(m.Cfg.LayerNormEps)
	offs := ws.offs[:len(ws.offs):len(ws.offs)]

	for j, which := range [3]string{ProjQuery, ProjKey, ProjValue} {
		// tmp: (n, h) = x (n, h) . W_j^T (h, h) + b_j
		p := Projection{Layer: layer, Which: which}
		if err := ws.Hook.Linear(p, offs, ws.x[:n*h], h, l.qkvW[j*h*h:(j+1)*h*h], l.qkvB[j*h:(j+1)*h], h, ws.tmp[:n*h]); err != nil {
			return fmt.Errorf("%s projection: %w", which, err)
		}
		for r := 0; r < n; r++ {
			copy(ws.qkv[r*3*h+j*h:r*3*h+(j+1)*h], ws.tmp[r*h:(r+1)*h])
		}
	}
	m.attention(ws)
	// tmp = att . outW^T + outB (the hook adds the bias); x1 = LN(tmp + x)
	if err := ws.Hook.Linear(Projection{Layer: layer, Which: ProjOutput}, offs, ws.att[:n*h], h, l.outW, l.outB, h, ws.tmp[:n*h]); err != nil {
		return fmt.Errorf("%s projection: %w", ProjOutput, err)
	}
	addNorm(ws, n, h, ws.tmp, nil, ws.x, ws.x1, l.ln1W, l.ln1B, eps)
	m.feedForward(ws, l, n)
	return nil
}

// linear computes dst (n, out) = src (n, in) . w^T (w: (out, in)) [+ b], splitting the rows over
// the workers, each making one single-threaded GEMM call on its block.
func (m *Model) linear(ws *Workspace, src []float32, in int, w, b []float32, out int, dst []float32, n int) {
	parallel(ws.workers, n, func(lo, hi int) {
		rows := hi - lo
		if rows == 0 {
			return
		}
		m.lib.Sgemm(false, true, rows, out, in, 1, src[lo*in:hi*in], in, w, in, 0, dst[lo*out:hi*out], out)
		if b != nil {
			for r := lo; r < hi; r++ {
				row := dst[r*out : (r+1)*out]
				for j := range row {
					row[j] += b[j]
				}
			}
		}
	})
}

// attention computes softmax(Q K^T / sqrt(dh)) V per sequence and head from ws.qkv into ws.att
// (heads side by side, the layout the output projection expects). Jobs (sequence, head) are handed
// out dynamically because sequence lengths differ.
func (m *Model) attention(ws *Workspace) {
	h, heads := m.Cfg.HiddenSize, m.Cfg.NumHeads
	dh := h / heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	nseq := len(ws.offs) - 1
	workpool.Jobs(ws.workers, nseq*heads, func(worker, job int) {
		s, hd := job/heads, job%heads
		off, t := ws.offs[s], ws.offs[s+1]-ws.offs[s]
		q := ws.qkv[off*3*h+hd*dh:]
		k := ws.qkv[off*3*h+h+hd*dh:]
		v := ws.qkv[off*3*h+2*h+hd*dh:]
		sc := ws.scores[worker][:t*t] // (t, t)
		// Slices given to GEMM must end at the last element the strided view touches.
		last := (t-1)*3*h + dh
		m.lib.Sgemm(false, true, t, t, dh, scale, q[:last], 3*h, k[:last], 3*h, 0, sc, t)
		for i := 0; i < t; i++ {
			softmax(sc[i*t : (i+1)*t])
		}
		dst := ws.att[off*h+hd*dh:]
		m.lib.Sgemm(false, false, t, dh, t, 1, sc, t, v[:last], 3*h, 0, dst[:(t-1)*h+dh], h)
	})
}

// pool writes each sequence's mean last-layer row, L2-normalised, into pooled (nseq, h).
func (m *Model) pool(ws *Workspace, nseq int, pooled []float32) {
	h := m.Cfg.HiddenSize
	for s := 0; s < nseq; s++ {
		MeanNormalized(ws.x, ws.offs[s], ws.offs[s+1], h, pooled[s*h:(s+1)*h])
	}
}

// MeanNormalized (the sentence-transformers pooling; extraction's RunDecoder pools the same way) writes the mean of rows [lo, hi) of x (n, d), L2-normalised, into dst (d).
func MeanNormalized(x []float32, lo, hi, d int, dst []float32) {
	clear(dst)
	for r := lo; r < hi; r++ {
		for j, v := range x[r*d : (r+1)*d] {
			dst[j] += v
		}
	}
	var ss float64
	for j := range dst {
		dst[j] /= float32(hi - lo)
		ss += float64(dst[j]) * float64(dst[j])
	}
	// The 1e-12 floor is torch.nn.functional.normalize's, which sentence-transformers uses.
	inv := float32(1 / math.Max(math.Sqrt(ss), 1e-12))
	for j := range dst {
		dst[j] *= inv
	}
}

// layerNorm normalises x in place to zero mean and unit variance (biased), then scales and shifts.
func layerNorm(x, w, b []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := float32(sum / float64(len(x)))
	var ss float64
	for _, v := range x {
		d := float64(v - mean)
		ss += d * d
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for j, v := range x {
		x[j] = (v-mean)*inv*w[j] + b[j]
	}
}

// softmax replaces x by softmax(x), subtracting the maximum first for range safety.
func softmax(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for j, v := range x {
		e := exp32(v - mx)
		x[j] = e
		sum += e
	}
	inv := 1 / sum
	for j := range x {
		x[j] *= inv
	}
}

// parallel runs fn over [0, n) in contiguous blocks (at least 32 items) on up to workers
// goroutines and returns when all are done.
func parallel(workers, n int, fn func(lo, hi int)) { workpool.Chunks(workers, n, 32, fn) }
