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
// mask[b, i] <= 0.5 are written as zeros (mask may be null).
extern "C" __global__ void ga_split_heads(float* y, const float* x, const float* mask, int B, int N, int heads,
                                          int dh) {
  long n = (long)B * N * heads * dh;
  int h = heads * dh;
  GA_FOR(i, n) {  // i indexes y
    long d = i % dh, t = i / dh;
    long row = t % N, bh = t / N;
    long hd = bh % heads, b = bh / heads;
    bool pad = mask && mask[b * N + row] <= 0.5f;
    y[i] = pad ? 0.f : x[(b * N + row) * h + hd * dh + d];
  }
}

// merge_heads: x (B, heads, N, dh) -> y (B, N, heads*dh), adding when asked.
extern "C" __global__ void ga_merge_heads(float* y, const float* x, int B, int N, int heads, int dh,
                                          int accumulate) {
  long n = (long)B * N * heads * dh;
  int h = heads * dh;
  GA_FOR(i, n) {  // i indexes y
    long c = i % h, t = i / h;
    long row = t % N, b = t / N;
    long hd = c / dh, d = c % dh;
    float v = x[((b * heads + hd) * N + row) * dh + d];
    y[i] = accumulate ? y[i] + v : v;
  }
}

// Masked softmax in place over rows of S (B*heads*Nq rows of Nk scores,
// already scaled); lse[r] = log-sum-exp of the real scores (-Inf and an
// all-zero row when every key is padded). One block per row.
extern "C" __global__ void ga_attn_softmax(float* s, float* lse, const float* mask, int heads, int Nq, int Nk) {
  long r = blockIdx.x;
  long b = r / ((long)heads * Nq);
  float* row = s + r * Nk;
  const float* m = mask ? mask + b * Nk : nullptr;
  float l = ga_block_lse(row, m, Nk);
  if (threadIdx.x == 0) lse[r] = l;
  bool empty = isinf(l) && l < 0.f;
  for (int j = threadIdx.x; j < Nk; j += blockDim.x) {
    bool real = !m || m[j] > 0.5f;
    row[j] = (real && !empty) ? __expf(row[j] - l) : 0.f;
  }
}

// P = exp(S - lse) for real keys, 0 for padded keys and empty rows; in place.
// Elementwise, grid-stride over B*heads*Nq*Nk.
extern "C" __global__ void ga_attn_recompute_p(float* s, const float* lse, const float* mask, int heads, int Nq,
                                               int Nk, long rows) {
  long n = rows * Nk;
  GA_FOR(i, n) {
    long r = i / Nk, j = i % Nk;
    long b = r / ((long)heads * Nq);
    float l = lse[r];
    bool real = !mask || mask[b * Nk + j] > 0.5f;
    s[i] = (real && !(isinf(l) && l < 0.f)) ? __expf(s[i] - l) : 0.f;
  }
}

// dS = P * (dP - D) * scale in place of dP, with D = sum_c dO[b, q, head c] *
// O[b, q, head c] read from the merged (B, Nq, h) layouts. One block per row
// of the (B*heads*Nq, Nk) matrices.
extern "C" __global__ void ga_attn_softmax_bwd(float* dp, const float* p, const float* dout, const float* out,
                                               int heads, int Nq, int Nk, int dh, float scale) {
  long r = blockIdx.x;
  long q = r % Nq, bh = r / Nq;
  long hd = bh % heads, b = bh / heads;
  long h = (long)heads * dh;
  const float* orow = out + (b * Nq + q) * h + hd * dh;
  const float* grow = dout + (b * Nq + q) * h + hd * dh;
  float d = 0.f;
  for (int c = threadIdx.x; c < dh; c += blockDim.x) d += orow[c] * grow[c];
  d = ga_block_sum(d);
  float* dr = dp + r * Nk;
  const float* pr = p + r * Nk;
  for (int j = threadIdx.x; j < Nk; j += blockDim.x) dr[j] = pr[j] * (dr[j] - d) * scale;
}
