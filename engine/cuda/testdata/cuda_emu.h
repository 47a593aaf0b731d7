// A host emulation of the CUDA execution model, enough to run a kernel of
// kernels/*.cu on the CPU where no GPU is (TestSpanKernelEmulated): one
// std::thread per thread of a block, blocks one after another (so a
// function-static array is the block's shared memory), __syncthreads a
// barrier of the block, warp shuffles and votes exchanged through slots
// between two barriers of the warp. It checks a kernel's indexing, control
// flow and arithmetic, not CUDA's memory model or speed; every thread of a
// warp must reach each shuffle (warp-uniform control flow), as on a GPU.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(n)

struct ga_dim3 {
  unsigned x, y, z;
};
thread_local ga_dim3 threadIdx;
thread_local ga_dim3 blockIdx;
ga_dim3 blockDim, gridDim;

// The block's barrier and each warp's barrier and exchange slots.
struct ga_emu_block {
  std::unique_ptr<std::barrier<>> all;
  std::vector<std::unique_ptr<std::barrier<>>> warp;
  std::vector<double> slot;  // one per thread
};
inline ga_emu_block* ga_emu;

inline void __syncthreads() { ga_emu->all->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ga_emu->warp[threadIdx.x / 32]->arrive_and_wait(); }

template <typename T>
inline T ga_emu_shfl_xor(T v, int mask) {
  unsigned me = threadIdx.x, base = me & ~31u;
  ga_emu->slot[me] = (double)v;
  __syncwarp();
  T r = (T)ga_emu->slot[base + ((me & 31u) ^ (unsigned)mask)];
  __syncwarp();
  return r;
}
inline float __shfl_xor_sync(unsigned, float v, int mask) { return ga_emu_shfl_xor(v, mask); }
inline double __shfl_xor_sync(unsigned, double v, int mask) { return ga_emu_shfl_xor(v, mask); }
inline bool __any_sync(unsigned, bool p) {
  unsigned me = threadIdx.x, base = me & ~31u;
  ga_emu->slot[me] = p ? 1 : 0;
  __syncwarp();
  bool any = false;
  for (unsigned l = 0; l < 32; l++) any = any || ga_emu->slot[base + l] != 0;
  __syncwarp();
  return any;
}
inline float __expf(float x) { return std::exp(x); }
inline unsigned __float_as_uint(float x) {
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) { float x; __builtin_memcpy(&x, &u, 4); return x; }
inline float rsqrtf(float x) { return 1 / std::sqrt(x); }
using std::isinf;
using std::isnan;
using std::max;
using std::min;

// ga_emu_launch runs kernel over a 1-D grid of blocks of `threads` threads
// (a multiple of 32).
inline void ga_emu_launch(unsigned blocks, unsigned threads, const std::function<void()>& kernel) {
  ga_emu_block b;
  b.all = std::make_unique<std::barrier<>>(threads);
  for (unsigned w = 0; w < threads / 32; w++) b.warp.push_back(std::make_unique<std::barrier<>>(32));
  b.slot.assign(threads, 0);
  ga_emu = &b;
  blockDim = {threads, 1, 1};
  gridDim = {blocks, 1, 1};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      threadIdx = {t, 0, 0};
      for (unsigned blk = 0; blk < blocks; blk++) {
        blockIdx = {blk, 0, 0};
        kernel();
        __syncthreads();  // the block is done before the next reuses the shared arrays
      }
    });
  }
  for (auto& t : ts) t.join();
}
