// adamw16_emu: runs adamw.cu's ga_adamw and adamw16.cu's ga_adamw_bf16 on the same inputs under
// the host emulation of cuda_emu.h (TestAdamWBF16Emulated builds it with g++ -include
// testdata/cuda_emu.h -I kernels). Reads int32 n, seven float32 scalars (lr, beta1, beta2, eps,
// decay, biasCorr1, biasCorr2), then float32 p, g, m, v (n each); writes ga_adamw's p, g, m, v,
// then ga_adamw_bf16's p, g, m, v (float32) and p16 (uint16), n each.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "adamw.cu"
#include "adamw16.cu"

int main() {
  int32_t n;
  float s[7];
  if (fread(&n, 4, 1, stdin) != 1 || fread(s, 4, 7, stdin) != 7) return 2;
  std::vector<float> in[4];
  for (auto& x : in) {
    x.resize(n);
    if (fread(x.data(), 4, n, stdin) != (size_t)n) return 2;
  }
  std::vector<float> a[4] = {in[0], in[1], in[2], in[3]}, b[4] = {in[0], in[1], in[2], in[3]};
  std::vector<uint16_t> p16(n);
  ga_emu_launch(2, 64, [&] { ga_adamw(a[0].data(), a[1].data(), a[2].data(), a[3].data(), n, s[0], s[1], s[2], s[3], s[4], s[5], s[6]); });
  ga_emu_launch(2, 64, [&] {
    ga_adamw_bf16(b[0].data(), b[1].data(), b[2].data(), b[3].data(), p16.data(), n, s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
  });
  for (auto* x : {&a[0], &a[1], &a[2], &a[3], &b[0], &b[1], &b[2], &b[3]})
    if (fwrite(x->data(), 4, n, stdout) != (size_t)n) return 3;
  return fwrite(p16.data(), 2, n, stdout) == (size_t)n ? 0 : 3;
}
