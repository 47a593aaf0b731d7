// Host stand-ins for the CUDA built-ins the kernels use, so that a host C++
// compiler can check kernels/*.cu for syntax and type errors where nvcc is
// absent (TestKernelSyntax). This is not CUDA semantics: nothing is run.
#include <cmath>
#include <algorithm>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct ga_dim3 { unsigned x, y, z; };
struct float4 { float x, y, z, w; };
struct uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
#define __launch_bounds__(n)
extern ga_dim3 blockIdx, blockDim, threadIdx, gridDim;
inline void __syncthreads() {}
inline float __shfl_xor_sync(unsigned, float v, int) { return v; }
inline double __shfl_xor_sync(unsigned, double v, int) { return v; }
inline bool __any_sync(unsigned, bool p) { return p; }
inline void __syncwarp(unsigned = 0xffffffffu) {}
inline float __expf(float x) { return std::exp(x); }
inline unsigned __float_as_uint(float x) { unsigned u; __builtin_memcpy(&u, &x, 4); return u; }
inline float __uint_as_float(unsigned u) { float x; __builtin_memcpy(&x, &u, 4); return x; }
inline float rsqrtf(float x) { return 1 / std::sqrt(x); }
using std::isinf;
using std::isnan;
using std::max;
using std::min;
