package llama

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/gelo-research/geloattack/internal/workpool"
)

// Point names a place in the forward pass where a Tap sees the rows.
type Point int

// Points a Tap sees, in the order of the forward pass.
const (
	// Residual at layer L < Layers is the input of block L (Hugging Face's hidden_states[L]; 0 is
	// the token embedding); at L = Layers it is the final RMSNorm's output (hidden_states[Layers]).
	Residual Point = iota
	// AttnInput at layer L is RMSNorm(h_L)·g_L, block L's input after input_layernorm: the rows
	// that the q, k and v projections read.
	AttnInput
)

// String names the point as the CLI does.
func (p Point) String() string {
	switch p {
	case Residual:
		return "residual"
	case AttnInput:
		return "attn-input"
	}
	return fmt.Sprintf("Point(%d)", int(p))
}

// Tap receives the rows x (n, d) of every sequence of the batch at one point of one layer, rows in
// batch order (Workspace.Offsets gives each sequence's first row). x is read-only and valid only
// during the call. An error stops the forward pass, which returns it wrapped.
type Tap func(p Point, layer int, x []float32) error

// Workspace holds every activation buffer of a forward pass, sized once for a token budget, so
// that batches run without allocating. A workspace serves one forward call at a time.
type Workspace struct {
	owner                      *Model // the model whose sizes the buffers have
	maxTokens, maxLen, workers int

	x    []float32 // (maxTokens, d): the residual stream
	xn   []float32 // (maxTokens, d): RMSNorm(x)·g
	qkv  []float32 // (maxTokens, q+2kv)
	att  []float32 // (maxTokens, q): attention output, heads side by side
	tmp  []float32 // (maxTokens, d)
	gu   []float32 // (maxTokens, 2f): gate and up projections side by side
	act  []float32 // (maxTokens, f): silu(gate)·up
	pos  []int32   // (maxTokens): position of each row in its sequence
	offs []int     // first row of each sequence, plus the total

	scores     [][]float32 // per worker: (tq, tk) attention scores, grown on demand
	cos        []float32   // (positions, hd/2), grown on demand
	sin        []float32   // (positions, hd/2)
	seqs       []attnSeq
	altK, altV []float32 // ForwardAlternatives: each row's keys and values, (rows, prefix+1, kv)
	conv       []float32 // a stored matrix converted to float32, grown on demand (Model.ScratchBytes)
}

// NewWorkspace sizes a workspace for batches of at most maxTokens tokens in all and maxLen tokens
// per sequence, run on workers goroutines (< 1: GOMAXPROCS). The results do not depend on workers
// as long as the model's library makes single-threaded calls (Library.SetThreads(1)): the
// workers are the parallelism, and a threaded OpenBLAS call's bits depend on its thread count.
func (m *Model) NewWorkspace(maxTokens, maxLen, workers int) (*Workspace, error) {
	if maxLen < 1 || maxLen > m.Cfg.MaxLen() {
		return nil, fmt.Errorf("workspace: max sequence length %d: want 1..%d (max_position_embeddings or sliding_window)", maxLen, m.Cfg.MaxLen())
	}
	if maxTokens < maxLen {
		return nil, fmt.Errorf("workspace: token budget %d is below the max sequence length %d", maxTokens, maxLen)
	}
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	c := m.Cfg
	d, f, w := c.Hidden, c.Intermediate, c.QDim()+2*c.KVDim()
	ws := &Workspace{
		owner:     m,
		maxTokens: maxTokens, maxLen: maxLen, workers: workers,
		x: make([]float32, maxTokens*d), xn: make([]float32, maxTokens*d),
		qkv: make([]float32, maxTokens*w), att: make([]float32, maxTokens*c.QDim()),
		tmp: make([]float32, maxTokens*d), gu: make([]float32, maxTokens*2*f),
		act: make([]float32, maxTokens*f), pos: make([]int32, maxTokens),
		scores: make([][]float32, workers),
	}
	m.ensureRope(ws, maxLen)
	return ws, nil
}

// Offsets is the first row of each sequence of the last batch, plus the total row count.
func (ws *Workspace) Offsets() []int { return ws.offs }

// ensureRope makes the workspace's cos/sin tables cover positions 0..n-1. Angles are computed in
// float64 and rounded once, so long positions lose no accuracy to a float32 product.
func (m *Model) ensureRope(ws *Workspace, n int) {
	half := m.Cfg.HeadDim / 2
	have := len(ws.cos) / half
	if have >= n {
		return
	}
	n = max(n, 2*have)
	inv := m.Cfg.InvFreq()
	cos, sin := make([]float32, n*half), make([]float32, n*half)
	copy(cos, ws.cos)
	copy(sin, ws.sin)
	for p := have; p < n; p++ {
		for i, f := range inv {
			s, c := math.Sincos(float64(p) * f)
			cos[p*half+i], sin[p*half+i] = float32(c), float32(s)
		}
	}
	ws.cos, ws.sin = cos, sin
}

// Forward runs the decoder on a batch of token-id sequences, each on its own (positions 0..T-1, as
// if alone: the batch is packed without padding and attention runs per sequence). tap, when not
// nil, sees the residual input and attention input of every block and the final-norm output (of
// a model of the first blocks: up to the last one's output, see Blocks). logits, when not nil
// (len >= n*vocab, n = total tokens), receives the output logits (n, vocab).
func (m *Model) Forward(ctx context.Context, ws *Workspace, seqs [][]int32, tap Tap, logits []float32) error {
	if ws.owner != m {
		return fmt.Errorf("forward: the workspace belongs to another model")
	}
	ws.offs = ws.offs[:0]
	n := 0
	for i, s := range seqs {
		if len(s) == 0 || len(s) > ws.maxLen {
			return fmt.Errorf("forward: sequence %d has %d tokens: want 1..%d", i, len(s), ws.maxLen)
		}
		if err := m.checkIDs(s); err != nil {
			return fmt.Errorf("forward: sequence %d: %w", i, err)
		}
		ws.offs = append(ws.offs, n)
		n += len(s)
		if n > ws.maxTokens {
			return fmt.Errorf("forward: batch of %d+ tokens exceeds the workspace budget %d", n, ws.maxTokens)
		}
	}
	ws.offs = append(ws.offs, n)
	if err := m.checkLogits(logits, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	for s, seq := range seqs {
		for p := range seq {
			ws.pos[ws.offs[s]+p] = int32(p)
		}
	}
	m.lookup(ws, seqs)
	// Each sequence attends to its own keys and values, which sit in ws.qkv beside its queries.
	c := m.Cfg
	w := c.QDim() + 2*c.KVDim()
	ws.seqs = ws.seqs[:0]
	for s := range seqs {
		off, t := ws.offs[s], ws.offs[s+1]-ws.offs[s]
		ws.seqs = append(ws.seqs, attnSeq{row: off, t: t, p0: 0, ld: w,
			k: ws.qkv[off*w+c.QDim() : (off+t)*w], v: ws.qkv[off*w+c.QDim()+c.KVDim() : (off+t)*w]})
	}
	return m.run(ctx, ws, n, nil, false, tap, logits)
}

// Cache holds the rotated keys and the values of one sequence's processed prefix for every
// layer, so that ForwardNext can extend the sequence without recomputing it.
type Cache struct {
	owner *Model
	k, v  [][]float32 // per layer: (capacity, kv)
	n     int
}

// NewCache allocates a cache for one sequence of up to capacity tokens:
// 2 * Blocks() * capacity * KVDim float32s.
func (m *Model) NewCache(capacity int) (*Cache, error) {
	if capacity < 1 || capacity > m.Cfg.MaxLen() {
		return nil, fmt.Errorf("cache: capacity %d: want 1..%d", capacity, m.Cfg.MaxLen())
	}
	c := &Cache{owner: m, k: make([][]float32, len(m.blocks)), v: make([][]float32, len(m.blocks))}
	for l := range c.k {
		c.k[l] = make([]float32, capacity*m.Cfg.KVDim())
		c.v[l] = make([]float32, capacity*m.Cfg.KVDim())
	}
	return c, nil
}

// Len is the number of tokens the cache holds.
func (c *Cache) Len() int { return c.n }

// Reset empties the cache, keeping its memory.
func (c *Cache) Reset() { c.n = 0 }

// Clone is an independent copy of the cache (same capacity), for branching a prefix while the
// original goes on: only the rows it holds are copied.
func (c *Cache) Clone() *Cache {
	o := &Cache{owner: c.owner, k: make([][]float32, len(c.k)), v: make([][]float32, len(c.v)), n: c.n}
	kv := c.owner.Cfg.KVDim()
	for l := range c.k {
		o.k[l] = make([]float32, len(c.k[l]))
		o.v[l] = make([]float32, len(c.v[l]))
		copy(o.k[l], c.k[l][:c.n*kv])
		copy(o.v[l], c.v[l][:c.n*kv])
	}
	return o
}

// Truncate keeps the first n tokens (n <= Len), e.g. to branch from a shared prefix.
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("cache: truncate to %d: holds %d", n, c.n)
	}
	c.n = n
	return nil
}

// ForwardNext runs the tokens ids at positions cache.Len().. of the sequence whose prefix the cache
// holds, appends their keys and values to the cache, and gives the rows of the new tokens only to
// tap and logits, exactly as Forward on the whole sequence gives them (up to rounding).
func (m *Model) ForwardNext(ctx context.Context, ws *Workspace, cache *Cache, ids []int32, tap Tap, logits []float32) error {
	if ws.owner != m || cache.owner != m {
		return fmt.Errorf("forward next: the workspace or cache belongs to another model")
	}
	t := len(ids)
	capacity := len(cache.k[0]) / m.Cfg.KVDim()
	if t == 0 || t > ws.maxTokens || cache.n+t > capacity {
		return fmt.Errorf("forward next: %d new tokens after %d cached: want 1..%d new and at most %d in all", t, cache.n, ws.maxTokens, capacity)
	}
	if err := m.checkIDs(ids); err != nil {
		return fmt.Errorf("forward next: %w", err)
	}
	if err := m.checkLogits(logits, t); err != nil {
		return err
	}
	ws.offs = append(ws.offs[:0], 0, t)
	for p := range ids {
		ws.pos[p] = int32(cache.n + p)
	}
	m.ensureRope(ws, cache.n+t)
	m.lookup(ws, [][]int32{ids})
	ws.seqs = append(ws.seqs[:0], attnSeq{row: 0, t: t, p0: cache.n, ld: m.Cfg.KVDim()})
	if err := m.run(ctx, ws, t, cache, false, tap, logits); err != nil {
		return err
	}
	cache.n += t
	return nil
}

// ForwardAlternatives runs every token of ids as the next token after the prefix the cache holds,
// each on its own (position cache.Len(), attending to the prefix and to itself), in one batch, so
// that each weight matrix is read once for all of them instead of once per token. tap sees their
// rows (len(ids), d) in ids' order, exactly as ForwardNext of each token alone would give them
// (up to rounding); the cache is not changed.
func (m *Model) ForwardAlternatives(ctx context.Context, ws *Workspace, cache *Cache, ids []int32, tap Tap) error {
	if ws.owner != m || cache.owner != m {
		return fmt.Errorf("forward alternatives: the workspace or cache belongs to another model")
	}
	t := len(ids)
	capacity := len(cache.k[0]) / m.Cfg.KVDim()
	if t == 0 || t > ws.maxTokens || cache.n+1 > capacity {
		return fmt.Errorf("forward alternatives: %d tokens after %d cached: want 1..%d, and room for one more in %d", t, cache.n, ws.maxTokens, capacity)
	}
	if err := m.checkIDs(ids); err != nil {
		return fmt.Errorf("forward alternatives: %w", err)
	}
	ws.offs = append(ws.offs[:0], 0, t)
	for p := range ids {
		ws.pos[p] = int32(cache.n)
	}
	m.ensureRope(ws, cache.n+1)
	m.lookup(ws, [][]int32{ids})
	ws.seqs = ws.seqs[:0]
	for r := range ids {
		ws.seqs = append(ws.seqs, attnSeq{row: r, t: 1, p0: cache.n, ld: m.Cfg.KVDim()})
	}
	return m.run(ctx, ws, t, cache, true, tap, nil)
}

func (m *Model) checkIDs(ids []int32) error {
	for j, id := range ids {
		if id < 0 || int(id) >= m.Cfg.VocabSize {
			return fmt.Errorf("token %d: id %d outside the vocabulary (size %d)", j, id, m.Cfg.VocabSize)
		}
	}
	return nil
}

func (m *Model) checkLogits(logits []float32, n int) error {
	if logits != nil && len(m.blocks) < m.Cfg.Layers {
		return fmt.Errorf("forward: logits of a model holding blocks 0..%d of %d", len(m.blocks)-1, m.Cfg.Layers)
	}
	if logits != nil && len(logits) < n*m.Cfg.VocabSize {
		return fmt.Errorf("forward: logits has %d values, want %d (%d tokens x vocab %d)", len(logits), n*m.Cfg.VocabSize, n, m.Cfg.VocabSize)
	}
	return nil
}

// run is the body shared by Forward, ForwardNext and ForwardAlternatives: the blocks, the final
// norm and the logits on the n rows already embedded in ws.x. With a cache, the new keys and values
// are stored in it at rows cache.n.. and attention reads the whole cached sequence; with alts too,
// every row is an alternative next token instead, attending to the prefix and itself only, and the
// cache is left as it was. A model of fewer blocks than Layers stops after its last block, tapping
// that block's output as the next one's residual input.
func (m *Model) run(ctx context.Context, ws *Workspace, n int, cache *Cache, alts bool, tap Tap, logits []float32) error {
	c := m.Cfg
	d := c.Hidden
	for l := range m.blocks {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := &m.blocks[l]
		if tap != nil {
			if err := tap(Residual, l, ws.x[:n*d]); err != nil {
				return fmt.Errorf("forward: layer %d %s: %w", l, Residual, err)
			}
		}
		m.rmsNormRows(ws, ws.x, b.attnNorm, ws.xn, n)
		if tap != nil {
			if err := tap(AttnInput, l, ws.xn[:n*d]); err != nil {
				return fmt.Errorf("forward: layer %d %s: %w", l, AttnInput, err)
			}
		}
		m.attentionBlock(ws, b, n, cache, alts, l)
		m.mlpBlock(ws, b, n)
	}
	if len(m.blocks) < c.Layers {
		if tap != nil {
			if err := tap(Residual, len(m.blocks), ws.x[:n*d]); err != nil {
				return fmt.Errorf("forward: layer %d %s: %w", len(m.blocks), Residual, err)
			}
		}
		return nil
	}
	m.rmsNormRows(ws, ws.x, m.norm, ws.xn, n)
	if tap != nil {
		if err := tap(Residual, c.Layers, ws.xn[:n*d]); err != nil {
			return fmt.Errorf("forward: layer %d %s: %w", c.Layers, Residual, err)
		}
	}
	if logits != nil {
		// logits: (n, vocab) = xn (n, d) . LMHead^T (d, vocab)
		m.linear(ws, ws.xn, &m.lmHead, nil, logits, n)
	}
	return nil
}

// lookup converts each token's embedding row into ws.x: only the rows looked up.
func (m *Model) lookup(ws *Workspace, seqs [][]int32) {
	d := m.Cfg.Hidden
	for s, seq := range seqs {
		for p, id := range seq {
			r := ws.offs[s] + p
			m.embed.convert(int(id), int(id)+1, ws.x[r*d:(r+1)*d])
		}
	}
}

// attentionBlock adds the attention sublayer's output to ws.x, reading RMSNorm(x)·g from ws.xn:
// x += O · Attn(RoPE(norm(Q xn + bq)), RoPE(norm(K xn + bk)), V xn + bv).
func (m *Model) attentionBlock(ws *Workspace, b *block, n int, cache *Cache, alts bool, layer int) {
	c := m.Cfg
	d, hd, q, kv := c.Hidden, c.HeadDim, c.QDim(), c.KVDim()
	w := q + 2*kv
	// qkv: (n, q+2kv) = xn (n, d) . QKV^T (d, q+2kv) + bias
	m.linear(ws, ws.xn, &b.qkv, b.qkvBias, ws.qkv, n)
	eps := float32(c.RMSEps)
	half := hd / 2
	parallel(ws.workers, n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := ws.qkv[r*w : (r+1)*w]
			cos := ws.cos[int(ws.pos[r])*half : int(ws.pos[r]+1)*half]
			sin := ws.sin[int(ws.pos[r])*half : int(ws.pos[r]+1)*half]
			// Query and key heads are contiguous: c.Heads query heads, then c.KVHeads key heads.
			for h := 0; h < c.Heads+c.KVHeads; h++ {
				x := row[h*hd : (h+1)*hd]
				if c.QKNorm {
					g := b.qNorm
					if h >= c.Heads {
						g = b.kNorm
					}
					rmsNorm(x, g, x, eps)
				}
				rotate(x, cos, sin)
			}
		}
	})
	if cache != nil && alts {
		// Each row is an alternative next token: it attends to the prefix and to itself only.
		n0, span := cache.n, (cache.n+1)*kv
		ws.altK, ws.altV = grow(ws.altK, n*span), grow(ws.altV, n*span)
		for r := 0; r < n; r++ {
			k, v := ws.altK[r*span:(r+1)*span], ws.altV[r*span:(r+1)*span]
			copy(k, cache.k[layer][:n0*kv])
			copy(v, cache.v[layer][:n0*kv])
			copy(k[n0*kv:], ws.qkv[r*w+q:r*w+q+kv])
			copy(v[n0*kv:], ws.qkv[r*w+q+kv:(r+1)*w])
			ws.seqs[r].k, ws.seqs[r].v = k, v
		}
	} else if cache != nil {
		// The new rows' keys and values join the cache; attention reads them from there.
		for r := 0; r < n; r++ {
			dst := (cache.n + r) * kv
			copy(cache.k[layer][dst:dst+kv], ws.qkv[r*w+q:r*w+q+kv])
			copy(cache.v[layer][dst:dst+kv], ws.qkv[r*w+q+kv:(r+1)*w])
		}
		s := &ws.seqs[0]
		s.k, s.v = cache.k[layer][:(cache.n+n)*kv], cache.v[layer][:(cache.n+n)*kv]
	}
	m.attention(ws)
	// tmp: (n, d) = att (n, q) . O^T (q, d); x += tmp
	m.linear(ws, ws.att, &b.o, nil, ws.tmp, n)
	addRows(ws, ws.x, ws.tmp, n*d)
}

// mlpBlock adds the SwiGLU sublayer to ws.x: x += Down (silu(Gate xn') ⊙ Up xn'), xn' = RMSNorm(x)·g.
func (m *Model) mlpBlock(ws *Workspace, b *block, n int) {
	d, f := m.Cfg.Hidden, m.Cfg.Intermediate
	m.rmsNormRows(ws, ws.x, b.mlpNorm, ws.xn, n)
	// gu: (n, 2f) = xn (n, d) . GateUp^T (d, 2f)
	m.linear(ws, ws.xn, &b.gateUp, nil, ws.gu, n)
	parallel(ws.workers, n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			gate, up := ws.gu[r*2*f:r*2*f+f], ws.gu[r*2*f+f:(r+1)*2*f]
			dst := ws.act[r*f : (r+1)*f]
			for j, g := range gate {
				dst[j] = float32(float64(g)/(1+math.Exp(-float64(g)))) * up[j]
			}
		}
	})
	// tmp: (n, d) = act (n, f) . Down^T (f, d); x += tmp
	m.linear(ws, ws.act, &b.down, nil, ws.tmp, n)
	addRows(ws, ws.x, ws.tmp, n*d)
}

// attnSeq is one sequence's attention problem: queries at rows row..row+t-1 of ws.qkv (positions
// p0..p0+t-1), keys and values (p0+t, kv) with row stride ld, read from ws.qkv or a cache.
type attnSeq struct {
	row, t, p0, ld int
	k, v           []float32
}

// attention computes causal softmax(Q K^T / sqrt(hd)) V for every sequence and query head into
// ws.att; query head h reads key/value head h / (Heads/KVHeads). Jobs (sequence, head) are handed
// out dynamically because sequence lengths differ.
func (m *Model) attention(ws *Workspace) {
	c := m.Cfg
	hd, q, kv := c.HeadDim, c.QDim(), c.KVDim()
	w := q + 2*kv
	rep := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	workpool.Jobs(ws.workers, len(ws.seqs)*c.Heads, func(worker, job int) {
		s, h := &ws.seqs[job/c.Heads], job%c.Heads
		t, tk := s.t, s.p0+s.t
		g := h / rep
		if cap(ws.scores[worker]) < t*tk {
			ws.scores[worker] = make([]float32, t*tk)
		}
		sc := ws.scores[worker][:t*tk] // (t, tk)
		qv := ws.qkv[s.row*w+h*hd : (s.row+t-1)*w+(h+1)*hd]
		kk := s.k[g*hd : (tk-1)*s.ld+(g+1)*hd]
		vv := s.v[g*hd : (tk-1)*s.ld+(g+1)*hd]
		// sc = scale * Q (t, hd) . K^T (hd, tk)
		m.lib.Sgemm(false, true, t, tk, hd, scale, qv, w, kk, s.ld, 0, sc, tk)
		for i := 0; i < t; i++ {
			// Query at position p0+i sees keys 0..p0+i.
			row := sc[i*tk : (i+1)*tk]
			softmax(row[:s.p0+i+1])
			clear(row[s.p0+i+1:])
		}
		// att rows: (t, hd) = sc (t, tk) . V (tk, hd)
		dst := ws.att[s.row*q+h*hd : (s.row+t-1)*q+(h+1)*hd]
		m.lib.Sgemm(false, false, t, hd, tk, 1, sc, tk, vv, s.ld, 0, dst, q)
	})
}

// linear computes dst (n, out) = src (n, in) . w^T (w: (out, in)) [+ b], on GEMM calls over
// tiles that the workers take. It splits by output columns unless there are more rows than
// columns: a row split makes every tile's GEMM stream the whole weight matrix (200 MB for
// Llama-2-7B's gate/up) from memory again, a column split reads each weight once. Measured on the
// Llama-2-7B shape cut to 2 layers, 2048 tokens a batch, 2 cores: 189 -> 231 tokens/s.
//
// The split and the tiles (workpool.ChunkSize) depend on n, in and out only, never on the worker
// count: an element's value depends on the shape of the GEMM call that computes it (the library's
// blocking, its small-matrix kernels, the micro-kernel its position falls in), so a worker-sized
// tile gave different bits on 1, 2 or 3 workers, and decode's figures with them.
//
// A matrix held as F16 or BF16 bytes is converted into the workspace's scratch first, by
// the same tiles the GEMMs take (each column tile converts the rows it multiplies by; a row split
// converts the whole matrix once, which costs less than one tile's GEMM since there are more rows
// than columns), so the GEMM calls, and so the results, are exactly those of a float32 copy of
// the file.
func (m *Model) linear(ws *Workspace, src []float32, w *matrix, b []float32, dst []float32, n int) {
	in, out := w.cols, w.rows
	wf := w.f32
	if wf == nil {
		ws.conv = grow(ws.conv, out*in)
	}
	if n >= out {
		if wf == nil {
			wf = ws.conv
			parallel(ws.workers, out, func(lo, hi int) { w.convert(lo, hi, wf[lo*in:hi*in]) })
		}
		workpool.Chunks(ws.workers, n, rowTile, func(lo, hi int) {
			m.lib.Sgemm(false, true, hi-lo, out, in, 1, src[lo*in:hi*in], in, wf, in, 0, dst[lo*out:hi*out], out)
			addBias(dst, b, lo, hi, out)
		})
		return
	}
	workpool.Chunks(ws.workers, out, colTile, func(lo, hi int) {
		var wt []float32 // (hi-lo, in): the rows of w this tile multiplies by
		if wf != nil {
			wt = wf[lo*in : hi*in]
		} else {
			wt = ws.conv[lo*in : hi*in]
			w.convert(lo, hi, wt)
		}
		m.lib.Sgemm(false, true, n, hi-lo, in, 1, src[:n*in], in, wt, in, 0, dst[lo:(n-1)*out+hi], out)
	})
	addBias(dst, b, 0, n, out)
}

// The smallest GEMM tiles linear cuts: rows of a row split, columns of a column split. Each column
// tile streams the whole activation operand (n x in) again, so the column tiles are at least 1024
// outputs wide: with tiles of out/16 (32 at the least) the Llama-2-7B-shaped extraction benchmark
// ran at 339 tokens/s against 357 for the old one-tile-per-worker split, with 1024 at 366 (medians
// of 5-8 alternating rounds, 2 cores, BenchmarkExtractLlama2Shape).
const rowTile, colTile = 8, 1024

func addBias(dst, b []float32, lo, hi, out int) {
	if b == nil {
		return
	}
	for r := lo; r < hi; r++ {
		row := dst[r*out : (r+1)*out]
		for j := range row {
			row[j] += b[j]
		}
	}
}

// addRows sets x[:m] += y[:m].
func addRows(ws *Workspace, x, y []float32, m int) {
	parallel(ws.workers, m, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x[i] += y[i]
		}
	})
}

// rmsNormRows writes RMSNorm(src row)·g into dst for n rows of width d.
func (m *Model) rmsNormRows(ws *Workspace, src, g, dst []float32, n int) {
	d := m.Cfg.Hidden
	eps := float32(m.Cfg.RMSEps)
	parallel(ws.workers, n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			rmsNorm(src[r*d:(r+1)*d], g, dst[r*d:(r+1)*d], eps)
		}
	})
}

// rmsNorm sets dst = x / sqrt(mean(x^2) + eps) · g; dst may be x.
func rmsNorm(x, g, dst []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for j, v := range x {
		dst[j] = v * inv * g[j]
	}
}

// rotate applies the rotary embedding in Hugging Face's rotate-half layout to one head x (hd):
// x[i] and x[i+hd/2] are rotated together by angle pos·freq_i (cos, sin: (hd/2)).
func rotate(x, cos, sin []float32) {
	half := len(x) / 2
	for i := 0; i < half; i++ {
		a, b := x[i], x[i+half]
		x[i] = a*cos[i] - b*sin[i]
		x[i+half] = b*cos[i] + a*sin[i]
	}
}

// softmax replaces x by softmax(x), subtracting the maximum first for range safety.
func softmax(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for j, v := range x {
		e := math.Exp(float64(v - mx))
		x[j] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for j := range x {
		x[j] *= inv
	}
}

// parallel runs fn over [0, n) in contiguous blocks (at least 8 items) on up to workers
// goroutines and returns when all are done. The blocks depend on n only (workpool.Chunks).
func parallel(workers, n int, fn func(lo, hi int)) { workpool.Chunks(workers, n, 8, fn) }

// grow returns buf with length n, reusing its memory when it is large enough.
func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}
