// span_emu: runs lm.cu's ga_span_attention under the host emulation of
// cuda_emu.h (TestSpanKernelEmulated builds it with g++ -include
// testdata/cuda_emu.h -I kernels). Reads from stdin seven int32s (N, P,
// cached, heads, kvHeads, hd, threads per block; cached is not read: each
// row's segment is in spans), then float32 q (N, heads*hd), k, v (N,
// kvHeads*hd), kc, vc (P, kvHeads*hd) and spans (N, 3: first, from, cached);
// writes o (N, heads*hd) as float32 to stdout.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "lm.cu"

static bool readAll(void* p, size_t n) { return fread(p, 1, n, stdin) == n; }

int main() {
  int32_t dims[7];
  if (!readAll(dims, sizeof dims)) return 2;
  int N = dims[0], P = dims[1], heads = dims[3], kvHeads = dims[4], hd = dims[5], threads = dims[6];
  size_t qw = (size_t)heads * hd, kw = (size_t)kvHeads * hd;
  std::vector<float> q(N * qw), k(N * kw), v(N * kw), kc(P * kw), vc(P * kw), spans(3 * N), o(N * qw);
  for (auto* x : {&q, &k, &v, &kc, &vc, &spans})
    if (!readAll(x->data(), x->size() * sizeof(float))) return 2;
  float scale = (float)(1 / std::sqrt((double)hd));
  const float* kcp = P > 0 ? kc.data() : nullptr;
  const float* vcp = P > 0 ? vc.data() : nullptr;
  ga_emu_launch(N * heads, threads, [&] {
    ga_span_attention(o.data(), q.data(), k.data(), v.data(), kcp, vcp, spans.data(), heads, kvHeads, hd, scale);
  });
  return fwrite(o.data(), sizeof(float), o.size(), stdout) == o.size() ? 0 : 3;
}
