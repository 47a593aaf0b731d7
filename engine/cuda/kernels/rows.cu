// Row kernels: RMSNorm, L2Normalize, RowReduce (log-sum-exp, norm),
// MeanPool, InfoNCE and whole-tensor reductions. Unless a comment says
// otherwise, launch one block of GA_BLOCK threads per row (grid = rows).
#include "common.cuh"

// RMSNorm: rstd[r] = 1/sqrt(mean x^2 + eps); y = x * rstd * w.
extern "C" __global__ void ga_rmsnorm(float* y, float* rstd, const float* x, const float* w, int h, float eps) {
  long r = blockIdx.x;
  const float* xr = x + r * h;
  float ss = 0.f;
  for (int j = threadIdx.x; j < h; j += blockDim.x) ss += xr[j] * xr[j];
  ss = ga_block_sum(ss);
  float inv = rsqrtf(ss / h + eps);
  if (threadIdx.x == 0) rstd[r] = inv;
  for (int j = threadIdx.x; j < h; j += blockDim.x) y[r * h + j] = xr[j] * inv * w[j];
}

// RMSNormBackward, dx part: with xhat = x*rstd, g = dy*w,
// dx += rstd * (g - xhat * mean(g * xhat)).
extern "C" __global__ void ga_rmsnorm_bwd_dx(float* dx, const float* dy, const float* x, const float* w,
                                             const float* rstd, int h) {
  long r = blockIdx.x;
  const float *xr = x + r * h, *gr = dy + r * h;
  float inv = rstd[r], dot = 0.f;
  for (int j = threadIdx.x; j < h; j += blockDim.x) dot += gr[j] * w[j] * xr[j] * inv;
  dot = ga_block_sum(dot) / h;
  for (int j = threadIdx.x; j < h; j += blockDim.x)
    dx[r * h + j] += inv * (gr[j] * w[j] - xr[j] * inv * dot);
}

// RMSNormBackward, dw part, stage 1: partial[c, j] = sum of
// dy[r, j] * x[r, j] * rstd[r] over rows r of chunk c, that is
// c*rowsPer <= r < min(M, (c+1)*rowsPer).
// Launch grid (ceil(h/GA_BLOCK), chunks); then ga_finish_cols(dw, partial,
// chunks, h) adds the chunks in order.
extern "C" __global__ void ga_rmsnorm_bwd_dw_partial(float* partial, const float* dy, const float* x,
                                                     const float* rstd, int M, int h, int rowsPer) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int c = blockIdx.y;
  if (j >= h) return;
  int lo = c * rowsPer, hi = min(M, lo + rowsPer);
  float s = 0.f;
  for (int r = lo; r < hi; r++) s += dy[(long)r * h + j] * x[(long)r * h + j] * rstd[r];
  partial[(long)c * h + j] = s;
}

// out[j] += sum_c partial[c, j] in chunk order. Launch ceil(width/GA_BLOCK) blocks.
extern "C" __global__ void ga_finish_cols(float* out, const float* partial, int chunks, int width) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= width) return;
  float s = 0.f;
  for (int c = 0; c < chunks; c++) s += partial[(long)c * width + j];
  out[j] += s;
}

// L2Normalize: norm[r] = ||x_r|| (summed in double); y = x / max(norm, eps).
extern "C" __global__ void ga_l2norm(float* y, float* norm, const float* x, int e, float eps) {
  long r = blockIdx.x;
  const float* xr = x + r * e;
  double ss = 0.0;
  for (int j = threadIdx.x; j < e; j += blockDim.x) ss += (double)xr[j] * xr[j];
  ss = ga_block_sum_d(ss);
  float n = (float)sqrt(ss);
  if (threadIdx.x == 0) norm[r] = n;
  float inv = 1.f / fmaxf(n, eps);
  for (int j = threadIdx.x; j < e; j += blockDim.x) y[r * e + j] = xr[j] * inv;
}

// L2NormalizeBackward: dx += (dy - y (dy.y)) / norm when norm > eps, else dy / eps.
extern "C" __global__ void ga_l2norm_bwd(float* dx, const float* dy, const float* y, const float* norm, int e,
                                         float eps) {
  long r = blockIdx.x;
  const float *yr = y + r * e, *gr = dy + r * e;
  float n = norm[r];
  if (n <= eps) {
    for (int j = threadIdx.x; j < e; j += blockDim.x) dx[r * e + j] += gr[j] / eps;
    return;
  }
  float dot = 0.f;
  for (int j = threadIdx.x; j < e; j += blockDim.x) dot += yr[j] * gr[j];
  dot = ga_block_sum(dot);
  float inv = 1.f / n;
  for (int j = threadIdx.x; j < e; j += blockDim.x) dx[r * e + j] += (gr[j] - yr[j] * dot) * inv;
}

// RowReduce log-sum-exp: y[r] = log sum_j exp(x[r, j]).
extern "C" __global__ void ga_row_lse(float* y, const float* x, int C) {
  long r = blockIdx.x;
  float l = ga_block_lse(x + r * C, nullptr, C);
  if (threadIdx.x == 0) y[r] = l;
}

// RowReduce norm: y[r] = sqrt(sum_j x[r, j]^2) (double accumulation).
extern "C" __global__ void ga_row_norm(float* y, const float* x, int C) {
  long r = blockIdx.x;
  double ss = 0.0;
  for (int j = threadIdx.x; j < C; j += blockDim.x) ss += (double)x[r * C + j] * x[r * C + j];
  ss = ga_block_sum_d(ss);
  if (threadIdx.x == 0) y[r] = (float)sqrt(ss);
}

// RowReduceBackward: LSE (op 0): dx += dy[r] exp(x - y[r]); norm (op 1):
// dx += dy[r] x / y[r] (nothing where y[r] == 0). Elementwise, grid-stride.
extern "C" __global__ void ga_row_reduce_bwd(int op, float* dx, const float* dy, const float* x, const float* y,
                                             int C, long rows) {
  long n = rows * C;
  GA_FOR(i, n) {
    long r = i / C;
    if (op == 0) {
      dx[i] += dy[r] * __expf(x[i] - y[r]);
    } else if (y[r] != 0.f) {
      dx[i] += dy[r] / y[r] * x[i];
    }
  }
}

// MeanPool: y[b, j] = mean over real rows i of x[b, i, j] (0 for an empty
// set). Launch grid (ceil(h/GA_BLOCK), B); mask may be null.
extern "C" __global__ void ga_mean_pool(float* y, const float* x, const float* mask, int N, int h) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  long b = blockIdx.y;
  if (j >= h) return;
  float s = 0.f;
  int cnt = 0;
  for (int i = 0; i < N; i++) {
    if (mask && mask[b * N + i] <= 0.5f) continue;
    s += x[(b * N + i) * h + j];
    cnt++;
  }
  y[b * h + j] = cnt ? s * (1.f / cnt) : 0.f;
}

// MeanPoolBackward: dx[b, i, j] += dy[b, j] / count for real rows i.
// Launch one block per set b (grid B).
extern "C" __global__ void ga_mean_pool_bwd(float* dx, const float* dy, const float* mask, int N, int h) {
  long b = blockIdx.x;
  float cnt = 0.f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) cnt += (!mask || mask[b * N + i] > 0.5f) ? 1.f : 0.f;
  cnt = ga_block_sum(cnt);
  if (cnt == 0.f) return;
  float wgt = 1.f / cnt;
  for (long k = threadIdx.x; k < (long)N * h; k += blockDim.x) {
    long i = k / h, j = k % h;
    if (mask && mask[b * N + i] <= 0.5f) continue;
    dx[(b * N + i) * h + j] += dy[b * h + j] * wgt;
  }
}

// InfoNCE, per row: rowloss[b] = LSE_c s[b, c] - LSE_{pos} s[b, c]. Then
// ga_reduce_partial + ga_finish_sum with scale 1/B give the mean loss.
extern "C" __global__ void ga_infonce_rows(float* rowloss, const float* scores, const float* pos, int C) {
  long b = blockIdx.x;
  float all = ga_block_lse(scores + b * C, nullptr, C);
  float onPos = ga_block_lse(scores + b * C, pos + b * C, C);
  if (threadIdx.x == 0) rowloss[b] = all - onPos;
}

// InfoNCEBackward: ds[b, c] += dy[0]/B * (softmax(s_b)_c - pos_bc softmax_P(s_b)_c);
// dy is the device scalar.
extern "C" __global__ void ga_infonce_bwd(float* ds, const float* dy, const float* scores, const float* pos, int B,
                                          int C) {
  long b = blockIdx.x;
  const float *sr = scores + b * C, *pr = pos + b * C;
  float all = ga_block_lse(sr, nullptr, C);
  float onPos = ga_block_lse(sr, pr, C);
  float g = dy[0] / B;
  for (int j = threadIdx.x; j < C; j += blockDim.x) {
    float d = __expf(sr[j] - all);
    if (pr[j] > 0.5f) d -= __expf(sr[j] - onPos);
    ds[b * C + j] += g * d;
  }
}

// Whole-tensor reduction, stage 1: partial[blockIdx.x] = sum x (squares != 0:
// sum x^2) over this block's grid-stride share, in double. Launch GA_BLOCK
// threads and a fixed number of blocks (e.g. 256) so the order is fixed.
extern "C" __global__ void ga_reduce_partial(double* partial, const float* x, long n, int squares) {
  double s = 0.0;
  GA_FOR(i, n) s += squares ? (double)x[i] * x[i] : (double)x[i];
  s = ga_block_sum_d(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Stage 2, one block: s = scale * sum of the nparts partials in a fixed
// order; out[0] = s (accumulate == 0) or out[0] += s. outd, when not null,
// also receives s in double (SumSquaresHost downloads it).
extern "C" __global__ void ga_finish_sum(float* out, double* outd, const double* partial, int nparts, double scale,
                                         int accumulate) {
  double s = 0.0;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += partial[i];
  s = ga_block_sum_d(s) * scale;
  if (threadIdx.x == 0) {
    if (out) out[0] = accumulate ? out[0] + (float)s : (float)s;
    if (outd) outd[0] = s;
  }
}

// ReduceBackward: dx += dy[0] (op 0, sum) or dx += 2 dy[0] x (op 1, sum of squares).
extern "C" __global__ void ga_reduce_bwd(int op, float* dx, const float* dy, const float* x, long n) {
  float g = dy[0];
  GA_FOR(i, n) dx[i] += op == 0 ? g : 2.f * g * x[i];
}
