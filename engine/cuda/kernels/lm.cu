// Kernels of the language model's ops (issue 27): rotary embeddings
// (engine/op_rope.go), the causal softmax of CausalAttention
// (op_causal_attention.go; its products are cuBLAS GEMMs, as in
// attention.cu), the embedding lookup and its scatter-add gradient
// (op_embedding.go) and the chunked vocabulary cross-entropy (op_xent.go; the
// chunk's logits come from the backend's GEMM). Token ids arrive as float32
// (exact below 2^24, engine.maxTokenID). Launch with GA_BLOCK threads unless
// a comment says otherwise.
//
// Causal attention, with grouped-query heads (group = heads / kvHeads query
// heads per kv head): q is split to Qh (B, heads, T, hd) and k, v to Kh, Vh
// (B, kvHeads, T, hd), so the group query heads of kv head g are
// consecutive and one strided-batched GEMM over B*kvHeads computes
// S = scale Qh_g Kh_g^T as (group*T, T) blocks: the rows of S are then
// (B*heads*T) rows of T scores, row r = (b*heads + j)*T + t, query position
// t = r % T, which sees keys 0..t.
//   forward:  P, lse = ga_causal_softmax(S); Oh = P Vh; o = merge_heads(Oh)
//   backward: P = ga_causal_recompute_p(S, lse); dVh = P^T dOh (the GEMM
//             sums the group's heads); dP = dOh Vh^T;
//             dS = ga_causal_softmax_bwd(dP, P, do, o); dQh = dS Kh;
//             dKh = dS^T Qh
// Scores above the diagonal get probability exactly 0 (and dS 0), so no
// output or gradient depends on a later position.
#include "common.cuh"

// RoPE: x, y (M, heads*hd), table (T, hd) holding [cos | sin] of each
// position's angles; row r is position r % T. Each thread rotates pairs
// (i, i + hd/2) of one head: y_i = x_i cos - x_{i+hd/2} sin,
// y_{i+hd/2} = x_{i+hd/2} cos + x_i sin. Grid-stride over M*heads*hd/2 pairs.
extern "C" __global__ void ga_rope(float* y, const float* x, const float* table, long M, int T, int heads, int hd) {
  int half = hd / 2;
  long per = (long)heads * half;  // pairs per row
  long n = M * per;
  GA_FOR(p, n) {
    long r = p / per;
    int rem = (int)(p - r * per);
    int j = rem / half, i = rem - j * half;
    const float* tr = table + (r % T) * hd;
    float c = tr[i], s = tr[half + i];
    long o = r * heads * hd + (long)j * hd + i;
    float a = x[o], b = x[o + half];
    y[o] = a * c - b * s;
    y[o + half] = b * c + a * s;
  }
}

// RoPE backward: dx += the inverse rotation (angle -p f_i) of dy.
extern "C" __global__ void ga_rope_bwd(float* dx, const float* dy, const float* table, long M, int T, int heads,
                                       int hd) {
  int half = hd / 2;
  long per = (long)heads * half;
  long n = M * per;
  GA_FOR(p, n) {
    long r = p / per;
    int rem = (int)(p - r * per);
    int j = rem / half, i = rem - j * half;
    const float* tr = table + (r % T) * hd;
    float c = tr[i], s = tr[half + i];
    long o = r * heads * hd + (long)j * hd + i;
    float a = dy[o], b = dy[o + half];
    dx[o] += a * c + b * s;
    dx[o + half] += b * c - a * s;
  }
}

// The causal row kernels give each row of the (rows = B*heads*T, T) score
// matrices to one warp (GA_BLOCK/32 rows per block); row r holds query
// position t = r % T, whose keys are 0..t.

// Causal softmax in place: row r's scores 0..t become probabilities, the
// rest 0; lse[r] = log-sum-exp of scores 0..t (NaN when one is NaN).
extern "C" __global__ void ga_causal_softmax(float* s, float* lse, int T, int rows) {
  int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  int n = r % T + 1;  // keys 0..t
  float* row = s + (long)r * T;
  float mx = -INFINITY;
  bool nan = false;
  for (int j = lane; j < n; j += 32) {
    float v = row[j];
    nan |= isnan(v);
    mx = fmaxf(mx, v);
  }
  mx = ga_warp_max(mx);
  float l;
  if (__any_sync(0xffffffffu, nan)) {
    l = NAN;
  } else if (isinf(mx)) {
    l = mx;
  } else {
    float sum = 0.f;
    for (int j = lane; j < n; j += 32) sum += __expf(row[j] - mx);
    l = mx + logf(ga_warp_sum(sum));
  }
  if (lane == 0) lse[r] = l;
  for (int j = lane; j < T; j += 32) row[j] = j < n ? __expf(row[j] - l) : 0.f;
}

// P = exp(S - lse) on and below the diagonal, 0 above it; in place.
extern "C" __global__ void ga_causal_recompute_p(float* s, const float* lse, int T, int rows) {
  int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  int n = r % T + 1;
  float* row = s + (long)r * T;
  float l = lse[r];
  for (int j = lane; j < T; j += 32) row[j] = j < n ? __expf(row[j] - l) : 0.f;
}

// dS = P * (dP - D) * scale in place of dP on and below the diagonal, 0
// above it, with D = sum_c dO[b, t, head c] * O[b, t, head c] read from the
// merged (B, T, heads*hd) layouts.
extern "C" __global__ void ga_causal_softmax_bwd(float* dp, const float* p, const float* dout, const float* out,
                                                 int heads, int T, int hd, float scale, int rows) {
  int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  int t = r % T, bh = r / T;
  int j = bh % heads, b = bh / heads;
  long w = (long)heads * hd;
  const float* orow = out + ((long)b * T + t) * w + (long)j * hd;
  const float* grow = dout + ((long)b * T + t) * w + (long)j * hd;
  float d = 0.f;
  for (int c = lane; c < hd; c += 32) d += orow[c] * grow[c];
  d = ga_warp_sum(d);
  float* dr = dp + (long)r * T;
  const float* pr = p + (long)r * T;
  for (int c = lane; c < T; c += 32) dr[c] = c <= t ? pr[c] * (dr[c] - d) * scale : 0.f;
}

// Embedding: y[t, j] = table[ids[t], j]; table (V, d), ids (T), y (T, d).
// Grid-stride over T*d.
extern "C" __global__ void ga_embedding(float* y, const float* table, const float* ids, int T, int d) {
  long n = (long)T * d;
  GA_FOR(i, n) {
    long t = i / d;
    long j = i - t * d;
    y[i] = table[(long)ids[t] * d + j];
  }
}

// Embedding backward: dtable[ids[t], j] += dy[t, j] for every t. Launch grid
// (ceil(d/GA_BLOCK), buckets): the thread of column j and bucket blockIdx.y
// walks the tokens in order and adds those whose id falls in its bucket
// (id % buckets), so every element of dtable is updated by one thread, in
// token order: no atomics, the same sums (bit for bit) as the CPU's serial
// loop, and the same result run to run.
extern "C" __global__ void ga_embedding_bwd(float* dtable, const float* dy, const float* ids, int T, int d) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  long bucket = blockIdx.y, buckets = gridDim.y;
  if (j >= d) return;
  for (int t = 0; t < T; t++) {
    long id = (long)ids[t];
    if (id % buckets != bucket) continue;
    dtable[id * d + j] += dy[(long)t * d + j];
  }
}

// Cross-entropy forward, one block per row of the chunk's logits (c, V):
// lse[r] = log sum_v exp(logits[r, v]), nll[r] = lse[r] - logits[r, targets[r]].
extern "C" __global__ void ga_xent(float* nll, float* lse, const float* logits, const float* targets, int V) {
  long r = blockIdx.x;
  const float* row = logits + r * V;
  float l = ga_block_lse(row, nullptr, V);
  if (threadIdx.x == 0) {
    lse[r] = l;
    nll[r] = l - row[(long)targets[r]];
  }
}

// Cross-entropy backward, in place: logits[r, v] <- g exp(logits[r, v] -
// lse[r]) - g [v == targets[r]], g = scale * dy[0] (dy the device scalar).
// A row with a non-finite lse becomes NaN, as on the CPU. Grid-stride over
// n = c*V.
extern "C" __global__ void ga_xent_bwd(float* logits, const float* lse, const float* targets, const float* dy,
                                       float scale, int V, long n) {
  float g = scale * dy[0];
  GA_FOR(i, n) {
    long r = i / V;
    float l = lse[r];
    if (isinf(l) || isnan(l)) l = NAN;
    float v = g * __expf(logits[i] - l);
    if (i - r * V == (long)targets[r]) v -= g;
    logits[i] = v;
  }
}

// Span attention (op_span_attention.go; forward only, for inference): one
// block per (query row r, head j), blockIdx.x = r*heads + j, launched with
// GA_BLOCK threads (a multiple of 32 up to GA_BLOCK works: the host
// emulation of TestSpanKernelEmulated runs fewer). spans holds each row's
// [first, from, cached] as float32s (exact below 2^24). Row r sees
// L = cached + r - first + 1 keys of kv head g = j / (heads/kvHeads): cache
// rows from..from+cached-1 of kc, vc, then new rows first..r of k, v. Warp w of the
// block's nw (blockDim.x/32, at most GA_SPAN_WARPS) takes keys w, w + nw,
// ...; its lanes split the head's columns (lane c
// holds columns c, c+32, ..., so hd <= GA_SPAN_MAX_HD), a score is a warp
// sum (every lane gets it, so the branches below are warp-uniform), and
// the warp keeps an online softmax over its keys: running max m, sum l of
// exp(s - m) and acc = sum exp(s - m) v. The warps' (m, l, acc) are merged
// in warp order through shared memory. Every sum has a fixed order: the
// same bits run to run. A NaN or +Inf score makes the row's output NaN, a
// -Inf score weighs 0, and a row of -Inf scores only is NaN (the CPU's
// max-subtracted softmax gives the same).
#define GA_SPAN_MAX_HD 256
#define GA_SPAN_COLS (GA_SPAN_MAX_HD / 32)
#define GA_SPAN_WARPS (GA_BLOCK / 32)

extern "C" __global__ void ga_span_attention(float* o, const float* q, const float* k, const float* v,
                                             const float* kc, const float* vc, const float* spans, int heads,
                                             int kvHeads, int hd, float scale) {
  __shared__ float qs[GA_SPAN_MAX_HD];
  __shared__ float wm[GA_SPAN_WARPS], wl[GA_SPAN_WARPS];
  __shared__ int wbad[GA_SPAN_WARPS];
  __shared__ float wacc[GA_SPAN_WARPS][GA_SPAN_MAX_HD];
  long r = blockIdx.x / heads;
  int j = (int)(blockIdx.x - r * heads);
  int g = j / (heads / kvHeads);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  long qw = (long)heads * hd, kw = (long)kvHeads * hd;
  long f0 = (long)spans[3 * r], from = (long)spans[3 * r + 1], cached = (long)spans[3 * r + 2];
  long L = cached + (r - f0) + 1;
  for (int c = threadIdx.x; c < hd; c += blockDim.x) qs[c] = q[r * qw + (long)j * hd + c];
  __syncthreads();

  float m = -INFINITY, l = 0.f, acc[GA_SPAN_COLS];
  int bad = 0;
#pragma unroll
  for (int t = 0; t < GA_SPAN_COLS; t++) acc[t] = 0.f;
  for (long i = warp; i < L; i += nw) {
    const float* kr;
    const float* vr;
    if (i < cached) {
      kr = kc + (from + i) * kw + (long)g * hd;
      vr = vc + (from + i) * kw + (long)g * hd;
    } else {
      long row = f0 + (i - cached);
      kr = k + row * kw + (long)g * hd;
      vr = v + row * kw + (long)g * hd;
    }
    float d = 0.f;
#pragma unroll
    for (int t = 0; t < GA_SPAN_COLS; t++) {
      int c = lane + 32 * t;
      if (c < hd) d += qs[c] * kr[c];
    }
    float s = scale * ga_warp_sum(d);
    if (isnan(s) || s == INFINITY) {
      bad = 1;
      continue;
    }
    if (s == -INFINITY) continue;  // weight 0
    float p = 1.f, corr = 1.f;     // weight of this key and rescaling of the past, against the new max
    if (s > m) {
      corr = expf(m - s);  // 0 for the first key (m = -Inf)
      m = s;
    } else {
      p = expf(s - m);
    }
    l = l * corr + p;
#pragma unroll
    for (int t = 0; t < GA_SPAN_COLS; t++) {
      int c = lane + 32 * t;
      if (c < hd) acc[t] = acc[t] * corr + p * vr[c];
    }
  }
  if (lane == 0) {
    wm[warp] = m;
    wl[warp] = l;
    wbad[warp] = bad;
  }
#pragma unroll
  for (int t = 0; t < GA_SPAN_COLS; t++) {
    int c = lane + 32 * t;
    if (c < hd) wacc[warp][c] = acc[t];
  }
  __syncthreads();

  float M = -INFINITY;
  int anyBad = 0;
  for (int w = 0; w < nw; w++) {
    M = fmaxf(M, wm[w]);
    anyBad |= wbad[w];
  }
  float Z = 0.f;  // 0 when no key had a finite score: the output is then 0 * Inf = NaN
  for (int w = 0; w < nw; w++)
    if (wm[w] != -INFINITY) Z += wl[w] * expf(wm[w] - M);
  float inv = 1.f / Z;
  for (int c = threadIdx.x; c < hd; c += blockDim.x) {
    float sum = 0.f;
    for (int w = 0; w < nw; w++)
      if (wm[w] != -INFINITY) sum += wacc[w][c] * expf(wm[w] - M);
    o[r * qw + (long)j * hd + c] = anyBad ? NAN : sum * inv;
  }
}
