// AdamW step over one parameter tensor (engine.AdamWStep; PyTorch's order:
// decoupled decay first, then the bias-corrected Adam step). The gradient is
// consumed: g is set to zero. Grid-stride; any grid.
#include "common.cuh"
#include "adamw.cuh"

extern "C" __global__ void ga_adamw(float* p, float* g, float* m, float* v, long n, float lr, float beta1,
                                    float beta2, float eps, float decay, float biasCorr1, float biasCorr2) {
  float keep = 1.f - lr * decay;
  float step = lr / biasCorr1;
  float invBC2 = 1.f / biasCorr2;
  GA_FOR(i, n) ga_adamw_update(p, g, m, v, i, beta1, beta2, eps, keep, step, invBC2);
}
