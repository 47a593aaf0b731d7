#!/usr/bin/env python3
"""gpu-lm-torch-check.py LM_PTX: an oracle for engine/cuda/kernels/lm.cu that needs no Go.

On a GPU machine with PyTorch (CUDA): loads the PTX module through the driver API (ctypes, libcuda),
launches each kernel on PyTorch tensors the way engine/cuda/fused_lm.go does (causal attention's
products done by torch.bmm in the same batched layout as the backend's cuBLAS calls) and compares
with a float64 PyTorch reference. The embedding backward must equal numpy's in-order np.add.at bit
for bit and repeat bit for bit. Prints one line per check; exit status 1 when any check fails.
scripts/gpu-lm-kernels.sh runs it before the Go tests.
"""
import ctypes
import math
import sys

import numpy as np
import torch

DEV = "cuda"
BLOCK = 256  # GA_BLOCK
failures = []


class Module:
    """The kernels of one PTX module, launched on the current stream's device (stream 0)."""

    def __init__(self, path):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        torch.zeros(1, device=DEV)  # makes PyTorch's (primary) context current
        with open(path, "rb") as f:
            image = f.read() + b"\0"
        self.mod = ctypes.c_void_p()
        self.check("cuModuleLoadData", self.cu.cuModuleLoadData(ctypes.byref(self.mod), image))

    def check(self, what, res):
        if res != 0:
            raise RuntimeError(f"{what}: CUDA error {res}")

    def launch(self, name, grid, *args):
        """Launches name with grid (up to 3 dims) x BLOCK threads; args are tensors (pointers),
        Python floats (float), Long(n) (64-bit) or ints (int), in the kernel's order."""
        fn = ctypes.c_void_p()
        self.check(f"cuModuleGetFunction({name})", self.cu.cuModuleGetFunction(ctypes.byref(fn), self.mod, name.encode()))
        vals = []
        for a in args:
            if isinstance(a, torch.Tensor):
                vals.append(ctypes.c_void_p(a.data_ptr()))
            elif isinstance(a, float):
                vals.append(ctypes.c_float(a))
            elif isinstance(a, Long):
                vals.append(ctypes.c_int64(a.n))
            else:
                vals.append(ctypes.c_int32(a))
        params = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
        grid = tuple(grid) + (1,) * (3 - len(grid))
        self.check(f"cuLaunchKernel({name})", self.cu.cuLaunchKernel(fn, *grid, BLOCK, 1, 1, 0, None, params, None))
        torch.cuda.synchronize()


class Long:
    """A 64-bit kernel argument (C long)."""

    def __init__(self, n):
        self.n = n


def grid_for(n):
    """engine/cuda's gridFor: a grid-stride kernel over n elements."""
    return (min(max((n + BLOCK - 1) // BLOCK, 1), 4096),)


def warp_rows(rows):
    """engine/cuda's warpRows: one warp per row."""
    return ((rows + BLOCK // 32 - 1) // (BLOCK // 32),)


def close(name, got, want, tol):
    """Checks max |got - want| / max |want| <= tol."""
    err = ((got.double() - want.double()).abs().max() / want.double().abs().max()).item()
    ok = err <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {name}: relative error {err:.3g} (tolerance {tol:g})")
    if not ok:
        failures.append(name)


def same(name, ok):
    print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if not ok:
        failures.append(name)


def randn(*shape):
    return torch.randn(*shape, device=DEV)


def check_rope(m):
    M, T, heads, hd = 66, 33, 6, 64
    half = hd // 2
    f = 10000.0 ** (-torch.arange(half, dtype=torch.float64) * 2 / hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * f
    table = torch.cat([ang.cos(), ang.sin()], 1).float().to(DEV)  # (T, hd): cos | sin
    x, y = randn(M, heads * hd), randn(M, heads * hd)
    m.launch("ga_rope", grid_for(M * heads * half), y, x, table, Long(M), T, heads, hd)
    rows = table[torch.arange(M) % T]
    cos, sin = rows[:, None, :half].double(), rows[:, None, half:].double()
    a, b = x.view(M, heads, hd)[..., :half].double(), x.view(M, heads, hd)[..., half:].double()
    close("rope", y, torch.cat([a * cos - b * sin, b * cos + a * sin], 2).view(M, -1), 1e-5)
    dx = randn(M, heads * hd)
    before = dx.clone()
    m.launch("ga_rope_bwd", grid_for(M * heads * half), dx, x, table, Long(M), T, heads, hd)  # dy = x
    close("rope backward", dx - before, torch.cat([a * cos + b * sin, b * cos - a * sin], 2).view(M, -1), 1e-5)


def check_embedding(m):
    V, d, T = 70, 384, 4099
    table, y = randn(V, d), randn(T, d)
    ids = torch.randint(0, V, (T,), device=DEV)
    idf = ids.float()
    m.launch("ga_embedding", grid_for(T * d), y, table, idf, T, d)
    same("embedding: an exact gather", bool((y == table[ids]).all()))
    dy, start = randn(T, d), randn(V, d)
    runs = []
    for _ in range(2):
        dt = start.clone()
        m.launch("ga_embedding_bwd", ((d + BLOCK - 1) // BLOCK, 64), dt, dy, idf, T, d)
        runs.append(dt.cpu().numpy())
    want = start.cpu().numpy().copy()
    np.add.at(want, ids.cpu().numpy(), dy.cpu().numpy())  # in token order, float32
    same("embedding backward: bit-identical to in-order np.add.at", bool((runs[0] == want).all()))
    same("embedding backward: bit-identical across runs", bool((runs[0] == runs[1]).all()))


def check_xent(m):
    c, V = 128, 5000
    logits = randn(c, V) * 3
    targets = torch.randint(0, V, (c,), device=DEV)
    nll, lse = randn(c), randn(c)
    m.launch("ga_xent", (c,), nll, lse, logits, targets.float(), V)
    ref = torch.logsumexp(logits.double(), 1)
    close("xent lse", lse, ref, 1e-5)
    close("xent nll", nll, ref - logits.double()[torch.arange(c), targets], 1e-5)
    dy, g = torch.tensor([0.7], device=DEV), logits.clone()
    m.launch("ga_xent_bwd", grid_for(c * V), g, lse, targets.float(), dy, 1.0 / c, V, Long(c * V))
    onehot = torch.nn.functional.one_hot(targets, V).double()
    close("xent backward", g, 0.7 / c * (torch.softmax(logits.double(), 1) - onehot), 1e-5)


def check_causal_attention(m):
    B, T, heads, kv, hd = 2, 65, 6, 2, 32
    group, scale, BG, rows = heads // kv, 1 / math.sqrt(hd), B * kv, B * heads * T
    q, k, v, do = randn(B, T, heads * hd), randn(B, T, kv * hd), randn(B, T, kv * hd), randn(B, T, heads * hd)

    def split(z, n):  # ga_split_heads: (B, T, n*hd) -> (B, n, T, hd)
        return z.view(B, T, n, hd).permute(0, 2, 1, 3).contiguous()

    def merge(z, n):  # ga_merge_heads: (B, n, T, hd) -> (B, T, n*hd)
        return z.view(B, n, T, hd).permute(0, 2, 1, 3).reshape(B, T, n * hd).contiguous()

    # Reference: float64, kv heads repeated, an explicit causal mask, autograd.
    qd, kd, vd = (z.double().requires_grad_() for z in (q, k, v))
    Qr = split(qd, heads)
    Kr, Vr = split(kd, kv).repeat_interleave(group, 1), split(vd, kv).repeat_interleave(group, 1)
    mask = torch.full((T, T), float("-inf"), device=DEV, dtype=torch.float64).triu(1)
    S = Qr @ Kr.transpose(2, 3) * scale + mask
    lse_ref = torch.logsumexp(S, -1)
    o_ref = merge(torch.softmax(S, -1) @ Vr, heads)
    o_ref.backward(do.double())

    # The backend's layout: B*kv GEMM batches of (group*T, hd) queries against (T, hd) keys.
    Qh, Kh, Vh = split(q, heads).view(BG, group * T, hd), split(k, kv).view(BG, T, hd), split(v, kv).view(BG, T, hd)
    P, lse = (scale * Qh @ Kh.transpose(1, 2)).contiguous(), randn(rows)
    m.launch("ga_causal_softmax", warp_rows(rows), P, lse, T, rows)
    o = merge(P @ Vh, heads)
    close("causal attention o", o, o_ref, 1e-5)
    close("causal attention lse", lse, lse_ref.reshape(-1), 1e-5)
    P2 = (scale * Qh @ Kh.transpose(1, 2)).contiguous()
    m.launch("ga_causal_recompute_p", warp_rows(rows), P2, lse, T, rows)
    close("causal attention recomputed P", P2, P, 1e-6)
    dOh = split(do, heads).view(BG, group * T, hd)
    dv = merge(P2.transpose(1, 2) @ dOh, kv)
    dS = (dOh @ Vh.transpose(1, 2)).contiguous()
    m.launch("ga_causal_softmax_bwd", warp_rows(rows), dS, P2, do, o, heads, T, hd, scale, rows)
    close("causal attention dq", merge(dS @ Kh, heads), qd.grad, 1e-5)
    close("causal attention dk", merge(dS.transpose(1, 2) @ Qh, kv), kd.grad, 1e-5)
    close("causal attention dv", dv, vd.grad, 1e-5)
    upper = lambda z: z.view(-1, T, T).triu(1)
    same("causal attention: P and dS exactly 0 above the diagonal", bool((upper(P) == 0).all() and (upper(dS) == 0).all()))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gpu-lm-torch-check.py LM_PTX")
    if not torch.cuda.is_available():
        sys.exit("gpu-lm-torch-check: PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(27)
    m = Module(sys.argv[1])
    for check in (check_rope, check_embedding, check_xent, check_causal_attention):
        check(m)
    print(f"gpu-lm-torch-check: {len(failures)} failed" + (f": {', '.join(failures)}" if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
