// mix_emu: runs mix.cu's ga_round_observe under the host emulation of cuda_emu.h
// (TestRoundObserveEmulated builds it with g++ -include testdata/cuda_emu.h -I kernels). Reads
// from stdin two int32s (fmt, n), then n float32s; writes the n rounded values to stdout.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "mix.cu"

int main() {
  int32_t hdr[2];
  if (fread(hdr, sizeof hdr, 1, stdin) != 1) return 2;
  std::vector<float> x(hdr[1]);
  if (fread(x.data(), sizeof(float), x.size(), stdin) != x.size()) return 2;
  // Two blocks of 64 threads: the grid-stride loop's every path is taken.
  ga_emu_launch(2, 64, [&] { ga_round_observe(x.data(), hdr[0], (long)x.size()); });
  return fwrite(x.data(), sizeof(float), x.size(), stdout) == x.size() ? 0 : 3;
}
