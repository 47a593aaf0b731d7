// Shared helpers for the geloattack CUDA kernels. Conventions (engine/backend.go):
// tensors are dense row-major float32; pointers passed here already include the
// tensor's offset; gradient outputs are accumulated (+=) unless a flag says to
// overwrite; a nullable pointer argument set to 0 means "skip that output".
// Every reduction is done in a fixed order (no float atomics), so results are
// reproducible run to run, as on the CPU backend.
#pragma once
#include <math.h>
#include <stdint.h>

#define GA_BLOCK 256

// Grid-stride loop over [0, n).
#define GA_FOR(i, n) \
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)

// The reduction operators of the warp and block reductions below.
struct GaAdd {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct GaMax {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Warp-wide reduction (butterfly: every lane gets the result).
template <typename T, typename Op>
__device__ __forceinline__ T ga_warp_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float ga_warp_sum(float v) { return ga_warp_reduce(v, GaAdd()); }
__device__ __forceinline__ double ga_warp_sum_d(double v) { return ga_warp_reduce(v, GaAdd()); }
__device__ __forceinline__ float ga_warp_max(float v) { return ga_warp_reduce(v, GaMax()); }

// Block-wide reduction, result broadcast to every thread; id is the
// operator's identity. blockDim.x must be a multiple of 32 and at most 1024.
// Each instantiation has its own 33 elements of shared memory.
template <typename T, typename Op>
__device__ __forceinline__ T ga_block_reduce(T v, Op op, T id) {
  __shared__ T part[33];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = ga_warp_reduce(v, op);
  __syncthreads();  // part may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T t = lane < nw ? part[lane] : id;
    t = ga_warp_reduce(t, op);
    if (lane == 0) part[32] = t;
  }
  __syncthreads();
  return part[32];
}

__device__ __forceinline__ float ga_block_sum(float v) { return ga_block_reduce(v, GaAdd(), 0.f); }
__device__ __forceinline__ double ga_block_sum_d(double v) { return ga_block_reduce(v, GaAdd(), 0.0); }
__device__ __forceinline__ float ga_block_max(float v) { return ga_block_reduce(v, GaMax(), -INFINITY); }

// Log-sum-exp of row x[0..n) over entries with mask > 0.5 (all when mask is
// null), computed by one block: max + log sum exp(x - max); -Inf for an empty
// set; +Inf/NaN maxima are returned as they are (as the CPU's logSumExp).
__device__ __forceinline__ float ga_block_lse(const float* x, const float* mask, int n) {
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    if (!mask || mask[j] > 0.5f) mx = fmaxf(mx, x[j]);
  // fmaxf drops NaN; look for one explicitly so that NaN propagates.
  float nan = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    if ((!mask || mask[j] > 0.5f) && isnan(x[j])) nan = 1.f;
  mx = ga_block_max(mx);
  if (ga_block_sum(nan) > 0.f) return NAN;
  if (isinf(mx)) return mx;
  double s = 0.0;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    if (!mask || mask[j] > 0.5f) s += (double)__expf(x[j] - mx);
  s = ga_block_sum_d(s);
  return mx + (float)log(s);
}
