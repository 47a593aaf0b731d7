// The AdamW update of one element, shared by adamw.cu's ga_adamw and adamw16.cu's ga_adamw_bf16
// so that both update p, m and v with the same arithmetic (PyTorch's order: decoupled decay
// first, then the bias-corrected Adam step). keep = 1 - lr*decay, step = lr/biasCorr1,
// invBC2 = 1/biasCorr2. The gradient is consumed: g[i] is set to zero. Returns the new p[i].
#pragma once

__device__ __forceinline__ float ga_adamw_update(float* p, float* g, float* m, float* v, long i, float beta1, float beta2,
                                                 float eps, float keep, float step, float invBC2) {
  float gi = g[i];
  float mi = beta1 * m[i] + (1.f - beta1) * gi;
  float vi = beta2 * v[i] + (1.f - beta2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  g[i] = 0.f;
  float pi = p[i] * keep - step * mi / (sqrtf(vi * invBC2) + eps);
  p[i] = pi;
  return pi;
}
