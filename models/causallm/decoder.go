package causallm

import (
	"context"
	"fmt"
	"math"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/models/llama"
)

// Decoder runs a checkpoint's decoder (the weights a llama.Model holds, blocks 0..Blocks()-1) on
// an engine backend for inference: the forward pass that extraction, prompt decoding and content
// recovery read rows from, with taps, a KV cache and batched alternatives. It is the training
// model's forward (the same ops in the same order: Embedding rows, RMSNorm, q/k/v projections,
// RoPE, attention, SwiGLU), generalised to what checkpoints carry: grouped-query attention, q/k/v
// biases (Qwen2), q/k norms (Qwen3), an untied output projection and the rope scalings of
// llama.Config. Each block runs on a fresh forward-only tape, so activations take one block's
// memory; the residual stream stays on the backend between blocks, in a buffer each block reads
// and writes its output back into, and comes to the host only where a tap asks for it (TapOnly
// says where; a GPU then moves no block's rows that nobody reads). A Decoder is not safe for
// concurrent use.
type Decoder struct {
	cfg    llama.Config
	w      *llama.Model
	be     engine.Backend
	tp     *engine.Tape
	blocks []blockWeights
	norm   *engine.Tensor // (d), nil for a model of fewer blocks than Layers
	head   *engine.Tensor // (vocab, d), the output projection, placed on first use
	// staged lists the weights a pass converts before their block runs (F16/BF16 checkpoints on
	// a host-memory backend); stagedOf[l] is block l's span of it (l = Layers: the final norm's).
	staged   []stagedWeight
	stagedOf [][2]int
	staging  map[string]*engine.Tensor // the shared buffer of each block weight's key, made on first use
	keepLeft int64                     // float32 bytes more that may be kept converted (KeepConverted)
	kept     int64                     // float32 bytes kept converted
	host     bool                      // be computes in host memory (engine.HostMemory)
	rope     ropeCache
	// resid: (≥ n, d) the residual stream on the backend, block after block; rot: (≥ n, hd) each
	// row's rotation, uploaded once a pass. Buffers, sized for the largest pass so far.
	resid, rot *engine.Tensor
	// x, a: (n, d) host rows on a device backend: the embeddings going up, a tap's rows coming
	// down (a host-memory backend hands a tap the buffer's own memory instead).
	x, a []float32
	taps map[TapPoint]bool // the points a tap is called at (TapOnly); nil: every point
	// jointK, jointV: (rows, kv), the caches of ForwardAlternativesOf's prefixes one after
	// another, refilled block by block.
	jointK, jointV *engine.Tensor
	owned          bool   // Close closes be (NewCPUDecoder made it)
	restore        func() // with owned: gives the BLAS library back its thread count
}

// blockWeights is one decoder block's weights on a backend (PyTorch layout, (out, in)): the
// training model's parameters or a checkpoint's weights uploaded by a Decoder.
type blockWeights struct {
	attnNorm, mlpNorm *engine.Tensor // (d)
	qkv               *engine.Tensor // (3q, d) stacked when q and k/v widths agree, else nil
	q, k, v           *engine.Tensor // (q, d), (kv, d), (kv, d) when not stacked
	qb, kb, vb        *engine.Tensor // (q), (kv), (kv) biases, nil without Config.QKVBias
	qNorm, kNorm      *engine.Tensor // (hd), nil without Config.QKNorm
	o                 *engine.Tensor // (d, q)
	gateUp            *engine.Tensor // (2f, d): gate_proj, up_proj stacked
	down              *engine.Tensor // (d, f)
}

// NewDecoder places the weights of w's blocks on be and, when w holds every block, the final norm
// and the output projection. Where they go depends on where the backend computes and how the
// checkpoint stores them:
//   - host memory (the CPU backend), float32 weights: the decoder computes from w's own memory,
//     no copy;
//   - host memory, F16/BF16 weights: each pass converts a block's weights into one block's float32
//     buffers just before the block runs (the conversion the host forward made per GEMM chunk), so
//     the decoder holds one block of float32 and w's mapped file;
//   - a device (CUDA): every weight is converted once and uploaded as float32, the precision of the
//     engine's tensors (the GEMM precision of the backend decides how they are multiplied).
func NewDecoder(be engine.Backend, w *llama.Model) (*Decoder, error) {
	if err := CheckInference(be); err != nil {
		return nil, err
	}
	c := w.Cfg
	dc := &Decoder{cfg: c, w: w, be: be, tp: engine.NewTape(be)}
	dc.tp.SetForwardOnly(true)
	dc.rope.inv = c.InvFreq()
	_, dc.host = be.(engine.HostMemory)
	dc.staging = map[string]*engine.Tensor{}
	var err error
	// place binds *dst to the weight that parts of block blk make, or records it for the passes
	// to convert (dst is then bound before its block runs).
	place := func(dst **engine.Tensor, key string, blk int, shape []int, parts ...llama.Part) {
		if err != nil {
			return
		}
		var staged *stagedWeight
		*dst, staged, err = dc.place(key, blk, shape, parts...)
		if staged != nil {
			staged.dst = dst
			dc.staged = append(dc.staged, *staged)
		}
	}
	d, f, q, kv, hd := c.Hidden, c.Intermediate, c.QDim(), c.KVDim(), c.HeadDim
	dc.blocks = make([]blockWeights, w.Blocks())
	for l := range dc.blocks {
		b := &dc.blocks[l]
		first := len(dc.staged)
		place(&b.attnNorm, "input_layernorm.weight", l, []int{d}, llama.AttnNorm)
		if q == kv {
			place(&b.qkv, "self_attn.qkv", l, []int{3 * q, d}, llama.QProj, llama.KProj, llama.VProj)
		} else {
			place(&b.q, "self_attn.q_proj.weight", l, []int{q, d}, llama.QProj)
			place(&b.k, "self_attn.k_proj.weight", l, []int{kv, d}, llama.KProj)
			place(&b.v, "self_attn.v_proj.weight", l, []int{kv, d}, llama.VProj)
		}
		if c.QKVBias {
			place(&b.qb, "self_attn.q_proj.bias", l, []int{q}, llama.QBias)
			place(&b.kb, "self_attn.k_proj.bias", l, []int{kv}, llama.KBias)
			place(&b.vb, "self_attn.v_proj.bias", l, []int{kv}, llama.VBias)
		}
		if c.QKNorm {
			place(&b.qNorm, "self_attn.q_norm.weight", l, []int{hd}, llama.QNorm)
			place(&b.kNorm, "self_attn.k_norm.weight", l, []int{hd}, llama.KNorm)
		}
		place(&b.o, "self_attn.o_proj.weight", l, []int{d, q}, llama.OProj)
		place(&b.mlpNorm, "post_attention_layernorm.weight", l, []int{d}, llama.MLPNorm)
		place(&b.gateUp, "mlp.gate_up", l, []int{2 * f, d}, llama.GateProj, llama.UpProj)
		place(&b.down, "mlp.down_proj.weight", l, []int{d, f}, llama.DownProj)
		if err != nil {
			return nil, err
		}
		dc.stagedOf = append(dc.stagedOf, [2]int{first, len(dc.staged)})
	}
	if w.Blocks() == c.Layers {
		first := len(dc.staged)
		place(&dc.norm, "model.norm.weight", -1, []int{d}, llama.FinalNorm)
		// The output projection is only needed for logits: placed (and, staged, converted) lazily.
		dc.stagedOf = append(dc.stagedOf, [2]int{first, len(dc.staged)})
		if err != nil {
			return nil, err
		}
	}
	return dc, nil
}

// stagedWeight is a weight that a pass converts to float32 before its block runs: into a buffer
// of its own, once, while KeepConverted's budget lasts, else into the buffer its key shares with
// the other blocks, every pass.
type stagedWeight struct {
	dst   **engine.Tensor // the blockWeights field the block reads
	key   string          // its name within a block, which names the shared buffer
	name  string          // its checkpoint name ("model.layers.3.mlp.gate_up"), a kept buffer's
	shape []int
	parts []llama.Part
	blk   int
	kept  bool // converted into its own buffer: nothing to do any more
}

// KeepConverted lets the decoder keep up to bytes of float32 conversions of stored F16/BF16 block
// weights across passes, converting each such weight once instead of every pass (decoding runs
// thousands of small passes, where the conversion costs more than the GEMMs). Weights are kept in
// the order the first pass reaches them (block 0 first) while they fit; the others are converted
// every pass into buffers shared by the blocks. It changes no result: a weight converts to the
// same float32 values either way. Call it before the first pass; weights kept already stay kept.
// Nothing converts for float32 checkpoints on the CPU or on a device, where it is a no-op.
func (dc *Decoder) KeepConverted(bytes int64) { dc.keepLeft = max(bytes, 0) }

// Converts reports whether passes convert stored weights to float32 (F16/BF16 block weights on a
// host-memory backend), which KeepConverted can save.
func (dc *Decoder) Converts() bool { return len(dc.staged) > 0 }

// ConvertedBytes is the float32 bytes the decoder holds of converted stored weights: the buffers
// shared by the blocks and converted every pass, and the weights kept converted.
func (dc *Decoder) ConvertedBytes() (perPass, kept int64) {
	for _, t := range dc.staging {
		perPass += 4 * int64(t.Size())
	}
	return perPass, dc.kept
}

// stage binds the staged weights of block l (the final norm's at l = Layers) to float32 buffers
// holding their values, converting those not kept.
func (dc *Decoder) stage(l int) error {
	span := dc.stagedOf[l]
	for i := span[0]; i < span[1]; i++ {
		s := &dc.staged[i]
		if s.kept {
			continue
		}
		t, err := dc.stagingBuffer(s)
		if err == nil {
			x, _ := engine.HostSlice(t)
			err = readParts(dc.w, s.parts, s.blk, x)
		}
		if err != nil {
			return fmt.Errorf("causallm: %s: %w", s.name, err)
		}
		*s.dst = t
	}
	return nil
}

// stagingBuffer is the float32 buffer s converts into: its own when KeepConverted's budget has
// room for it (s is then kept), else the one its key shares.
func (dc *Decoder) stagingBuffer(s *stagedWeight) (*engine.Tensor, error) {
	size := int64(4)
	for _, n := range s.shape {
		size *= int64(n)
	}
	if size <= dc.keepLeft {
		t, err := engine.NewBuffer(dc.be, s.name, s.shape...)
		if err != nil {
			return nil, err
		}
		dc.keepLeft -= size
		dc.kept += size
		s.kept = true
		return t, nil
	}
	t := dc.staging[s.key]
	if t == nil {
		var err error
		if t, err = engine.NewBuffer(dc.be, "staged "+s.key, s.shape...); err != nil {
			return nil, err
		}
		dc.staging[s.key] = t
	}
	return t, nil
}

// place puts the weight that parts of block blk make (stacked by rows; key names it within a
// block, blk -1 outside the blocks) where NewDecoder says: a view of w's float32 memory or a
// buffer uploaded now, or (returned as staged, with no tensor yet) float32 that the passes
// convert it into.
func (dc *Decoder) place(key string, blk int, shape []int, parts ...llama.Part) (t *engine.Tensor, staged *stagedWeight, err error) {
	name := key
	if blk >= 0 {
		name = fmt.Sprintf("model.layers.%d.%s", blk, key)
	}
	fail := func(err error) (*engine.Tensor, *stagedWeight, error) {
		return nil, nil, fmt.Errorf("causallm: decoder: %s: %w", name, err)
	}
	size := 1
	for _, s := range shape {
		size *= s
	}
	w := dc.w
	if !dc.host {
		if t, err = engine.NewBuffer(dc.be, name, shape...); err == nil {
			buf := make([]float32, size)
			if err = readParts(w, parts, blk, buf); err == nil {
				err = t.CopyFrom(buf)
			}
		}
		if err != nil {
			return fail(err)
		}
		return t, nil, nil
	}
	if x, ok := w.Float32(parts[0], blk); ok && cap(x) >= size {
		stacked := true
		for i, p := range parts[1:] {
			y, ok := w.Float32(p, blk)
			off := 0
			for _, q := range parts[:i+1] {
				r, cl, _ := w.Shape(q, blk)
				off += r * cl
			}
			stacked = stacked && ok && len(y) > 0 && &x[:cap(x)][off] == &y[0]
		}
		if stacked {
			if t, err = engine.ViewHost(dc.be, name, x[:size:size], shape...); err != nil {
				return fail(err)
			}
			return t, nil, nil
		}
	}
	return nil, &stagedWeight{key: key, name: name, shape: shape, parts: parts, blk: blk}, nil
}

// headWeight places the output projection on first use; staged, it is converted then, once: its
// buffer is its own.
func (dc *Decoder) headWeight() (*engine.Tensor, error) {
	if dc.head != nil {
		return dc.head, nil
	}
	c := dc.cfg
	t, staged, err := dc.place("lm_head.weight", -1, []int{c.VocabSize, c.Hidden}, llama.LMHead)
	if err != nil {
		return nil, err
	}
	if staged != nil {
		if t, err = engine.NewBuffer(dc.be, staged.name, staged.shape...); err != nil {
			return nil, fmt.Errorf("causallm: output projection: %w", err)
		}
		x, _ := engine.HostSlice(t)
		if err := readParts(dc.w, staged.parts, -1, x); err != nil {
			return nil, fmt.Errorf("causallm: output projection: %w", err)
		}
	}
	dc.head = t
	return t, nil
}

// readParts converts the weights parts of block blk, stacked by rows, into dst.
func readParts(w *llama.Model, parts []llama.Part, blk int, dst []float32) error {
	off := 0
	for _, p := range parts {
		rows, cols, err := w.Shape(p, blk)
		if err == nil && off+rows*cols > len(dst) {
			err = fmt.Errorf("%d values do not fit %d", off+rows*cols, len(dst))
		}
		if err == nil {
			err = w.Read(p, blk, dst[off:off+rows*cols])
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		off += rows * cols
	}
	if off != len(dst) {
		return fmt.Errorf("%d values read into %d", off, len(dst))
	}
	return nil
}

// NewCPUDecoder is NewDecoder on a CPU backend of its own (GOMAXPROCS workers, w's BLAS
// library), which Close stops. Results do not depend on the worker count.
func NewCPUDecoder(w *llama.Model) (*Decoder, error) {
	lib := w.Lib()
	if lib == nil {
		lib = blas.Default()
	}
	// The backend makes the library's calls single-threaded (its workers are the parallelism);
	// Close gives the caller back the thread count it had.
	threads := lib.Threads()
	be, err := cpu.New(cpu.Config{BLAS: lib})
	if err != nil {
		return nil, fmt.Errorf("causallm: decoder: %w", err)
	}
	dc, err := NewDecoder(be, w)
	if err != nil {
		be.Close()
		lib.SetThreads(threads)
		return nil, err
	}
	dc.owned = true
	dc.restore = func() { lib.SetThreads(threads) }
	return dc, nil
}

// OpenDecoder is NewDecoder on be, or NewCPUDecoder when be is nil.
func OpenDecoder(be engine.Backend, w *llama.Model) (*Decoder, error) {
	if be == nil {
		return NewCPUDecoder(w)
	}
	return NewDecoder(be, w)
}

// Close stops the backend NewCPUDecoder made and restores its BLAS library's thread count
// (nothing for a caller's backend); the weights stay the caller's to close.
func (dc *Decoder) Close() error {
	if !dc.owned {
		return nil
	}
	dc.owned = false
	err := dc.be.Close()
	dc.restore()
	return err
}

// Weights is the checkpoint the decoder computes from.
func (dc *Decoder) Weights() *llama.Model { return dc.w }

// CheckInference fails, naming the first missing kernel, when be cannot run the Decoder's forward
// pass: the rotary embeddings (engine.KernelRoPE) and the attention over a KV cache and spans
// (engine.KernelSpanAttention). The CPU has both; a CUDA backend has them when its lm.ptx holds
// ga_rope and ga_span_attention (a PTX built before SpanAttention lacks the latter: rebuild it with
// scripts/build-ptx.sh, or point GELOATTACK_CUDA_PTX at a rebuilt one).
func CheckInference(be engine.Backend) error {
	if _, err := engine.KernelOf[engine.RoPEKernels](be, engine.KernelRoPE); err != nil {
		return fmt.Errorf("causallm: the decoder cannot run on %s: %w", be.Name(), err)
	}
	if _, err := engine.KernelOf[engine.SpanAttentionKernel](be, engine.KernelSpanAttention); err != nil {
		return fmt.Errorf("causallm: the decoder cannot run on %s: %w", be.Name(), err)
	}
	return nil
}

// Config is the decoder's architecture.
func (dc *Decoder) Config() llama.Config { return dc.cfg }

// Blocks is the number of decoder blocks the decoder runs (the checkpoint's, or fewer).
func (dc *Decoder) Blocks() int { return len(dc.blocks) }

// Backend is the backend the decoder computes on.
func (dc *Decoder) Backend() engine.Backend { return dc.be }

// Cache holds the rotated keys and the values of one sequence's processed prefix for every
// block, on the decoder's backend.
type Cache struct {
	k, v []*engine.Tensor // per block: (capacity, kv)
	n    int
	cap  int
}

// NewCache allocates a cache for one sequence of up to capacity tokens.
func (dc *Decoder) NewCache(capacity int) (*Cache, error) {
	if capacity < 1 || capacity > dc.cfg.MaxLen() {
		return nil, fmt.Errorf("causallm: cache of %d tokens: want 1 .. %d (the model's longest sequence)", capacity, dc.cfg.MaxLen())
	}
	c := &Cache{cap: capacity}
	kv := dc.cfg.KVDim()
	for l := range dc.blocks {
		k, err := engine.NewBuffer(dc.be, fmt.Sprintf("cache.%d.k", l), capacity, kv)
		if err != nil {
			return nil, fmt.Errorf("causallm: cache: %w", err)
		}
		v, err := engine.NewBuffer(dc.be, fmt.Sprintf("cache.%d.v", l), capacity, kv)
		if err != nil {
			return nil, fmt.Errorf("causallm: cache: %w", err)
		}
		c.k, c.v = append(c.k, k), append(c.v, v)
	}
	return c, nil
}

// Len is the number of tokens the cache holds.
func (c *Cache) Len() int { return c.n }

// Cap is the number of tokens the cache can hold.
func (c *Cache) Cap() int { return c.cap }

// Reset empties the cache, keeping its memory.
func (c *Cache) Reset() { c.n = 0 }

// Truncate keeps the first n tokens (n <= Len), e.g. to branch from a shared prefix.
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("causallm: truncate a cache of %d tokens to %d", c.n, n)
	}
	c.n = n
	return nil
}

// Clone is an independent copy of the cache (same capacity) on the decoder's backend.
func (dc *Decoder) Clone(c *Cache) (*Cache, error) {
	out, err := dc.NewCache(c.cap)
	if err != nil {
		return nil, err
	}
	if err := dc.CopyCache(out, c); err != nil {
		return nil, err
	}
	return out, nil
}

// CopyCache makes dst hold what src holds (dst's capacity must take it): a branch of src into a
// cache allocated before, since a backend's buffers are never freed (engine.NewBuffer).
func (dc *Decoder) CopyCache(dst, src *Cache) error {
	if dst == nil || src == nil || len(dst.k) != len(dc.blocks) || len(src.k) != len(dc.blocks) {
		return fmt.Errorf("causallm: copy cache: not caches of this decoder")
	}
	if src.n > dst.cap {
		return fmt.Errorf("causallm: copy cache: %d tokens into a cache of %d", src.n, dst.cap)
	}
	kv := dc.cfg.KVDim()
	if src.n > 0 {
		for l := range src.k {
			dc.be.Copy2D(dst.k[l], 0, kv, src.k[l], 0, kv, src.n, kv, false)
			dc.be.Copy2D(dst.v[l], 0, kv, src.v[l], 0, kv, src.n, kv, false)
		}
	}
	dst.n = src.n
	return nil
}

// TapPoint is one place a tap may ask to see: a point of a layer (llama.Tap's arguments).
type TapPoint struct {
	Point llama.Point
	Layer int
}

// TapOnly declares the points the taps of the passes that follow want: a pass calls its tap at
// those points only and brings only their rows to the host (on a device, a block's residual and
// attention input otherwise cross to the host and back for every block). With no points a tap
// sees every point of every layer, as it does before any TapOnly. The rows a tap sees do not
// change. It returns what gives back the declaration before it: defer dc.TapOnly(pts...)().
func (dc *Decoder) TapOnly(pts ...TapPoint) (restore func()) {
	prev := dc.taps
	dc.taps = nil
	if len(pts) > 0 {
		dc.taps = make(map[TapPoint]bool, len(pts))
		for _, p := range pts {
			dc.taps[p] = true
		}
	}
	return func() { dc.taps = prev }
}

// tapped reports whether tap is called at point p of layer l.
func (dc *Decoder) tapped(tap llama.Tap, p llama.Point, l int) bool {
	return tap != nil && (dc.taps == nil || dc.taps[TapPoint{p, l}])
}

// Forward runs the decoder on a batch of token-id sequences, each on its own (positions 0..T-1, as
// if alone: the batch is packed without padding and attention runs per sequence). tap, when not
// nil, sees the rows (every sequence's, in order) at each point of each block, or at the points
// TapOnly declared; an error it returns
// stops the pass and is returned wrapped. logits, when not nil, receives (rows, vocab) of a model
// that holds every block.
func (dc *Decoder) Forward(ctx context.Context, seqs [][]int32, tap llama.Tap, logits []float32) error {
	var n int
	for _, s := range seqs {
		if len(s) == 0 || len(s) > dc.cfg.MaxLen() {
			return fmt.Errorf("causallm: forward: a sequence of %d tokens: want 1 .. %d", len(s), dc.cfg.MaxLen())
		}
		n += len(s)
	}
	pos, first := make([]int32, 0, n), make([]int32, 0, n)
	ids := make([]int32, 0, n)
	for _, s := range seqs {
		start := int32(len(pos))
		for p, id := range s {
			pos = append(pos, int32(p))
			first = append(first, start)
			ids = append(ids, id)
		}
	}
	return dc.run(ctx, ids, pos, first, nil, nil, false, tap, logits)
}

// ForwardNext runs the tokens ids at positions cache.Len().. of the sequence whose prefix the cache
// holds, appending their keys and values to the cache; tap and logits as Forward's.
func (dc *Decoder) ForwardNext(ctx context.Context, cache *Cache, ids []int32, tap llama.Tap, logits []float32) error {
	if len(ids) == 0 || cache.n+len(ids) > cache.cap {
		return fmt.Errorf("causallm: forward next: %d tokens after %d in a cache of %d", len(ids), cache.n, cache.cap)
	}
	pos, first := make([]int32, len(ids)), make([]int32, len(ids))
	for i := range ids {
		pos[i] = int32(cache.n + i)
	}
	return dc.run(ctx, ids, pos, first, []*Cache{cache}, nil, false, tap, logits)
}

// ForwardAlternatives runs every token of ids as the next token after the prefix the cache holds,
// each on its own (row i is the prefix followed by ids[i]), all in one batch so that each weight
// matrix is read once for all of them; the cache is left as it was. tap as Forward's.
func (dc *Decoder) ForwardAlternatives(ctx context.Context, cache *Cache, ids []int32, tap llama.Tap) error {
	if len(ids) == 0 || cache.n >= cache.cap {
		return fmt.Errorf("causallm: forward alternatives: %d tokens after %d in a cache of %d", len(ids), cache.n, cache.cap)
	}
	pos, first := make([]int32, len(ids)), make([]int32, len(ids))
	for i := range ids {
		pos[i], first[i] = int32(cache.n), int32(i)
	}
	return dc.run(ctx, ids, pos, first, []*Cache{cache}, nil, true, tap, nil)
}

// ForwardAlternativesOf is ForwardAlternatives of several prefixes in one batch: the rows are
// every token of ids[0] after the prefix caches[0] holds, then every token of ids[1] after
// caches[1]'s, and so on, each on its own, so that each weight matrix is read once for all of
// them (on a GPU, one launch per op for a whole search step instead of one per prefix). The
// caches are left as they were. On the CPU a row has the bits ForwardAlternatives gives it when
// the GEMMs of the pass have the same shapes, which they do not here (more rows): the rows agree
// to rounding. tap as Forward's, over all the rows.
func (dc *Decoder) ForwardAlternativesOf(ctx context.Context, caches []*Cache, ids [][]int32, tap llama.Tap) error {
	if len(caches) == 0 || len(caches) != len(ids) {
		return fmt.Errorf("causallm: forward alternatives: %d caches for %d lists of tokens", len(caches), len(ids))
	}
	var all, pos, first []int32
	owner := make([]int, 0, len(caches)) // the cache of each row
	for i, c := range caches {
		if c == nil || len(c.k) != len(dc.blocks) {
			return fmt.Errorf("causallm: forward alternatives: prefix %d: not a cache of this decoder", i)
		}
		if len(ids[i]) == 0 || c.n >= c.cap {
			return fmt.Errorf("causallm: forward alternatives: prefix %d: %d tokens after %d in a cache of %d", i, len(ids[i]), c.n, c.cap)
		}
		for _, id := range ids[i] {
			pos, first = append(pos, int32(c.n)), append(first, int32(len(all)))
			all, owner = append(all, id), append(owner, i)
		}
	}
	return dc.run(ctx, all, pos, first, caches, owner, true, tap, nil)
}

// run is the body of the forwards: n = len(ids) rows at positions pos, row r attending to the
// tokens of its cache (caches[owner[r]]; owner nil: caches[0] for every row; no cache when caches
// is empty) and to rows first[r]..r. Without alts the new keys and values join the one cache.
func (dc *Decoder) run(ctx context.Context, ids, pos, first []int32, caches []*Cache, owner []int, alts bool, tap llama.Tap, logits []float32) error {
	c := dc.cfg
	n, d := len(ids), c.Hidden
	for _, id := range ids {
		if id < 0 || int(id) >= c.VocabSize {
			return fmt.Errorf("causallm: forward: token id %d outside the vocabulary of %d", id, c.VocabSize)
		}
	}
	if logits != nil {
		if len(dc.blocks) < c.Layers {
			return fmt.Errorf("causallm: forward: logits need every block, the model holds %d of %d", len(dc.blocks), c.Layers)
		}
		if len(logits) != n*c.VocabSize {
			return fmt.Errorf("causallm: forward: logits of %d values for %d rows of %d", len(logits), n, c.VocabSize)
		}
	}
	resid, err := dc.rowsOf(&dc.resid, "residual stream", n, d) // (n, d)
	if err != nil {
		return err
	}
	rot, err := dc.rowsOf(&dc.rot, "rotation rows", n, c.HeadDim) // (n, hd): cos | sin of each row's position
	if err != nil {
		return err
	}
	x, _ := engine.HostSlice(resid) // the embeddings go straight into a host-memory buffer
	if !dc.host {
		dc.x = grow(dc.x, n*d)
		x = dc.x
	}
	for r, id := range ids {
		if err := dc.w.ReadRows(llama.Embedding, -1, int(id), int(id)+1, x[r*d:(r+1)*d]); err != nil {
			return fmt.Errorf("causallm: forward: embedding of token %d: %w", id, err)
		}
	}
	if !dc.host {
		if err := resid.CopyFrom(x); err != nil {
			return fmt.Errorf("causallm: forward: %w", err)
		}
	}
	if err := rot.CopyFrom(dc.rope.rows(pos, c.HeadDim)); err != nil {
		return fmt.Errorf("causallm: forward: %w", err)
	}
	var cache *Cache // the one cache, when there is one
	if len(caches) == 1 {
		cache = caches[0]
	}
	// segs: the cache rows each row sees; several caches are copied one after another into the
	// joint buffers block by block, cache i from row offs[i].
	segs := make([]engine.CacheSegment, n)
	offs := make([]int, len(caches)+1)
	for i, ch := range caches {
		offs[i+1] = offs[i] + ch.n
	}
	for r := range segs {
		switch {
		case owner != nil:
			segs[r] = engine.CacheSegment{From: offs[owner[r]], Len: caches[owner[r]].n}
		case cache != nil:
			segs[r] = engine.CacheSegment{Len: cache.n}
		}
	}
	if len(caches) > 1 {
		if err := dc.growJoint(offs[len(caches)]); err != nil {
			return err
		}
	}
	for l := range dc.blocks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if dc.tapped(tap, llama.Residual, l) {
			if err := dc.tapRows(tap, llama.Residual, l, resid, &dc.x); err != nil {
				return err
			}
		}
		if err := dc.stage(l); err != nil {
			return err
		}
		tp := dc.tp
		tp.Reset()
		a := tp.RMSNorm(resid, dc.blocks[l].attnNorm, float32(c.RMSEps)) // (n, d)
		if dc.tapped(tap, llama.AttnInput, l) {
			if err := dc.tapRows(tap, llama.AttnInput, l, a, &dc.a); err != nil {
				return err
			}
		}
		var kc, vc *engine.Tensor
		kv := c.KVDim()
		switch {
		case cache != nil:
			kc, vc = cache.k[l], cache.v[l]
		case len(caches) > 1:
			kc, vc = dc.jointK, dc.jointV
			for i, ch := range caches {
				if ch.n > 0 {
					dc.be.Copy2D(kc, offs[i]*kv, kv, ch.k[l], 0, kv, ch.n, kv, false)
					dc.be.Copy2D(vc, offs[i]*kv, kv, ch.v[l], 0, kv, ch.n, kv, false)
				}
			}
		}
		k, v, y := layer(tp, c, &dc.blocks[l], resid, a, rot, func(q, k, v *engine.Tensor) *engine.Tensor {
			return tp.SpanAttentionSegments(q, k, v, kc, vc, first, segs, c.Heads, c.KVHeads) // (n, q)
		})
		if cache != nil && !alts && tp.Err() == nil {
			dc.be.Copy2D(kc, cache.n*kv, kv, k, 0, kv, n, kv, false)
			dc.be.Copy2D(vc, cache.n*kv, kv, v, 0, kv, n, kv, false)
		}
		// The block's output becomes the next block's input on the backend: y (n, d) -> resid.
		if err := tp.Err(); err != nil {
			return fmt.Errorf("causallm: forward: block %d: %w", l, err)
		}
		if err := engine.CopyRows(resid, 0, y, 0, n); err != nil {
			return fmt.Errorf("causallm: forward: block %d: %w", l, err)
		}
	}
	if cache != nil && !alts {
		cache.n += n
	}
	if len(dc.blocks) < c.Layers {
		if dc.tapped(tap, llama.Residual, len(dc.blocks)) {
			return dc.tapRows(tap, llama.Residual, len(dc.blocks), resid, &dc.x)
		}
		return nil
	}
	final := dc.tapped(tap, llama.Residual, c.Layers)
	if !final && logits == nil {
		return nil // nobody reads the final norm's rows
	}
	if err := dc.stage(c.Layers); err != nil {
		return err
	}
	tp := dc.tp
	tp.Reset()
	xn := tp.RMSNorm(resid, dc.norm, float32(c.RMSEps)) // (n, d)
	if final {
		if err := dc.tapRows(tap, llama.Residual, c.Layers, xn, &dc.a); err != nil {
			return err
		}
	}
	if logits != nil {
		// logits: (n, vocab) = xn (n, d) . head^T (d, vocab)
		head, err := dc.headWeight()
		if err != nil {
			return err
		}
		if err := dc.download(tp.Linear(xn, head), logits); err != nil {
			return err
		}
	}
	return nil
}

// growJoint makes the joint cache buffers hold at least rows rows.
func (dc *Decoder) growJoint(rows int) error {
	if dc.jointK != nil && dc.jointK.Dim(0) >= rows {
		return nil
	}
	rows = max(rows, 2*dc.jointRows())
	kv := dc.cfg.KVDim()
	k, err := engine.NewBuffer(dc.be, "joint cache k", rows, kv)
	if err != nil {
		return fmt.Errorf("causallm: forward alternatives: %w", err)
	}
	v, err := engine.NewBuffer(dc.be, "joint cache v", rows, kv)
	if err != nil {
		return fmt.Errorf("causallm: forward alternatives: %w", err)
	}
	dc.jointK, dc.jointV = k, v
	return nil
}

// jointRows is the rows the joint cache buffers hold.
func (dc *Decoder) jointRows() int {
	if dc.jointK == nil {
		return 0
	}
	return dc.jointK.Dim(0)
}

// layer records one decoder block on tp, the one definition the training model and the Decoder
// share: x (n, d) the residual stream, a = RMSNorm(x) its attention input, table (n, hd) or
// (T, hd) each row's rotation (engine.RoPE), attend the attention of the rotated queries (n, q)
// over keys and values (n, kv) (causal within each window when training; over the cache and a
// span of rows when decoding). It returns the rotated keys and the values (for a cache) and the
// block's output x + attention + MLP (n, d).
func layer(tp *engine.Tape, c llama.Config, b *blockWeights, x, a, table *engine.Tensor, attend func(q, k, v *engine.Tensor) *engine.Tensor) (k, v, y *engine.Tensor) {
	n, hd, eps := x.Rows(), c.HeadDim, float32(c.RMSEps)
	var q *engine.Tensor
	if b.qkv != nil {
		var qkv [3]*engine.Tensor // (n, q) each
		tp.LinearStack(a, b.qkv, qkv[:])
		q, k, v = qkv[0], qkv[1], qkv[2]
	} else {
		q, k, v = tp.Linear(a, b.q), tp.Linear(a, b.k), tp.Linear(a, b.v) // (n, q), (n, kv), (n, kv)
	}
	if b.qb != nil {
		q, k, v = tp.BroadcastAdd(q, nil, b.qb), tp.BroadcastAdd(k, nil, b.kb), tp.BroadcastAdd(v, nil, b.vb)
	}
	if b.qNorm != nil {
		// One RMSNorm over each head's hd values: (n*heads, hd).
		q = tp.Reshape(tp.RMSNorm(tp.Reshape(q, n*c.Heads, hd), b.qNorm, eps), n, c.QDim())
		k = tp.Reshape(tp.RMSNorm(tp.Reshape(k, n*c.KVHeads, hd), b.kNorm, eps), n, c.KVDim())
	}
	q, k = tp.RoPE(q, table, c.Heads), tp.RoPE(k, table, c.KVHeads)
	x = tp.Add(x, tp.Linear(attend(q, k, v), b.o))
	h := tp.RMSNorm(x, b.mlpNorm, eps)
	var gu [2]*engine.Tensor // (n, f) each
	tp.LinearStack(h, b.gateUp, gu[:])
	y = tp.Add(x, tp.Linear(tp.SwiGLU(gu[0], gu[1]), b.down))
	return k, v, y
}

// download copies t to dst, first reporting the tape's error (an op refused).
func (dc *Decoder) download(t *engine.Tensor, dst []float32) error {
	if err := dc.tp.Err(); err != nil {
		return fmt.Errorf("causallm: forward: %w", err)
	}
	return t.CopyTo(dst)
}

// tapRows calls tap at point p of layer l with the rows of t (n, d): t's own memory on a
// host-memory backend, else a download into *buf.
func (dc *Decoder) tapRows(tap llama.Tap, p llama.Point, l int, t *engine.Tensor, buf *[]float32) error {
	if err := dc.tp.Err(); err != nil {
		return fmt.Errorf("causallm: forward: %w", err)
	}
	x, _ := engine.HostSlice(t)
	if !dc.host {
		*buf = grow(*buf, t.Size())
		x = *buf
		if err := t.CopyTo(x); err != nil {
			return fmt.Errorf("causallm: forward: %w", err)
		}
	}
	if err := tap(p, l, x); err != nil {
		return fmt.Errorf("forward: layer %d %s: %w", l, p, err)
	}
	return nil
}

// rowsOf is the first n rows (n, cols) of the buffer *buf, which is made larger first when it
// holds fewer: to exactly n rows on a host-memory backend (the old buffer is garbage), to at least
// twice its rows on a device, whose buffers are held until the backend closes.
func (dc *Decoder) rowsOf(buf **engine.Tensor, name string, n, cols int) (*engine.Tensor, error) {
	if *buf == nil || (*buf).Dim(0) < n {
		rows := n
		if !dc.host && *buf != nil {
			rows = max(n, 2*(*buf).Dim(0))
		}
		t, err := engine.NewBuffer(dc.be, name, rows, cols)
		if err != nil {
			return nil, fmt.Errorf("causallm: forward: %w", err)
		}
		*buf = t
	}
	t, err := engine.BufferRows(*buf, 0, n)
	if err != nil {
		return nil, fmt.Errorf("causallm: forward: %w", err)
	}
	return t, nil
}

// ropeCache holds the rotation of every position asked so far, as cos | sin rows (pos, hd),
// angles computed in float64 and rounded once (engine.RoPETable's rule, with the config's
// scaled frequencies).
type ropeCache struct {
	inv   []float64
	table []float32 // (have, hd)
	rowsB []float32
}

// rows gathers the rotation of each position into an (n, hd) table.
func (rc *ropeCache) rows(pos []int32, hd int) []float32 {
	half := hd / 2
	need := 0
	for _, p := range pos {
		need = max(need, int(p)+1)
	}
	have := len(rc.table) / hd
	if need > have {
		n := max(need, 2*have)
		t := make([]float32, n*hd)
		copy(t, rc.table)
		for p := have; p < n; p++ {
			for i, f := range rc.inv {
				s, c := math.Sincos(float64(p) * f)
				t[p*hd+i], t[p*hd+half+i] = float32(c), float32(s)
			}
		}
		rc.table = t
	}
	rc.rowsB = grow(rc.rowsB, len(pos)*hd)
	out := rc.rowsB[:len(pos)*hd]
	for r, p := range pos {
		copy(out[r*hd:(r+1)*hd], rc.table[int(p)*hd:int(p+1)*hd])
	}
	return out
}

func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// WorkspaceBytes bounds what a Decoder holds besides its weights for passes of at most rows rows
// over sequences (or a cache and a span) of at most maxLen tokens, on a CPU backend of workers
// workers: one block's activations on its tape (each block runs on a fresh one; the tape's arena
// grows by doubling chunks, so it may hold up to twice the activations and a first chunk of
// 1 MiB), the residual stream's buffer (on a device: the host rows of the embeddings and a tap's
// rows instead), the rotation rows and table, and each worker's attention scratch (scores of up to maxLen queries over maxLen keys,
// and the keys and values a span after a cache gathers). Logits are the caller's.
func WorkspaceBytes(c llama.Config, rows, maxLen, workers int) int64 {
	n, t, hd := int64(rows), int64(maxLen), int64(c.HeadDim)
	host := 2*int64(c.Hidden) + hd
	scratch := int64(max(workers, 1)) * (t*t + 2*t*hd)
	return 2*ActivationBytes(c, rows) + 4<<20 + 4*(n*host+t*hd+scratch)
}

// ActivationBytes is one block's activations on a Decoder's tape for a pass of rows rows.
func ActivationBytes(c llama.Config, rows int) int64 {
	d, f, q, kv := int64(c.Hidden), int64(c.Intermediate), int64(c.QDim()), int64(c.KVDim())
	// Per row: the attention norm (the input x is the residual buffer's, outside the tape); q,
	// k, v (and their biases, q/k norms, rotations); the attention output, o's product and the
	// sum; the MLP norm, gate|up, the activation, down's product and the sum; the span start (the
	// rotation row is a buffer's too).
	perRow := 6*d + 5*q + 7*kv + 3*f + int64(c.Heads+c.KVHeads) + 4
	return 4 * int64(rows) * perRow
}

// TapeBytes is what the decoder's tape holds (its arena's chunks) and the most one block's
// activations took.
func (dc *Decoder) TapeBytes() (held, peak int64) { return dc.tp.ArenaBytes() }

// HostBytes is the host rows the decoder holds: the rotation table and rows, and the residual
// stream's and rotation rows' buffers on a host-memory backend, or on a device the embeddings'
// and tapped rows' host copies.
func (dc *Decoder) HostBytes() int64 {
	n := cap(dc.x) + cap(dc.a) + cap(dc.rope.table) + cap(dc.rope.rowsB)
	if dc.host {
		for _, t := range []*engine.Tensor{dc.resid, dc.rot} {
			if t != nil {
				n += t.Size()
			}
		}
	}
	return 4 * int64(n)
}
