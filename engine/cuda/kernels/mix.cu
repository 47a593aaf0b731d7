// Device-side GELO mixing (engine.Tape.MixRows): U = A X is one fp32 strided-batched cuBLAS GEMM
// (fused_mix.go); this file rounds U to the sampler's observe_dtype in place, as the host's
// internal/numfmt does (nearest, ties to even, overflow to infinity, subnormals kept, NaN stays
// NaN), so that device and host mixing round alike. Built into mix.ptx, which is optional:
// without it the backend rounds on the host (a download and an upload).
#include "common.cuh"

// ga_round_bf16_f is x rounded to the nearest bfloat16, as a float.
__device__ __forceinline__ float ga_round_bf16_f(float x) {
  unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;  // NaN
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return __uint_as_float(u);
}

// ga_round_f16_f is x rounded to the nearest IEEE half, as a float: 10 mantissa bits for
// normal halves, multiples of 2^-24 below 2^-14, infinity from 65520 (the midpoint between the
// largest half, 65504, and 65536) on.
__device__ __forceinline__ float ga_round_f16_f(float x) {
  unsigned u = __float_as_uint(x);
  unsigned a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a > 0x7f800000u) return x;  // NaN
  if (a >= 0x477ff000u) return __uint_as_float(sign | 0x7f800000u);  // |x| >= 65520
  if (a < 0x38800000u) {  // |x| < 2^-14: half's subnormals, spacing 2^-24
    float s = rintf(__uint_as_float(a) * 16777216.0f) * (1.0f / 16777216.0f);  // exact; rintf ties to even
    return __uint_as_float(sign | __float_as_uint(s));
  }
  a = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
  return __uint_as_float(sign | a);
}

// ga_round_observe rounds x (n elements) in place: fmt 1 bf16, 2 fp16 (engine.MixRound).
extern "C" __global__ void ga_round_observe(float* x, int fmt, long n) {
  if (fmt == 1) {
    GA_FOR(i, n) x[i] = ga_round_bf16_f(x[i]);
  } else if (fmt == 2) {
    GA_FOR(i, n) x[i] = ga_round_f16_f(x[i]);
  }
}
