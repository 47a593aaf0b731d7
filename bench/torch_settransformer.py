#!/usr/bin/env python3
"""PyTorch eager reference of the geloattack set-transformer training step, for speed comparison.

This file reimplements, in plain PyTorch, the two models of models/settransformer (Go) with the
same architecture, parameter names and shapes, and the same batches as the Go step benchmark
(models/settransformer/stepbench/stepbench.go, `geloattack bench -what step,unmix`), and times full training
steps on one CUDA GPU. It is a timing reference, not a training script: the data are Gaussian
noise, generated once on the GPU before timing (the cost of a step does not depend on the values).

Model (both tasks), per models/settransformer/{encoder,decoder,model,unmix,params}.go:
  in_proj   Linear(d -> h), no bias                                    u: (B, N, d) -> x: (B, N, h)
  cls       learned (h) row prepended (retrieval only)                 x: (B, N+1, h)
  layers.i  pre-norm Llama-2 block, no positions, no causal mask:
              x += o_proj(MHA(RMSNorm(x)))        heads = H, head dim h/H, scale 1/sqrt(h/H)
              x += down_proj(silu(gate_proj(RMSNorm(x))) * up_proj(RMSNorm(x)))
  norm      final RMSNorm (eps 1e-5, weight only)
  retrieval: q = L2norm(retrieval_head(x[:, 0]))  (B, e); multi-positive InfoNCE, tau = 0.05,
             cosine scores against C = 2B in-batch candidates (B, C), 2 positives per set.
  unmix:     no CLS. Decoder of dec_layers = 2 blocks over S = N learned slot queries (S, h):
               z += SelfAttn(RMSNorm(z)); z += CrossAttn(RMSNorm(z), enc rows, key mask);
               z += SwiGLU(RMSNorm(z)); final dec.norm
             H_hat = row_head(z) (B, S, d); A_hat = mix_q(E) mix_k(Z)^T / sqrt(h) (B, N, S)
             loss (losses/ot, ot.DefaultConfig: balanced, eps 0.05, 50 Sinkhorn iterations):
               1.0 * L_cyc + 1.0 * L_OT + 1e-3 * ||A_hat||^2/(N S) + 0.1 * (mean||h_hat|| - mean||h||)^2/m^2
             against n_clean = 3N/4 Gaussian clean rows per set, m = sqrt(d) (as stepbench.go).
Init: linear weights, cls and slots N(0, 0.02); o_proj and down_proj N(0, 0.02/sqrt(2 L)) with L the
encoder's (decoder's) block count; norm weights 1.
Step: zero_grad, forward, loss, backward, clip_grad_norm_(1.0), AdamW (lr 1e-4, betas 0.9/0.999,
eps 1e-8, weight decay 0.1 on 2-D "*.weight" parameters whose name has no "norm", as
engine.DefaultDecay; 0 elsewhere), i.e. what stepbench.go's step does. `--clip 0` drops the clipping.
Rows per step = B * N, as stepbench.go counts them (the CLS row is not counted).

Presets (config.go presets + stepbench.go benchShapes; d = e = 4096):
  tiny  h128 L2  H4  mlp 512   B4  N64
  small h256 L4  H8  mlp 1024  B8  N128
  paper h384 L24 H12 mlp 1536  B16 N256

What differs from the Go implementation (none of it changes the FLOP-dominant structure):
  * The unmix and retrieval losses (after the model's last GEMM: retrieval_head, row_head and
    the A_hat product) run in fp32 with autocast off, whatever --precision says; the Go engine is
    fp32 throughout. The loss GEMMs (pairwise cost H_hat H^T, cycle A_hat H_hat) are then fp32
    (TF32 only under --precision tf32).
  * Sinkhorn's column update takes logsumexp over dim 1 of logK instead of materialising a
    transposed copy of logK as the Go tape does; same math, same number of iterations and shapes
    (logK: (B, S, n_clean)), gradients through all 50 unrolled iterations as in Go.
  * Row sums and squared row norms use torch.sum where the Go tape uses GEMMs with a ones vector
    (a few MFLOP, counted by the Go GEMM counter, not by torch's FlopCounterMode).
  * stepbench.go's batches have no padding (mask nil, every count = N), so the padding machinery of
    the losses (logZero marginals, per-set counts, row masks) is not reproduced: with no padding it
    reduces to the plain means implemented here. Attention does take an optional key-padding mask
    (--key-mask passes an all-real boolean mask, which keeps SDPA off its flash kernel).
  * With --sdpa (default) attention is F.scaled_dot_product_attention (flash / memory-efficient
    kernels). The Go CUDA backend materialises the (Nq, Nk) scores per head with cuBLAS, closer
    to --no-sdpa (matmul, softmax, matmul).
  * The Go step timing is a mean over steps after one warm-up step; this script reports the median
    (and the mean) of per-step CUDA-event times after --warmup steps.

FLOPs: torch.utils.flop_counter.FlopCounterMode over one forward + backward (not the optimiser),
which counts matmul-like ops only (mm, bmm, addmm, SDPA forward and backward incl. its recompute).
MFU = flops / median step time / peak: H100 SXM dense 989 TFLOP/s for bf16 (494 tf32, 67 fp32, as
internal/benchkit's PeakFLOPS); --peak-tflops overrides. The peak used is printed.
"""

import argparse
import gc
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Configuration: presets and benchmark shapes, mirrored from config.go and stepbench.go.
# ---------------------------------------------------------------------------------------------

PRESETS = {
    # name: (hidden h, layers, heads, SwiGLU hidden)
    "tiny": (128, 2, 4, 512),
    "small": (256, 4, 8, 1024),
    "paper": (384, 24, 12, 1536),
}
BENCH_SHAPES = {
    # name: (B sets per batch, N rows per set)
    "tiny": (4, 64),
    "small": (8, 128),
    "paper": (16, 256),
}
INPUT_DIM = 4096  # d: width of the rows of U (Llama-2 7B)
CANDIDATE_DIM = 4096  # e: width of the candidate text embeddings
RMS_EPS = 1e-5
INIT_STD = 0.02
TEMPERATURE = 0.05  # InfoNCE tau (fixed: the presets do not learn it)
BENCH_DEC_LAYERS = 2  # stepbench.go benchDecLayers
BENCH_SLOTS_PER_N = 1  # stepbench.go benchSlotsPerN: S = N

# ot.DefaultConfig()
OT_EPS = 0.05
OT_ITERS = 50
W_CYC = 1.0
W_OT = 1.0
LAMBDA_A = 1e-3
W_NORM = 0.1

# Dense peaks of the H100 SXM / H200 by precision, the same table as internal/benchkit's PeakFLOPS, so MFU
# figures are comparable with `geloattack bench` on the same precision. bf16 989 is the reference.
PEAK_TFLOPS = {"bf16": 989.0, "tf32": 494.0, "fp32": 67.0}

# NumParams of the Go models at the bench shapes (go test on models/settransformer), to check that
# the parameter shapes here are the same: (retrieval, unmix with dec_layers 2 and S = N).
GO_NUM_PARAMS = {
    "tiny": (1573632, 2270720),
    "small": (6294016, 9080832),
    "paper": (59788032, 66081792),
}


# Features of recent releases, with the fallbacks this file uses on older ones (the Debian
# python3-torch 1.13 of the CPU comparison): RMSNorm written out, attention as matmul-softmax-matmul.
HAS_RMS_NORM = hasattr(F, "rms_norm")
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")

# ---------------------------------------------------------------------------------------------
# Model.
# ---------------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim. x: (..., h) -> (..., h)."""

    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x):
        # The weight is cast to x's dtype so that the fused kernel sees one dtype under autocast
        # (x bf16, weight fp32 master); in fp32 the cast is a no-op.
        w = self.weight.to(x.dtype)
        if HAS_RMS_NORM:
            return F.rms_norm(x, (x.shape[-1],), w, RMS_EPS)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * w  # torch < 2.4


def linear(n_in, n_out, std):
    """Bias-free Linear, weight (n_out, n_in) ~ N(0, std)."""
    lin = nn.Linear(n_in, n_out, bias=False)
    nn.init.normal_(lin.weight, mean=0.0, std=std)
    return lin


class Attention(nn.Module):
    """Multi-head attention with q/k/v/o projections (h, h), no bias, no positions, no causal mask.

    xq: (B, Nq, h) queries; xkv: (B, Nk, h) keys and values (the same tensor for self-attention);
    key_mask: (B, Nk) bool, True for real keys, or None -> (B, Nq, h) after o_proj.
    """

    def __init__(self, h, heads, out_std, use_sdpa):
        super().__init__()
        self.heads = heads
        self.use_sdpa = use_sdpa and HAS_SDPA
        self.q_proj = linear(h, h, INIT_STD)
        self.k_proj = linear(h, h, INIT_STD)
        self.v_proj = linear(h, h, INIT_STD)
        self.o_proj = linear(h, h, out_std)

    def forward(self, xq, xkv, key_mask):
        B, Nq, h = xq.shape
        Nk = xkv.shape[1]
        H, dh = self.heads, h // self.heads
        q = self.q_proj(xq).view(B, Nq, H, dh).transpose(1, 2)  # q: (B, H, Nq, dh)
        k = self.k_proj(xkv).view(B, Nk, H, dh).transpose(1, 2)  # k: (B, H, Nk, dh)
        v = self.v_proj(xkv).view(B, Nk, H, dh).transpose(1, 2)  # v: (B, H, Nk, dh)
        m = None if key_mask is None else key_mask[:, None, None, :]  # m: (B, 1, 1, Nk) bool
        if self.use_sdpa:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # o: (B, H, Nq, dh)
        else:
            s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))  # s: (B, H, Nq, Nk)
            if m is not None:
                s = s.masked_fill(~m, float("-inf"))
            p = torch.softmax(s, dim=-1)  # p: (B, H, Nq, Nk)
            o = torch.matmul(p.to(v.dtype), v)  # o: (B, H, Nq, dh)
        o = o.transpose(1, 2).reshape(B, Nq, h)  # o: (B, Nq, h)
        return self.o_proj(o)


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)): x (..., h) -> (..., h), inner width mlp."""

    def __init__(self, h, mlp, out_std):
        super().__init__()
        self.gate_proj = linear(h, mlp, INIT_STD)
        self.up_proj = linear(h, mlp, INIT_STD)
        self.down_proj = linear(mlp, h, out_std)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # (..., mlp) -> (..., h)


class Block(nn.Module):
    """Pre-norm block: x += Attn(RMSNorm(x)); [z += CrossAttn(RMSNorm(z), mem)]; x += SwiGLU(RMSNorm(x))."""

    def __init__(self, h, heads, mlp, out_std, use_sdpa, cross=False):
        super().__init__()
        self.attn_norm = RMSNorm(h)
        self.attn = Attention(h, heads, out_std, use_sdpa)
        if cross:
            self.cross_norm = RMSNorm(h)
            self.cross_attn = Attention(h, heads, out_std, use_sdpa)
        self.mlp_norm = RMSNorm(h)
        self.mlp = SwiGLU(h, mlp, out_std)

    def forward(self, x, key_mask, mem=None, mem_mask=None):
        # x: (B, n, h); key_mask: (B, n) or None; mem: (B, N, h) encoder rows (decoder only).
        a = self.attn_norm(x)
        x = x + self.attn(a, a, key_mask)
        if mem is not None:
            c = self.cross_norm(x)
            x = x + self.cross_attn(c, mem, mem_mask)  # mem enters as it is (already final-normed)
        return x + self.mlp(self.mlp_norm(x))


class Encoder(nn.Module):
    """in_proj d -> h, optional CLS row, `layers` blocks, final RMSNorm."""

    def __init__(self, d, h, layers, heads, mlp, use_sdpa, cls):
        super().__init__()
        out_std = INIT_STD / math.sqrt(2 * layers)
        self.in_proj = linear(d, h, INIT_STD)
        if cls:
            self.cls = nn.Parameter(torch.randn(h) * INIT_STD)
        else:
            self.cls = None
        self.layers = nn.ModuleList(Block(h, heads, mlp, out_std, use_sdpa) for _ in range(layers))
        self.norm = RMSNorm(h)

    def forward(self, u, mask):
        # u: (B, N, d); mask: (B, N) bool or None.
        x = self.in_proj(u)  # x: (B, N, h)
        if self.cls is not None:
            B = x.shape[0]
            cls = self.cls.to(x.dtype).view(1, 1, -1).expand(B, 1, -1)  # cls: (B, 1, h)
            x = torch.cat([cls, x], dim=1)  # x: (B, N+1, h), CLS at row 0
            if mask is not None:
                mask = torch.cat([mask.new_ones(B, 1), mask], dim=1)  # mask: (B, N+1)
        for blk in self.layers:
            x = blk(x, mask)
        return self.norm(x)  # (B, N[+1], h)


class RetrievalModel(nn.Module):
    """Encoder with CLS + retrieval_head (h -> e) + L2 normalise + multi-positive InfoNCE."""

    def __init__(self, h, layers, heads, mlp, use_sdpa):
        super().__init__()
        self.enc = Encoder(INPUT_DIM, h, layers, heads, mlp, use_sdpa, cls=True)
        self.retrieval_head = linear(h, CANDIDATE_DIM, INIT_STD)

    def forward(self, u, mask, cand, pos):
        # u: (B, N, d); mask: (B, N) bool or None; cand: (C, e); pos: (B, C) bool -> loss ().
        x = self.enc(u, mask)  # x: (B, N+1, h)
        r = self.retrieval_head(x[:, 0])  # r: (B, e)
        with torch.autocast(device_type=r.device.type, enabled=False):
            q = F.normalize(r.float(), dim=-1, eps=1e-12)  # q: (B, e), the model's output
            # Cosine as the Go tape's CosineScores: both sides L2-normalised (q a second time).
            qn = F.normalize(q, dim=-1, eps=1e-12)
            cn = F.normalize(cand, dim=-1, eps=1e-12)  # cn: (C, e)
            s = torch.matmul(qn, cn.t()) / TEMPERATURE  # s: (B, C)
            lse_all = torch.logsumexp(s, dim=1)  # (B)
            lse_pos = torch.logsumexp(s.masked_fill(~pos, float("-inf")), dim=1)  # (B)
            return (lse_all - lse_pos).mean()


class Decoder(nn.Module):
    """S learned slots refined by blocks with self-attn over slots and cross-attn to the rows."""

    def __init__(self, h, layers, heads, mlp, slots, use_sdpa):
        super().__init__()
        out_std = INIT_STD / math.sqrt(2 * layers)
        self.slots = nn.Parameter(torch.randn(slots, h) * INIT_STD)  # (S, h)
        self.layers = nn.ModuleList(Block(h, heads, mlp, out_std, use_sdpa, cross=True) for _ in range(layers))
        self.norm = RMSNorm(h)

    def forward(self, e, mask):
        # e: (B, N, h) encoder rows; mask: (B, N) bool or None -> z: (B, S, h).
        B = e.shape[0]
        z = self.slots.to(e.dtype).unsqueeze(0).expand(B, -1, -1)  # z: (B, S, h)
        for blk in self.layers:
            z = blk(z, None, mem=e, mem_mask=mask)  # every slot is real: no self-attn mask
        return self.norm(z)


class MixHead(nn.Module):
    """A_hat = (E Wq)(Z Wk)^T / sqrt(h) (parameters mix_head.q.weight, mix_head.k.weight)."""

    def __init__(self, h):
        super().__init__()
        self.q = linear(h, h, INIT_STD)
        self.k = linear(h, h, INIT_STD)

    def forward(self, e, z):
        # e: (B, N, h), z: (B, S, h) -> (B, N, S)
        return torch.matmul(self.q(e), self.k(z).transpose(1, 2)) * (1.0 / math.sqrt(e.shape[-1]))


def sinkhorn_plan(log_k, la, lb, iters):
    """Unrolled balanced log-domain Sinkhorn (losses/ot/sinkhorn.go `sinkhorn`, tau = 1).

    log_k: (B, S, M) = -C/eps; la: (B, S), lb: (B, M) log-marginals -> plan (B, S, M).
    Keeps ua = u + log a and vb = v + log b, starting from v = 0.
    """
    vb = lb  # (B, M)
    ua = None
    for _ in range(iters):
        ua = la - torch.logsumexp(log_k + vb.unsqueeze(1), dim=2)  # ua: (B, S)
        vb = lb - torch.logsumexp(log_k + ua.unsqueeze(2), dim=1)  # vb: (B, M)
    return torch.exp(log_k + ua.unsqueeze(2) + vb.unsqueeze(1))  # (B, S, M)


def unmix_loss(h_hat, a_hat, u, h_clean, mean_norm):
    """ot.Unmix under ot.DefaultConfig with every row real (the bench batches have no padding).

    h_hat: (B, S, d) predicted rows; a_hat: (B, N, S); u: (B, N, d) observed rows (data);
    h_clean: (B, M, d) clean rows (data), M = n_clean; mean_norm: (B) m per set -> scalar ().
    """
    B, S, _ = h_hat.shape
    M = h_clean.shape[1]
    inv_m2 = 1.0 / (mean_norm * mean_norm)  # (B)

    # L_cyc = mean_b ||A_hat H_hat - U||_F^2 / ||U||_F^2  (ot.Cycle)
    resid = torch.matmul(a_hat, h_hat) - u  # resid: (B, N, d)
    l_cyc = (resid.square().sum(dim=(1, 2)) / u.square().sum(dim=(1, 2))).mean()

    # L_OT: pairwise cost C = ||h_hat_j - h_k||^2 / m^2 (expanded form, one batched GEMM), balanced
    # uniform marginals, 50 unrolled iterations, L = mean_b <P, C>  (ot.OT, pairCost)
    sq_hat = h_hat.square().sum(-1)  # (B, S)
    sq_h = h_clean.square().sum(-1)  # (B, M)
    dot = torch.matmul(h_hat, h_clean.transpose(1, 2))  # dot: (B, S, M)
    cost = (sq_hat.unsqueeze(2) + sq_h.unsqueeze(1) - 2.0 * dot) * inv_m2.view(B, 1, 1)  # (B, S, M)
    la = torch.full((B, S), -math.log(S), device=h_hat.device)  # log(1/S)
    lb = torch.full((B, M), -math.log(M), device=h_hat.device)  # log(1/n_clean)
    plan = sinkhorn_plan(cost * (-1.0 / OT_EPS), la, lb, OT_ITERS)  # plan: (B, S, M)
    l_ot = (plan * cost).sum() / B

    # ||A_hat||_F^2 / (n_obs S), batch mean  (ot.MixPenalty)
    l_a = a_hat.square().mean()

    # (mean_j ||h_hat_j|| - mean_k ||h_k||)^2 / m^2, batch mean  (ot.RowNormPenalty)
    gap = h_hat.norm(dim=-1).mean(dim=1) - h_clean.norm(dim=-1).mean(dim=1)  # (B)
    l_norm = (gap.square() * inv_m2).mean()

    return W_CYC * l_cyc + W_OT * l_ot + LAMBDA_A * l_a + W_NORM * l_norm


class UnmixModel(nn.Module):
    """Encoder without CLS + slot decoder + row head (h -> d) + mixing head, unmix loss."""

    def __init__(self, h, layers, heads, mlp, dec_layers, slots, use_sdpa):
        super().__init__()
        self.enc = Encoder(INPUT_DIM, h, layers, heads, mlp, use_sdpa, cls=False)
        self.dec = Decoder(h, dec_layers, heads, mlp, slots, use_sdpa)
        self.row_head = linear(h, INPUT_DIM, INIT_STD)
        self.mix_head = MixHead(h)

    def forward(self, u, mask, h_clean, mean_norm):
        # u: (B, N, d); mask: (B, N) bool or None; h_clean: (B, M, d); mean_norm: (B) -> loss ().
        e = self.enc(u, mask)  # e: (B, N, h)
        z = self.dec(e, mask)  # z: (B, S, h)
        h_hat = self.row_head(z)  # h_hat: (B, S, d)
        a_hat = self.mix_head(e, z)  # a_hat: (B, N, S)
        with torch.autocast(device_type=u.device.type, enabled=False):
            return unmix_loss(h_hat.float(), a_hat.float(), u, h_clean, mean_norm)


# ---------------------------------------------------------------------------------------------
# Benchmark.
# ---------------------------------------------------------------------------------------------


def decay_groups(model, weight_decay):
    """AdamW parameter groups with engine.DefaultDecay: decay 2-D '*.weight' not named '*norm*'."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.ndim == 2 and name.endswith(".weight") and "norm" not in name:
            decay.append(p)
        else:
            no_decay.append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def go_param_name(name):
    """The Go checkpoint name (params.go) of a parameter of this file's modules."""
    if name.startswith("enc."):
        return name[len("enc."):]
    if name == "dec.slots":
        return "slots"
    return name


def list_params(task, preset):
    """Print every parameter as `param task=... name=<Go name> shape=[...]` (built on the CPU)."""
    h, layers, heads, mlp = PRESETS[preset]
    _, N = BENCH_SHAPES[preset]
    if task == "retrieval":
        model = RetrievalModel(h, layers, heads, mlp, True)
    else:
        model = UnmixModel(h, layers, heads, mlp, BENCH_DEC_LAYERS, BENCH_SLOTS_PER_N * N, True)
    total = 0
    for name, p in model.named_parameters():
        total += p.numel()
        print(f"param task={task} preset={preset} name={go_param_name(name)} shape={list(p.shape)}")
    print(f"params task={task} preset={preset} total={total} go={GO_NUM_PARAMS[preset][0 if task == 'retrieval' else 1]}")


def build(task, preset, args, device):
    """Model, inputs (generated once on the GPU) and the rows per step for (task, preset)."""
    h, layers, heads, mlp = PRESETS[preset]
    B, N = BENCH_SHAPES[preset]
    if args.batch:
        B = args.batch
    if args.rows:
        N = args.rows
    g = torch.Generator(device=device)
    g.manual_seed(2)
    u = torch.randn(B, N, INPUT_DIM, device=device, generator=g)  # u: (B, N, d)
    mask = torch.ones(B, N, dtype=torch.bool, device=device) if args.key_mask else None  # (B, N)
    info = {"B": B, "N": N, "h": h, "layers": layers, "heads": heads, "mlp": mlp, "d": INPUT_DIM}
    if task == "retrieval":
        model = RetrievalModel(h, layers, heads, mlp, args.sdpa)
        C = 2 * B
        cand = torch.randn(C, CANDIDATE_DIM, device=device, generator=g)  # cand: (C, e)
        pos = torch.zeros(B, C, dtype=torch.bool, device=device)  # pos: (B, C)
        idx = torch.arange(B, device=device)
        pos[idx, 2 * idx] = True  # set b's positives are candidates 2b and 2b+1 (stepbench.go)
        pos[idx, 2 * idx + 1] = True
        inputs = (u, mask, cand, pos)
        info.update(e=CANDIDATE_DIM, candidates=C)
    else:
        S = BENCH_SLOTS_PER_N * N
        M = 3 * N // 4  # n_clean
        model = UnmixModel(h, layers, heads, mlp, BENCH_DEC_LAYERS, S, args.sdpa)
        h_clean = torch.randn(B, M, INPUT_DIM, device=device, generator=g)  # (B, n_clean, d)
        mean_norm = torch.full((B,), math.sqrt(INPUT_DIM), device=device)  # (B), as stepbench.go
        inputs = (u, mask, h_clean, mean_norm)
        info.update(slots=S, n_clean=M, dec_layers=BENCH_DEC_LAYERS)
    model = model.to(device)
    return model, inputs, B * N, info


def amp_context(precision, device_type="cuda"):
    """bf16 autocast on the device's type, or autocast off (fp32, tf32; and always on the CPU)."""
    if precision == "bf16" and device_type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return torch.autocast(device_type=device_type, enabled=False)


try:
    from torch.utils.flop_counter import FlopCounterMode  # noqa: F401  (torch >= 2.1)

    HAS_FLOP_COUNTER = True
except ImportError:
    HAS_FLOP_COUNTER = False


def count_flops(model, inputs, precision):
    """Matmul FLOPs of one forward + backward (FlopCounterMode); gradients are cleared after."""
    from torch.utils.flop_counter import FlopCounterMode

    model.zero_grad(set_to_none=True)
    counter = FlopCounterMode(display=False)
    with counter:
        with amp_context(precision):
            loss = model(*inputs)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def sync(device):
    """Wait for the device's queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_mib(device):
    """Peak memory in MiB: allocated device memory on a GPU, the process's peak RSS on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def make_optimizer(model, args):
    """AdamW as stepbench.go's step: decay groups of engine.DefaultDecay, foreach (or fused) kernels."""
    opt_kwargs = {"lr": args.lr, "betas": (0.9, 0.999), "eps": 1e-8}
    if args.fused_adamw:
        opt_kwargs["fused"] = True
    else:
        opt_kwargs["foreach"] = True
    return torch.optim.AdamW(decay_groups(model, args.weight_decay), **opt_kwargs)


def run_one(task, preset, args, device):
    torch.manual_seed(1)
    model, inputs, rows, info = build(task, preset, args, device)
    n_params = sum(p.numel() for p in model.parameters())
    go_params = None
    if not args.rows:  # S = N, so the unmix count depends on N
        go_params = GO_NUM_PARAMS[preset][0 if task == "retrieval" else 1]
    opt = make_optimizer(model, args)
    fwd = torch.compile(model) if args.compile else model
    params = [p for p in model.parameters()]

    def step():
        opt.zero_grad(set_to_none=True)
        with amp_context(args.precision, device.type):
            loss = fwd(*inputs)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        return loss

    on_gpu = device.type == "cuda"
    sync(device)
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    first_loss = None
    for i in range(args.warmup):
        loss = step()
        if i == 0:
            first_loss = loss.item()  # outside the timed steps; also checks the first step ran
    sync(device)

    ms = []
    t0 = time.perf_counter()
    if on_gpu:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps)]
        for i in range(args.steps):
            starts[i].record()
            loss = step()
            ends[i].record()
        torch.cuda.synchronize()
        ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    else:
        for i in range(args.steps):
            t = time.perf_counter()
            loss = step()
            ms.append(1000 * (time.perf_counter() - t))
    wall = time.perf_counter() - t0
    peak = peak_mib(device)
    last_loss = loss.item()

    # FLOPs of one forward + backward on the eager model (after timing, so they do not disturb it).
    flops = count_flops(model, inputs, args.precision) if HAS_FLOP_COUNTER else None

    step_ms = statistics.median(ms)
    rec = {
        "impl": "torch",
        "task": task,
        "preset": preset,
        "precision": args.precision,
        "sdpa": int(args.sdpa and HAS_SDPA),
        # the comparison figures first
        "step_ms": round(step_ms, 3),  # median over the timed steps (CUDA events; host clock on the CPU)
        "rows_per_s": round(rows / (step_ms / 1000), 1),
        "peak_mib": round(peak, 1),
        "gflop_per_step": round(flops / 1e9, 3) if flops else None,
        "mfu": round(flops / (step_ms / 1000) / (args.peak_tflops * 1e12), 4) if flops and on_gpu else None,
        # then the details
        "tflops": round(flops / (step_ms / 1000) / 1e12, 2) if flops else None,
        "peak_tflops": args.peak_tflops if on_gpu else None,
        "step_ms_mean": round(statistics.fmean(ms), 3),
        "step_ms_min": round(min(ms), 3),
        "step_ms_wall": round(1000 * wall / args.steps, 3),  # host clock over the timed loop / steps
        "compile": int(args.compile),
        "key_mask": int(args.key_mask),
        "clip": args.clip,
        **info,
        "rows": rows,
        "params": n_params,
        "params_go": go_params,
        "steps": args.steps,
        "warmup": args.warmup,
        "loss_first": round(first_loss, 5) if first_loss is not None else None,
        "loss_last": round(last_loss, 5),
    }
    del model, fwd, opt, inputs, params
    return rec


# ---------------------------------------------------------------------------------------------
# End to end (--e2e): generation included, as `geloattack bench -what train` runs it.
# ---------------------------------------------------------------------------------------------

# The paper-size run of runner/benchtrain.go: 4 positives x 58 window tokens + ceil(0.1 x 232) = 24
# gaussian shields = 256 rows a set, B = 16 sets, orthogonal mixing, every row observed, the
# store's texts 64..96 tokens of d = 4096 float32 rows with e = 4096 embeddings.
E2E_POSITIVES = 4
E2E_TOKENS = 58
E2E_SHIELD_FRAC = 0.1
E2E_SHIELD_SCALE = 0.5  # gelo.DefaultConfig's shield_scale
E2E_BATCH = 16
E2E_TEXTS = 64


class Generator:
    """The GELO examples a PyTorch user would write: windows of a host store, gaussian shields,
    a shuffled X = [H; S] copied to the device, and there a fresh Haar A per set from
    torch.linalg.qr of a float64 Gaussian with the sign fix, U = A X in fp32 (optionally rounded
    to bf16, --observe bf16), and the task's targets (candidates or clean rows).
    """

    def __init__(self, device, seed=1):
        self.device = device
        self.g = torch.Generator().manual_seed(seed)  # host stream: texts, windows, shields, order
        self.gd = torch.Generator(device=device).manual_seed(seed + 1)  # device stream: A
        lengths = torch.randint(64, 97, (E2E_TEXTS,), generator=self.g)
        # The store: (texts, 96, d) host rows, of which text t uses lengths[t]; (texts, e) embeddings.
        self.rows = torch.randn(E2E_TEXTS, 96, INPUT_DIM, generator=self.g)
        self.lengths = lengths
        self.emb = torch.randn(E2E_TEXTS, CANDIDATE_DIM, generator=self.g)
        self.clean = E2E_POSITIVES * E2E_TOKENS
        self.k = math.ceil(E2E_SHIELD_FRAC * self.clean)
        self.n = self.clean + self.k

    def batch(self, task, observe):
        """One step's inputs for task: (u, mask, cand, pos) or (u, mask, h_clean, mean_norm)."""
        B, n, d = E2E_BATCH, self.n, INPUT_DIM
        x = torch.empty(B, n, d)  # x: (B, n, d) host, X = [H; S] shuffled
        h = torch.empty(B, self.clean, d)  # h: (B, n_clean, d) host, clean rows in draw order
        mean_norm = torch.empty(B)
        texts = torch.empty(B, E2E_POSITIVES, dtype=torch.long)
        for b in range(B):
            texts[b] = torch.randperm(E2E_TEXTS, generator=self.g)[:E2E_POSITIVES]
            for j, t in enumerate(texts[b].tolist()):
                off = int(torch.randint(0, int(self.lengths[t]) - E2E_TOKENS + 1, (1,), generator=self.g))
                h[b, j * E2E_TOKENS:(j + 1) * E2E_TOKENS] = self.rows[t, off:off + E2E_TOKENS]
            m = h[b].norm(dim=1).mean()
            mean_norm[b] = m
            s = torch.randn(self.k, d, generator=self.g) * (E2E_SHIELD_SCALE * m / math.sqrt(d))  # (k, d)
            perm = torch.randperm(n, generator=self.g)
            x[b] = torch.cat([h[b], s])[perm]
        xd = x.to(self.device, non_blocking=True)
        # A: (B, n, n), Haar: Q of a Gaussian's QR with column j times sign(R_jj).
        gauss = torch.randn(B, n, n, dtype=torch.float64, device=self.device, generator=self.gd)
        q, r = torch.linalg.qr(gauss)
        q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
        u = torch.bmm(q.float(), xd)  # u: (B, n, d) = A X
        if observe == "bf16":
            u = u.bfloat16().float()
        if task == "retrieval":
            C = B * E2E_POSITIVES
            cand = self.emb[texts.reshape(-1)].to(self.device)  # cand: (C, e), in-batch positives
            pos = torch.zeros(B, C, dtype=torch.bool)
            for b in range(B):
                pos[b, b * E2E_POSITIVES:(b + 1) * E2E_POSITIVES] = True
            return (u, None, cand, pos.to(self.device))
        return (u, None, h.to(self.device), mean_norm.to(self.device))


def run_e2e(task, preset, args, device):
    """Time --steps steps after --warmup of generation + the training step, as bench -what train."""
    torch.manual_seed(1)
    h, layers, heads, mlp = PRESETS[preset]
    gen = Generator(device)
    n = gen.n
    if task == "retrieval":
        model = RetrievalModel(h, layers, heads, mlp, args.sdpa)
    else:
        model = UnmixModel(h, layers, heads, mlp, BENCH_DEC_LAYERS, n, args.sdpa)
    model = model.to(device)
    opt = make_optimizer(model, args)
    params = [p for p in model.parameters()]
    rows = E2E_BATCH * n

    def step():
        c0 = time.process_time()  # process CPU time, every thread
        t0 = time.perf_counter()
        inputs = gen.batch(task, args.observe)
        sync(device)
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with amp_context(args.precision, device.type):
            loss = model(*inputs)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        lv = loss.item()  # as the Go loop: the loss comes back to the host every step
        sync(device)
        t2 = time.perf_counter()
        return 1000 * (t2 - t0), 1000 * (t1 - t0), lv, time.process_time() - c0

    for _ in range(args.warmup):
        step()
    steps, gens, losses, cpus = [], [], [], []
    for _ in range(args.steps):
        st, gt, lv, ct = step()
        steps.append(st)
        gens.append(gt)
        losses.append(lv)
        cpus.append(ct)
    step_ms = statistics.median(steps)
    gen_ms = statistics.median(gens)
    cpu_s = statistics.fmean(cpus)
    cores = torch.get_num_threads() if device.type == "cpu" else 1
    return {
        "impl": "torch",
        "mode": "e2e",
        "task": task,
        "preset": preset,
        "precision": args.precision,
        "device": str(device),
        "step_ms": round(step_ms, 3),  # median of generation + step, host clock after a sync
        "rows_per_s": round(rows / (step_ms / 1000), 1),
        "gen_ms": round(gen_ms, 3),  # median of the generation part
        "gen_share": round(gen_ms / step_ms, 4),
        # process CPU time per step (all threads) and the rows/s it would give on `threads`
        # dedicated cores (the CPU figure to compare on a shared machine; host share on a GPU)
        "cpu_s_per_step": round(cpu_s, 3),
        "cpu_rows_per_s": round(rows / (cpu_s / cores), 1) if cpu_s > 0 else None,
        "step_ms_mean": round(statistics.fmean(steps), 3),
        "step_ms_min": round(min(steps), 3),
        "step_ms_max": round(max(steps), 3),
        "peak_mib": round(peak_mib(device), 1),
        "threads": torch.get_num_threads(),
        "B": E2E_BATCH,
        "N": n,
        "d": INPUT_DIM,
        "observe": args.observe,
        "params": sum(p.numel() for p in params),
        "steps": args.steps,
        "warmup": args.warmup,
        "loss_first": round(losses[0], 5),
        "loss_last": round(losses[-1], 5),
    }


def fmt_line(rec):
    parts = []
    for k, v in rec.items():
        if k == "impl":
            continue
        parts.append(f"{k}={v}")
    return "torch " + " ".join(parts)


def parse_list(s, allowed, what):
    items = [x.strip() for x in s.split(",") if x.strip()]
    if items == ["all"]:
        return list(allowed)
    for x in items:
        if x not in allowed:
            sys.exit(f"--{what}: unknown {x!r} (want one of {', '.join(allowed)}, comma-separated, or all)")
    return items


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="retrieval,unmix", help="retrieval, unmix, or both comma-separated (default both)")
    ap.add_argument("--preset", default="paper", help="tiny, small, paper, comma-separated, or all (default paper)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    ap.add_argument("--precision", choices=["bf16", "fp32", "tf32"], default="bf16",
                    help="bf16: autocast bf16 over fp32 master weights; fp32: strict fp32 (TF32 off); tf32: fp32 with TF32 matmuls")
    ap.add_argument("--sdpa", action=argparse.BooleanOptionalAction, default=True,
                    help="F.scaled_dot_product_attention (default) or --no-sdpa: matmul, softmax, matmul")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (off: the reference is eager)")
    ap.add_argument("--key-mask", action="store_true",
                    help="pass an all-real (B, N) key-padding mask to attention (stepbench.go passes none)")
    ap.add_argument("--clip", type=float, default=1.0, help="clip_grad_norm_ max norm as stepbench.go; 0 disables")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1, help="AdamW decay of 2-D weights (stepbench.go: 0.1)")
    ap.add_argument("--fused-adamw", action="store_true", help="AdamW(fused=True) instead of the foreach default")
    ap.add_argument("--batch", type=int, default=0, help="override B (sets per batch)")
    ap.add_argument("--rows", type=int, default=0, help="override N (rows per set)")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="peak TFLOP/s for MFU (default by precision, H100 SXM dense: bf16 989, tf32 494, fp32 67)")
    ap.add_argument("--json", default="", help="append one JSON object per result line to this file")
    ap.add_argument("--list-params", action="store_true",
                    help="print the parameters (Go names, shapes) and totals, then exit (no GPU needed)")
    ap.add_argument("--device", default="cuda",
                    help="cuda (default), cuda:N or cpu; the CPU computes in fp32 whatever --precision says")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads (torch.set_num_threads); default: every core (os.cpu_count)")
    ap.add_argument("--e2e", action="store_true",
                    help="end to end: each step generates its batch (store windows, shields, Haar A by "
                         "torch.linalg.qr, U = A X on the device) before training on it; paper-size sets "
                         "of runner/benchtrain.go (B16 n256), as `geloattack bench -what train`")
    ap.add_argument("--observe", choices=["none", "bf16"], default="none",
                    help="--e2e: round U to bf16 before the model sees it (the sampler's observe_dtype)")
    args = ap.parse_args()

    tasks = parse_list(args.task, ["retrieval", "unmix"], "task")
    presets = parse_list(args.preset, list(PRESETS), "preset")
    if args.steps < 1 or args.warmup < 0:
        sys.exit("--steps must be >= 1 and --warmup >= 0")
    if args.compile and args.warmup < 1:
        sys.exit("--compile needs --warmup >= 1 (the first step compiles)")
    if args.list_params:
        for task in tasks:
            for preset in presets:
                list_params(task, preset)
        return
    if not args.peak_tflops:
        args.peak_tflops = PEAK_TFLOPS[args.precision]
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("no CUDA device visible to torch (--device cpu runs on the CPU)")
        dev_name = torch.cuda.get_device_name(device).replace(" ", "_")
        cuda = torch.version.cuda
    elif device.type == "cpu":
        import os

        torch.set_num_threads(args.threads or os.cpu_count())
        if args.precision != "fp32":
            print(f"torch-note --precision {args.precision} ignored on the CPU: fp32", flush=True)
            args.precision = "fp32"
        dev_name, cuda = f"cpu_{torch.get_num_threads()}_threads", None
    else:
        sys.exit(f"--device {args.device}: want cuda, cuda:N or cpu")

    # fp32 matmul precision: PyTorch's default ("highest", no TF32) unless tf32 is asked for; bf16
    # runs the model's GEMMs in bf16 through autocast and the fp32 loss GEMMs stay strict fp32.
    # Only this one setter is used: recent releases refuse a mix of the legacy allow_tf32 flags and
    # the newer fp32_precision attributes.
    if args.precision == "tf32":
        torch.set_float32_matmul_precision("high")

    print(f"torch-env torch={torch.__version__} cuda={cuda} device={dev_name} "
          f"fp32_matmul={torch.get_float32_matmul_precision()} peak_tflops={args.peak_tflops} (MFU denominator) "
          f"sdpa_available={int(HAS_SDPA)} rms_norm_available={int(HAS_RMS_NORM)}",
          flush=True)

    out = open(args.json, "a") if args.json else None
    failed = False
    for task in tasks:
        for preset in presets:
            try:
                rec = (run_e2e if args.e2e else run_one)(task, preset, args, device)
                rec["device"] = dev_name
                rec["torch"] = torch.__version__
            except torch.cuda.OutOfMemoryError as err:
                failed = True
                rec = {"impl": "torch", "task": task, "preset": preset, "precision": args.precision,
                       "sdpa": int(args.sdpa), "error": "oom: " + str(err).split("\n")[0].replace(" ", "_")}
            print(fmt_line(rec), flush=True)
            if out:
                out.write(json.dumps(rec) + "\n")
                out.flush()
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if out:
        out.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
