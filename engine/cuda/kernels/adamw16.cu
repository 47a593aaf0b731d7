// ga_adamw_bf16: ga_adamw that also writes the updated weights rounded to bf16 (nearest, ties to
// even; NaN stays NaN) into p16, the bf16 copy the backend's bf16 GEMMs read instead of rounding
// the fp32 weights again on every call (weights16.go). A module of its own (adamw16.ptx) so that
// the committed adamw.ptx stays the one checked on a GPU until this one is.
#include "common.cuh"
#include "adamw.cuh"

// ga_bf16_bits16 is x rounded to bfloat16, its 16 bits (elementwise.cu's ga_bf16_bits).
__device__ __forceinline__ unsigned short ga_bf16_bits16(float x) {
  unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // quiet NaN
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

extern "C" __global__ void ga_adamw_bf16(float* p, float* g, float* m, float* v, unsigned short* p16, long n, float lr,
                                         float beta1, float beta2, float eps, float decay, float biasCorr1,
                                         float biasCorr2) {
  float keep = 1.f - lr * decay;
  float step = lr / biasCorr1;
  float invBC2 = 1.f / biasCorr2;
  GA_FOR(i, n) p16[i] = ga_bf16_bits16(ga_adamw_update(p, g, m, v, i, beta1, beta2, eps, keep, step, invBC2));
}
