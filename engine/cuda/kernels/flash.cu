// Fused attention for head widths dh <= 32 (every preset has dh = 32): the
// scores, the masked online softmax and the products in one kernel per
// pass, so the (Nq, Nk) score matrices never reach device memory (the
// unfused path in attention.cu writes and reads them several times per
// layer). fp32 on the CUDA cores.
//
// One thread owns one row (a query in ga_flash_fwd and ga_flash_bwd_dq, a
// key in ga_flash_bwd_dkv) and keeps its vectors in registers, padded with
// zeros to FB_D; the block walks tiles of FB_KT keys (or queries) staged in
// shared memory and read as float4 broadcasts. Every output element is
// summed by one thread in a fixed order, so results are reproducible run to
// run, and no thread exchanges data with another except through the tiles.
//
// Layouts are the engine's: q, o, dout (B, Nq, heads*dh); k, v (B, Nk,
// heads*dh); mask (B, Nk) or null; lse (B, heads, Nq). Launch FB_T threads
// and grid (ceil(N/FB_T), heads, B) with N = Nq for the forward and dq
// kernels and N = Nk for dkv. Padded keys are loaded as zeros and skipped,
// so padding never reaches outputs or gradients.
#include "common.cuh"

#define FB_T 64
#define FB_KT 64
#define FB_D 32
#define FB_D4 (FB_D / 4)

__device__ __forceinline__ float ga_dot4(const float* a, float4 b, int d4) {
  return a[4 * d4] * b.x + a[4 * d4 + 1] * b.y + a[4 * d4 + 2] * b.z + a[4 * d4 + 3] * b.w;
}

__device__ __forceinline__ void ga_axpy4(float* y, float a, float4 x, int d4) {
  y[4 * d4] += a * x.x;
  y[4 * d4 + 1] += a * x.y;
  y[4 * d4 + 2] += a * x.z;
  y[4 * d4 + 3] += a * x.w;
}

// ga_load_rows stages rows r0 .. r0+FB_KT-1 of x (row stride h, dh used
// columns) into t as FB_D-wide rows, zero beyond n, for padded rows
// (mask[row] <= 0.5 when mask is given) and in columns >= dh; real[r] is 1
// for a staged real row, else 0 (when real is not null).
__device__ __forceinline__ void ga_load_rows(float4 (*t)[FB_D4], float* real, const float* x, const float* mask,
                                             int r0, int n, long h, int dh) {
  for (int i = threadIdx.x; i < FB_KT * FB_D; i += blockDim.x) {
    int r = i / FB_D, d = i % FB_D, row = r0 + r;
    bool ok = row < n && (!mask || mask[row] > 0.5f);
    ((float*)t[r])[d] = (ok && d < dh) ? x[(long)row * h + d] : 0.f;
    if (real && d == 0) real[r] = ok ? 1.f : 0.f;
  }
}

// Forward: o = softmax(scale q k^T) v over real keys; lse = log-sum-exp of
// the scaled scores (-Inf and o = 0 for a query with no real key).
extern "C" __global__ void __launch_bounds__(FB_T) ga_flash_fwd(float* o, float* lse, const float* q, const float* k,
                                                                const float* v, const float* mask, int Nq, int Nk,
                                                                int heads, int dh, float scale) {
  __shared__ float4 Ks[FB_KT][FB_D4];
  __shared__ float4 Vs[FB_KT][FB_D4];
  __shared__ float Kr[FB_KT];
  int hd = blockIdx.y, b = blockIdx.z, row = blockIdx.x * FB_T + threadIdx.x;
  long h = (long)heads * dh;
  long qoff = (long)b * Nq * h + hd * dh, koff = (long)b * Nk * h + hd * dh;
  const float* mb = mask ? mask + (long)b * Nk : nullptr;
  bool live = row < Nq;
  float qr[FB_D], acc[FB_D];
#pragma unroll
  for (int d = 0; d < FB_D; d++) {
    qr[d] = (live && d < dh) ? q[qoff + (long)row * h + d] * scale : 0.f;
    acc[d] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int k0 = 0; k0 < Nk; k0 += FB_KT) {
    __syncthreads();  // the previous tile is consumed
    ga_load_rows(Ks, Kr, k + koff, mb, k0, Nk, h, dh);
    ga_load_rows(Vs, nullptr, v + koff, mb, k0, Nk, h, dh);
    __syncthreads();
    int nt = min(FB_KT, Nk - k0);
    for (int j = 0; j < nt; j++) {
      if (Kr[j] == 0.f) continue;  // the same for every thread
      float s = 0.f;
#pragma unroll
      for (int d4 = 0; d4 < FB_D4; d4++) s += ga_dot4(qr, Ks[j][d4], d4);
      if (s > m) {  // a new maximum: rescale what was summed so far
        float c = __expf(m - s);
        l *= c;
#pragma unroll
        for (int d = 0; d < FB_D; d++) acc[d] *= c;
        m = s;
      }
      float p = __expf(s - m);
      l += p;
#pragma unroll
      for (int d4 = 0; d4 < FB_D4; d4++) ga_axpy4(acc, p, Vs[j][d4], d4);
    }
  }
  if (!live) return;
  lse[((long)b * heads + hd) * Nq + row] = l > 0.f ? m + logf(l) : (l == 0.f ? -INFINITY : NAN);
  float inv = l > 0.f ? 1.f / l : 0.f;
  float* orow = o + qoff + (long)row * h;
#pragma unroll
  for (int d = 0; d < FB_D; d++)
    if (d < dh) orow[d] = acc[d] * inv;
}

// Backward for dq: dq += sum_j dS_ij k_j with P recomputed from lse,
// dS = P (dP - D) scale, dP = dO v^T and D_i = dO_i . O_i.
extern "C" __global__ void __launch_bounds__(FB_T)
    ga_flash_bwd_dq(float* dq, const float* q, const float* k, const float* v, const float* mask, const float* dout,
                    const float* o, const float* lse, int Nq, int Nk, int heads, int dh, float scale) {
  __shared__ float4 Ks[FB_KT][FB_D4];
  __shared__ float4 Vs[FB_KT][FB_D4];
  __shared__ float Kr[FB_KT];
  int hd = blockIdx.y, b = blockIdx.z, row = blockIdx.x * FB_T + threadIdx.x;
  long h = (long)heads * dh;
  long qoff = (long)b * Nq * h + hd * dh, koff = (long)b * Nk * h + hd * dh;
  const float* mb = mask ? mask + (long)b * Nk : nullptr;
  bool live = row < Nq;
  float qr[FB_D], gr[FB_D], acc[FB_D], D = 0.f;
#pragma unroll
  for (int d = 0; d < FB_D; d++) {
    bool in = live && d < dh;
    qr[d] = in ? q[qoff + (long)row * h + d] * scale : 0.f;
    gr[d] = in ? dout[qoff + (long)row * h + d] : 0.f;
    if (in) D += gr[d] * o[qoff + (long)row * h + d];
    acc[d] = 0.f;
  }
  float L = live ? lse[((long)b * heads + hd) * Nq + row] : -INFINITY;
  bool rowLive = !(isinf(L) && L < 0.f);
  for (int k0 = 0; k0 < Nk; k0 += FB_KT) {
    __syncthreads();
    ga_load_rows(Ks, Kr, k + koff, mb, k0, Nk, h, dh);
    ga_load_rows(Vs, nullptr, v + koff, mb, k0, Nk, h, dh);
    __syncthreads();
    if (!rowLive) continue;
    int nt = min(FB_KT, Nk - k0);
    for (int j = 0; j < nt; j++) {
      if (Kr[j] == 0.f) continue;
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int d4 = 0; d4 < FB_D4; d4++) {
        s += ga_dot4(qr, Ks[j][d4], d4);
        dp += ga_dot4(gr, Vs[j][d4], d4);
      }
      float ds = __expf(s - L) * (dp - D) * scale;
#pragma unroll
      for (int d4 = 0; d4 < FB_D4; d4++) ga_axpy4(acc, ds, Ks[j][d4], d4);
    }
  }
  if (!live) return;
  float* g = dq + qoff + (long)row * h;
#pragma unroll
  for (int d = 0; d < FB_D; d++)
    if (d < dh) g[d] += acc[d];
}

// Backward for dk and dv (either may be null): for each real key c,
// dv_c += sum_i P_ic dO_i and dk_c += sum_i dS_ic q_i. Padded keys get
// nothing (their gradients stay as they were).
extern "C" __global__ void __launch_bounds__(FB_T)
    ga_flash_bwd_dkv(float* dk, float* dv, const float* q, const float* k, const float* v, const float* mask,
                     const float* dout, const float* o, const float* lse, int Nq, int Nk, int heads, int dh,
                     float scale) {
  __shared__ float4 Qs[FB_KT][FB_D4];
  __shared__ float4 Gs[FB_KT][FB_D4];
  __shared__ float Ls[FB_KT], Ds[FB_KT];
  int hd = blockIdx.y, b = blockIdx.z, c = blockIdx.x * FB_T + threadIdx.x;
  long h = (long)heads * dh;
  long qoff = (long)b * Nq * h + hd * dh, koff = (long)b * Nk * h + hd * dh;
  const float* mb = mask ? mask + (long)b * Nk : nullptr;
  bool real = c < Nk && (!mb || mb[c] > 0.5f);
  float kr[FB_D], vr[FB_D], ak[FB_D], av[FB_D];
#pragma unroll
  for (int d = 0; d < FB_D; d++) {
    bool in = real && d < dh;
    kr[d] = in ? k[koff + (long)c * h + d] * scale : 0.f;
    vr[d] = in ? v[koff + (long)c * h + d] : 0.f;
    ak[d] = 0.f, av[d] = 0.f;
  }
  for (int i0 = 0; i0 < Nq; i0 += FB_KT) {
    __syncthreads();
    ga_load_rows(Qs, nullptr, q + qoff, nullptr, i0, Nq, h, dh);
    ga_load_rows(Gs, nullptr, dout + qoff, nullptr, i0, Nq, h, dh);
    for (int r = threadIdx.x; r < FB_KT; r += blockDim.x) {  // lse and D of the tile's queries
      int row = i0 + r;
      float t = 0.f;
      if (row < Nq)
        for (int d = 0; d < dh; d++) t += dout[qoff + (long)row * h + d] * o[qoff + (long)row * h + d];
      Ds[r] = t;
      Ls[r] = row < Nq ? lse[((long)b * heads + hd) * Nq + row] : -INFINITY;
    }
    __syncthreads();
    if (!real) continue;
    int nt = min(FB_KT, Nq - i0);
    for (int i = 0; i < nt; i++) {
      float L = Ls[i];
      if (isinf(L) && L < 0.f) continue;  // a query with no real key
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int d4 = 0; d4 < FB_D4; d4++) {
        s += ga_dot4(kr, Qs[i][d4], d4);
        dp += ga_dot4(vr, Gs[i][d4], d4);
      }
      float p = __expf(s - L);
      float ds = p * (dp - Ds[i]) * scale;
#pragma unroll
      for (int d4 = 0; d4 < FB_D4; d4++) {
        ga_axpy4(av, p, Gs[i][d4], d4);
        ga_axpy4(ak, ds, Qs[i][d4], d4);
      }
    }
  }
  if (!real) return;
  long off = koff + (long)c * h;
#pragma unroll
  for (int d = 0; d < FB_D; d++) {
    if (d >= dh) continue;
    if (dk) dk[off + d] += ak[d];
    if (dv) dv[off + d] += av[d];
  }
}
