// Attention helpers. The products run in cuBLAS (strided batched SGEMM over
// batch*heads); these kernels do the layout changes and the masked softmax:
//
// forward:  Qh, Kh, Vh = split_heads(q), split_heads(k, mask), split_heads(v, mask)
//           S = scale Qh Kh^T            (batched GEMM, (Nq, Nk) per head)
//           P, lse = ga_attn_softmax(S)  (in place)
//           Oh = P Vh; o = merge_heads(Oh)
// backward: S = scale Qh Kh^T; P = ga_attn_recompute_p(S, lse)
//           dVh = P^T dOh; dP = dOh Vh^T; dS = ga_attn_softmax_bwd(dP, P, do, o)
//           dQh = dS Kh; dKh = dS^T Qh; merge_heads(..., accumulate) into dq, dk, dv
//
// Padded keys (mask <= 0.5) get probability exactly 0 and their K and V rows
// are zeroed when split, so padding never reaches the output, not even as
// NaN or Inf (0 * NaN would), and padded keys get zero gradient, as on the CPU.
#include "common.cuh"

// split_heads: x (B, N, heads*dh) -> y (B, heads, N, dh); rows i with
// mask[b, i] <= 0.5 are written as zeros (mask may be null). 32-bit index
// arithmetic: the caller checks B*N*heads*dh < 2^31.
extern "C" __global__ void ga_split_heads(float* y, const float* x, const float* mask, int B, int N, int heads,
                                          int dh) {
  unsigned n = (unsigned)B * N * heads * dh;
  unsigned h = heads * dh;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {  // i indexes x
    unsigned c = i % h, t = i / h;  // t = b*N + row
    unsigned b = t / N, row = t % N;
    unsigned hd = c / dh, d = c % dh;
    bool pad = mask && mask[t] <= 0.5f;
    y[((b * heads + hd) * N + row) * dh + d] = pad ? 0.f : x[i];
  }
}

// merge_heads: x (B, heads, N, dh) -> y (B, N, heads*dh), adding when asked.
extern "C" __global__ void ga_merge_heads(float* y, const float* x, int B, int N, int heads, int dh,
                                          int accumulate) {
  unsigned n = (unsigned)B * N * heads * dh;
  unsigned h = heads * dh;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {  // i indexes y
    unsigned c = i % h, t = i / h;
    unsigned b = t / N, row = t % N;
    unsigned hd = c / dh, d = c % dh;
    float v = x[((b * heads + hd) * N + row) * dh + d];
    y[i] = accumulate ? y[i] + v : v;
  }
}

// The row kernels below give each row of the (B*heads*Nq, Nk) score
// matrices to one warp (GA_BLOCK/32 rows per block): rows are short (Nk is
// a set's size), so warp shuffles replace block-wide reductions.

// Masked softmax in place over rows of S (rows = B*heads*Nq rows of Nk
// scores, already scaled); lse[r] = log-sum-exp of the real scores (-Inf and
// an all-zero row when every key is padded; NaN when a real score is NaN).
extern "C" __global__ void ga_attn_softmax(float* s, float* lse, const float* mask, int heads, int Nq, int Nk,
                                           int rows) {
  int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  int b = r / (heads * Nq);
  float* row = s + (long)r * Nk;
  const float* m = mask ? mask + (long)b * Nk : nullptr;
  float mx = -INFINITY;
  bool nan = false;
  for (int j = lane; j < Nk; j += 32)
    if (!m || m[j] > 0.5f) {
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
    for (int j = lane; j < Nk; j += 32)
      if (!m || m[j] > 0.5f) sum += __expf(row[j] - mx);
    l = mx + logf(ga_warp_sum(sum));
  }
  if (lane == 0) lse[r] = l;
  bool empty = isinf(l) && l < 0.f;
  for (int j = lane; j < Nk; j += 32) {
    bool real = !m || m[j] > 0.5f;
    row[j] = (real && !empty) ? __expf(row[j] - l) : 0.f;
  }
}

// P = exp(S - lse) for real keys, 0 for padded keys and empty rows; in place.
// One warp per row.
extern "C" __global__ void ga_attn_recompute_p(float* s, const float* lse, const float* mask, int heads, int Nq,
                                               int Nk, int rows) {
  int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  int b = r / (heads * Nq);
  float* row = s + (long)r * Nk;
  const float* m = mask ? mask + (long)b * Nk : nullptr;
  float l = lse[r];
  bool empty = isinf(l) && l < 0.f;
  for (int j = lane; j < Nk; j += 32) {
    bool real = !m || m[j] > 0.5f;
    row[j] = (real && !empty) ? __expf(row[j] - l) : 0.f;
  }
}

// dS = P * (dP - D) * scale in place of dP, with D = sum_c dO[b, q, head c] *
// O[b, q, head c] read from the merged (B, Nq, h) layouts. One warp per row
// of the (B*heads*Nq, Nk) matrices.
extern "C" __global__ void ga_attn_softmax_bwd(float* dp, const float* p, const float* dout, const float* out,
                                               int heads, int Nq, int Nk, int dh, float scale, int rows) {
  int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  int q = r % Nq, bh = r / Nq;
  int hd = bh % heads, b = bh / heads;
  long h = (long)heads * dh;
  const float* orow = out + ((long)b * Nq + q) * h + (long)hd * dh;
  const float* grow = dout + ((long)b * Nq + q) * h + (long)hd * dh;
  float d = 0.f;
  for (int c = lane; c < dh; c += 32) d += orow[c] * grow[c];
  d = ga_warp_sum(d);
  float* dr = dp + (long)r * Nk;
  const float* pr = p + (long)r * Nk;
  for (int j = lane; j < Nk; j += 32) dr[j] = pr[j] * (dr[j] - d) * scale;
}
