// Elementwise kernels: axpy, Unary/Binary forward and backward, SwiGLU, and
// the copies and broadcasts of Backend (Copy2D, Transpose, BroadcastAdd,
// ScaleRows, PrependRow). Launch with GA_BLOCK threads and any grid (all
// loops are grid-stride) unless a comment says otherwise.
#include "common.cuh"

// Op codes: the values of engine.UnaryOp and engine.BinaryOp.
enum { U_SCALE = 0, U_ADD_SCALAR, U_EXP, U_LOG, U_SQUARE, U_SQRT };
enum { B_ADD = 0, B_SUB, B_MUL, B_DIV };

// y += alpha * x.
extern "C" __global__ void ga_axpy(float* y, float alpha, const float* x, long n) {
  GA_FOR(i, n) y[i] += alpha * x[i];
}

// y = f(x, c); y may alias x.
extern "C" __global__ void ga_unary(int op, float* y, const float* x, float c, long n) {
  GA_FOR(i, n) {
    float v = x[i], r;
    switch (op) {
      case U_SCALE: r = c * v; break;
      case U_ADD_SCALAR: r = v + c; break;
      case U_EXP: r = expf(v); break;
      case U_LOG: r = logf(v); break;
      case U_SQUARE: r = v * v; break;
      default: r = sqrtf(v); break;
    }
    y[i] = r;
  }
}

// dx += df/dx * dy, given x and the forward output y.
extern "C" __global__ void ga_unary_bwd(int op, float* dx, const float* dy, const float* x, const float* y,
                                        float c, long n) {
  GA_FOR(i, n) {
    float g = dy[i], r;
    switch (op) {
      case U_SCALE: r = c * g; break;
      case U_ADD_SCALAR: r = g; break;
      case U_EXP: r = g * y[i]; break;
      case U_LOG: r = g / x[i]; break;
      case U_SQUARE: r = 2.f * g * x[i]; break;
      default: r = g / (2.f * y[i]); break;
    }
    dx[i] += r;
  }
}

// y = a op b; b has n elements, or one when bscalar != 0.
extern "C" __global__ void ga_binary(int op, float* y, const float* a, const float* b, int bscalar, long n) {
  GA_FOR(i, n) {
    float av = a[i], bv = bscalar ? b[0] : b[i], r;
    switch (op) {
      case B_ADD: r = av + bv; break;
      case B_SUB: r = av - bv; break;
      case B_MUL: r = av * bv; break;
      default: r = av / bv; break;
    }
    y[i] = r;
  }
}

__device__ __forceinline__ float ga_binary_db(int op, float g, float av, float bv) {
  switch (op) {
    case B_ADD: return g;
    case B_SUB: return -g;
    case B_MUL: return g * av;
    default: return -g * av / (bv * bv);
  }
}

// da += d(a op b)/da * dy (da may be null), and for a full-size b,
// db += d(a op b)/db * dy (db may be null). A one-element b's gradient is
// reduced by ga_binary_bwd_b_partial + ga_finish_sum.
extern "C" __global__ void ga_binary_bwd(int op, float* da, float* db, const float* dy, const float* a,
                                         const float* b, int bscalar, long n) {
  GA_FOR(i, n) {
    float g = dy[i], bv = bscalar ? b[0] : b[i];
    if (da) {
      float r = (op == B_MUL) ? g * bv : (op == B_DIV) ? g / bv : g;
      da[i] += r;
    }
    if (db && !bscalar) db[i] += ga_binary_db(op, g, a[i], bv);
  }
}

// partial[blockIdx.x] = sum over this block's grid-stride share of
// d(a op b)/db * dy for a one-element b, in double. Launch with GA_BLOCK
// threads and nparts blocks, then ga_finish_sum(db, partial, nparts, 1.0, 1).
extern "C" __global__ void ga_binary_bwd_b_partial(int op, double* partial, const float* dy, const float* a,
                                                   const float* b, long n) {
  double s = 0.0;
  GA_FOR(i, n) s += (double)ga_binary_db(op, dy[i], a[i], b[0]);
  s = ga_block_sum_d(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// SwiGLU: y = silu(g) * u = g * sigmoid(g) * u.
extern "C" __global__ void ga_swiglu(float* y, const float* gate, const float* up, long n) {
  GA_FOR(i, n) {
    float g = gate[i];
    y[i] = g / (1.f + __expf(-g)) * up[i];
  }
}

// With s = sigmoid(g): dgate (+)= dy u s (1 + g (1 - s)); dup (+)= dy g s.
// Either output may be null; acc* != 0 adds, else overwrites.
extern "C" __global__ void ga_swiglu_bwd(float* dgate, float* dup, const float* dy, const float* gate,
                                         const float* up, int accGate, int accUp, long n) {
  GA_FOR(i, n) {
    float g = gate[i], d = dy[i];
    float s = 1.f / (1.f + __expf(-g));
    if (dgate) {
      float v = d * up[i] * s * (1.f + g * (1.f - s));
      dgate[i] = accGate ? dgate[i] + v : v;
    }
    if (dup) {
      float v = d * g * s;
      dup[i] = accUp ? dup[i] + v : v;
    }
  }
}

// Copy2D: dst[r*dstLd + j] (+)= src[r*srcLd + j] for r < rows, j < cols
// (srcLd may be 0: one repeated row). dstLd == 0 is ga_colsum's job. Launch
// grid (ceil(cols/GA_BLOCK), min(rows, 65535)): no division per element.
extern "C" __global__ void ga_copy2d(float* dst, int dstLd, const float* src, int srcLd, int rows, int cols,
                                     int accumulate) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  for (long r = blockIdx.y; r < rows; r += gridDim.y) {
    float v = src[r * srcLd + j];
    float* p = dst + r * dstLd + j;
    *p = accumulate ? *p + v : v;
  }
}

// dst[j] += sum_r src[r*srcLd + j]: one thread per column, rows summed in
// order (deterministic). Launch ceil(cols/GA_BLOCK) blocks.
extern "C" __global__ void ga_colsum(float* dst, const float* src, int srcLd, int rows, int cols) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float s = 0.f;
  for (int r = 0; r < rows; r++) s += src[(long)r * srcLd + j];
  dst[j] += s;
}

// Transpose: y (batch, m, n) (+)= x (batch, n, m)^T through a 32x32 shared
// tile. Launch grid (ceil(m/32), ceil(n/32), batch), block (32, 8).
extern "C" __global__ void ga_transpose(float* y, const float* x, int n, int m, int accumulate) {
  __shared__ float tile[32][33];
  long base = (long)blockIdx.z * n * m;
  int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;  // x's column (0..m) and row (0..n) tile origin
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    int r = r0 + k, c = c0 + threadIdx.x;
    if (r < n && c < m) tile[k][threadIdx.x] = x[base + (long)r * m + c];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    int yr = c0 + k, yc = r0 + threadIdx.x;  // y row in 0..m, column in 0..n
    if (yr < m && yc < n) {
      float v = tile[threadIdx.x][k];
      float* p = y + base + (long)yr * n + yc;
      *p = accumulate ? *p + v : v;
    }
  }
}

// BroadcastAdd: y[r, j] = x[r, j] + col[r] + row[b, j] with r = b*M + i over
// rows = batch*M rows of C columns; col, row may be null.
extern "C" __global__ void ga_broadcast_add(float* y, const float* x, const float* col, const float* row,
                                            int M, int C, long rows) {
  long n = rows * C;
  GA_FOR(i, n) {
    long r = i / C, j = i % C;
    float v = x[i];
    if (col) v += col[r];
    if (row) v += row[(r / M) * C + j];
    y[i] = v;
  }
}

// BroadcastAddBackward, per row: dx += dy (dx may be null), dcol[r] += sum_j
// dy[r, j] (dcol may be null). One block per row.
extern "C" __global__ void ga_broadcast_add_bwd_rows(float* dx, float* dcol, const float* dy, int C) {
  long r = blockIdx.x;
  const float* g = dy + r * C;
  float s = 0.f;
  for (int j = threadIdx.x; j < C; j += blockDim.x) {
    if (dx) dx[r * C + j] += g[j];
    s += g[j];
  }
  if (dcol) {
    s = ga_block_sum(s);
    if (threadIdx.x == 0) dcol[r] += s;
  }
}

// BroadcastAddBackward, per column: drow[b, j] += sum_i dy[b, i, j]. Launch
// grid (ceil(C/GA_BLOCK), batch).
extern "C" __global__ void ga_broadcast_add_bwd_cols(float* drow, const float* dy, int M, int C) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  long b = blockIdx.y;
  if (j >= C) return;
  float s = 0.f;
  for (int i = 0; i < M; i++) s += dy[(b * M + i) * C + j];
  drow[b * C + j] += s;
}

// ScaleRows: y[r, j] (+)= x[r, j] * s[r].
extern "C" __global__ void ga_scale_rows(float* y, const float* x, const float* s, int h, long rows,
                                         int accumulate) {
  long n = rows * h;
  GA_FOR(i, n) {
    float v = x[i] * s[i / h];
    y[i] = accumulate ? y[i] + v : v;
  }
}

// PrependRow: y (B, N1, h) with y[b, 0] = row and y[b, 1:] = x[b] (x is
// (B, N1-1, h)). A mask (B, N1) uses h = 1.
extern "C" __global__ void ga_prepend_row(float* y, const float* x, const float* row, int B, int N1, int h) {
  long n = (long)B * N1 * h;
  GA_FOR(i, n) {
    long b = i / ((long)N1 * h), rem = i % ((long)N1 * h);
    long r = rem / h, j = rem % h;
    y[i] = (r == 0) ? row[j] : x[(b * (N1 - 1) + (r - 1)) * h + j];
  }
}

// ga_bf16_bits is x rounded to bfloat16 (nearest, ties to even; NaN stays
// NaN), in the low 16 bits.
__device__ __forceinline__ unsigned ga_bf16_bits(float x) {
  unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // quiet NaN
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// y = x rounded to bfloat16, the GEMM inputs of precision bf16. y holds
// 2-byte values.
extern "C" __global__ void ga_to_bf16(unsigned short* y, const float* x, long n) {
  GA_FOR(i, n) y[i] = (unsigned short)ga_bf16_bits(x[i]);
}

// ga_to_bf16 four at a time: x 16-byte aligned, n4 = n/4.
extern "C" __global__ void ga_to_bf16x4(uint2* y, const float4* x, long n4) {
  GA_FOR(i, n4) {
    float4 v = x[i];
    y[i] = make_uint2(ga_bf16_bits(v.x) | (ga_bf16_bits(v.y) << 16), ga_bf16_bits(v.z) | (ga_bf16_bits(v.w) << 16));
  }
}
