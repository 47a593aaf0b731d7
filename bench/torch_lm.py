#!/usr/bin/env python3
"""PyTorch twin of the geloattack language-model training step (issue 27), for speed and for a check.

This file reimplements, in plain PyTorch (>= 1.13, Debian's python3-torch, on the CPU) and numpy, one
training step of the Go next-token language model: the same Llama-2 style decoder with the same
parameter names and shapes (Hugging Face names, so the Go checkpoint and this script exchange
safetensors files directly), the same loss, clipping and AdamW. No `transformers`, no `safetensors`
package: the safetensors reader and writer and the RoPE / RMSNorm helpers are bench/torch_llama.py's.

Model: V vocabulary, d hidden, f MLP width, L blocks, H heads (kv heads = H, head dim hd = d/H),
float32, row-major, no biases anywhere:
  model.embed_tokens.weight                       (V, d)
  model.layers.{i}.input_layernorm.weight         (d)
  model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (d, d)
  model.layers.{i}.post_attention_layernorm.weight (d)
  model.layers.{i}.mlp.gate_proj.weight, up_proj  (f, d);  mlp.down_proj.weight (d, f)
  model.norm.weight                               (d)
  lm_head tied: logits = h_final E^T with E = model.embed_tokens.weight.
Forward, for a batch of B sequences of T tokens (positions 0..T-1 within each sequence):
  x = E[ids]                                                                   (B, T, d)
  per block:  n = RMSNorm(x) * g_in           RMSNorm(x) = x / sqrt(mean_j x_j^2 + 1e-5)
              q, k, v = n Wq^T, n Wk^T, n Wv^T, split into H heads             (B, H, T, hd)
              q, k = RoPE(q), RoPE(k): HF Llama rotate-half, dimension i pairs with i + hd/2,
                     angle p * theta_i, theta_i = 10000^(-2i/hd), i < hd/2
              x += concat_heads(softmax(q k^T / sqrt(hd) + causal mask) v) Wo^T
              m = RMSNorm(x) * g_post;   x += (silu(m Wgate^T) * (m Wup^T)) Wdown^T
  logits = (RMSNorm(x) * g_final) E^T                                          (B, T, V)
Loss: the batch is a (B, T+1) int32 token array; inputs [:, :T], targets [:, 1:]; loss = mean over
all B*T positions of cross-entropy(logits, target).
Init (--bench only): every matrix N(0, 0.02), except o_proj and down_proj N(0, 0.02/sqrt(2L));
norm weights 1.
Step: zero_grad (set_to_none, torch 2's default), forward, loss, backward, torch.nn.utils.clip_grad_norm_(clip) over all gradients
(total L2 norm), torch.optim.AdamW(lr, betas (0.9, 0.95), eps 1e-8, weight_decay wd) with decoupled
decay only on 2-D parameters whose name ends in ".weight" and does not contain "norm" (the project's
engine.DefaultDecay: the tied embedding is decayed, the norm weights are not).

What differs from the Go step, as far as this script knows it (none of it changes the arithmetic's
structure or its cost):
  * RoPE's inverse frequencies and angles are computed in the compute dtype (float32, as HF does;
    float64 under --double). At T = 128, hd = 64 the float32 cos/sin are within 4.5e-6 of float64's.
  * Clipping is torch's: the gradients are always multiplied by min(1, clip / (norm + 1e-6));
    engine.ClipGradNorm multiplies by clip / (norm + 1e-6) only when norm > clip. The two differ only
    for norm in (clip - 1e-6, clip], by a factor within 1e-6 of 1.
  * Attention is matmul + softmax + matmul with a materialised (B, H, T, T) score tensor (torch 1.13
    has no scaled_dot_product_attention); the logits (B*T, V) are materialised whole (the Go step
    takes the cross-entropy in row chunks; the FLOPs are the same).
  * AdamW is torch 1.13's single-tensor CPU implementation (its default on the CPU).

CLI:
  python3 bench/torch_lm.py --bench [--vocab 32000 --hidden 384 --layers 6 --heads 6 --mlp 1024
          --seq 128 --batch 16 --steps 5 --warmup 2 --threads 2 --seed 1 --lr 3e-4 --weight-decay 0.1]
      times --steps training steps after --warmup untimed ones on random tokens (a seeded generator;
      all batches drawn before timing) and prints one JSON line:
      {"impl": "torch", ..., "median_s": ..., "step_s": [...], "tokens_per_s": B*T/median_s, ...}
  python3 bench/torch_lm.py --check DIR [--heads H] [--batch B --seq T] [--double]
      reads DIR/weights.safetensors (the names above, F32; V, d, f, L from the shapes),
      DIR/tokens.bin (little-endian int32, B*(T+1) values, row-major (B, T+1)) and DIR/step.json
      {"lr": ..., "weight_decay": ..., "heads": ..., "clip": 1.0} (optional "batch", "seq"; flags
      given on the command line must agree with it), runs forward + backward and ONE AdamW step as
      above (the first: bias-corrected moments), and writes
        DIR/torch_out.json: {"loss": ..., "grad_norm": (total norm before clipping), "clip_coef": ...,
          "grads": {name: [first 8 values..., sum, sum of squares]}  (gradients before clipping),
          "after": {name: [first 8 values..., sum, sum of squares]}  (weights after the step),
          "dtype": "float32"|"float64", ...}
          (a tensor with fewer than 8 values lists all of them; sums accumulated in float64)
        DIR/torch_after.safetensors: the updated weights, F32, in the input's names and order.
      --double computes everything (weights, moments, update) in float64: a tighter reference.
Self-tests: /usr/bin/python3 bench/test_torch_lm.py
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama as tl  # noqa: E402  (safetensors, RoPE, RMSNorm)

RMS_EPS = 1e-5
ROPE_THETA = 10000.0
INIT_STD = 0.02
BETAS = (0.9, 0.95)
ADAM_EPS = 1e-8
SUMMARY_HEAD = 8  # values listed per tensor in torch_out.json before sum and sum of squares


# ---------------------------------------------------------------------------------------------
# Parameters.
# ---------------------------------------------------------------------------------------------


def param_shapes(vocab, hidden, mlp, layers):
    """[(name, shape)] in the order the Go model registers them (embedding, blocks, final norm)."""
    out = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (hidden,)),
            (p + "self_attn.q_proj.weight", (hidden, hidden)),
            (p + "self_attn.k_proj.weight", (hidden, hidden)),
            (p + "self_attn.v_proj.weight", (hidden, hidden)),
            (p + "self_attn.o_proj.weight", (hidden, hidden)),
            (p + "post_attention_layernorm.weight", (hidden,)),
            (p + "mlp.gate_proj.weight", (mlp, hidden)),
            (p + "mlp.up_proj.weight", (mlp, hidden)),
            (p + "mlp.down_proj.weight", (hidden, mlp)),
        ]
    out.append(("model.norm.weight", (hidden,)))
    return out


def decayed(name, shape):
    """engine.DefaultDecay: 2-D, name ends in ".weight", no "norm" in it."""
    return len(shape) == 2 and name.endswith(".weight") and "norm" not in name


def init_params(vocab, hidden, mlp, layers, seed, dtype=torch.float32):
    """The bench init: matrices N(0, 0.02), o_proj / down_proj N(0, 0.02/sqrt(2L)), norms 1."""
    g = torch.Generator().manual_seed(seed)
    out_std = INIT_STD / math.sqrt(2 * layers)
    params = {}
    for name, shape in param_shapes(vocab, hidden, mlp, layers):
        if len(shape) == 1:
            t = torch.ones(shape, dtype=dtype)
        else:
            std = out_std if name.endswith(("o_proj.weight", "down_proj.weight")) else INIT_STD
            t = torch.empty(shape, dtype=dtype).normal_(0.0, std, generator=g)
        params[name] = t.requires_grad_()
    return params


def infer_dims(shapes):
    """(V, d, f, L) from {name: shape}, checking that the names and shapes are exactly the model's."""
    emb = shapes.get("model.embed_tokens.weight")
    if emb is None or len(emb) != 2:
        raise ValueError(f"model.embed_tokens.weight: shape {emb}, want (V, d)")
    vocab, hidden = emb
    layers = 0
    while f"model.layers.{layers}.input_layernorm.weight" in shapes:
        layers += 1
    gate = shapes.get("model.layers.0.mlp.gate_proj.weight")
    if layers == 0 or gate is None or len(gate) != 2:
        raise ValueError("no model.layers.0 block (input_layernorm, mlp.gate_proj) in the weights")
    mlp = gate[0]
    want = dict(param_shapes(vocab, hidden, mlp, layers))
    for name, shape in want.items():
        if name not in shapes:
            raise ValueError(f"tensor {name} {shape} missing")
        if tuple(shapes[name]) != shape:
            raise ValueError(f"tensor {name}: shape {list(shapes[name])}, want {list(shape)} "
                             f"(V {vocab}, d {hidden}, f {mlp}, L {layers})")
    extra = sorted(set(shapes) - set(want))
    if extra:
        raise ValueError(f"tensors the model does not use: {extra[:5]}")
    return vocab, hidden, mlp, layers


# ---------------------------------------------------------------------------------------------
# Forward and loss.
# ---------------------------------------------------------------------------------------------


class Rope:
    """cos/sin tables (T, hd) and the additive causal mask (T, T) for one (T, hd, dtype)."""

    def __init__(self, seq, head_dim, dtype):
        inv = tl.rope_inv_freq(head_dim, ROPE_THETA, None, dtype)
        self.cos, self.sin = tl.rope_cos_sin(inv, torch.arange(seq))
        self.mask = torch.full((seq, seq), float("-inf"), dtype=dtype).triu(1)


def forward_loss(params, batch, heads, layers, rope):
    """Mean next-token cross-entropy. batch: (B, T+1) int64; params: {name: tensor}. -> scalar"""
    inp, tgt = batch[:, :-1], batch[:, 1:]
    B, T = inp.shape
    E = params["model.embed_tokens.weight"]  # (V, d)
    d = E.shape[1]
    hd = d // heads
    x = F.embedding(inp, E)  # (B, T, d)
    for i in range(layers):
        p = f"model.layers.{i}."
        n = tl.rms_norm(x, params[p + "input_layernorm.weight"], RMS_EPS)

        def split(w):  # (B, T, d) -> (B, H, T, hd)
            return F.linear(n, params[p + w]).view(B, T, heads, hd).transpose(1, 2)

        q = tl.apply_rope(split("self_attn.q_proj.weight"), rope.cos, rope.sin)
        k = tl.apply_rope(split("self_attn.k_proj.weight"), rope.cos, rope.sin)
        v = split("self_attn.v_proj.weight")
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + rope.mask  # (B, H, T, T)
        a = torch.matmul(torch.softmax(s, dim=-1), v)  # (B, H, T, hd)
        x = x + F.linear(a.transpose(1, 2).reshape(B, T, d), params[p + "self_attn.o_proj.weight"])
        m = tl.rms_norm(x, params[p + "post_attention_layernorm.weight"], RMS_EPS)
        h = F.silu(F.linear(m, params[p + "mlp.gate_proj.weight"])) * F.linear(m, params[p + "mlp.up_proj.weight"])
        x = x + F.linear(h, params[p + "mlp.down_proj.weight"])
    out = tl.rms_norm(x, params["model.norm.weight"], RMS_EPS)
    logits = F.linear(out.reshape(B * T, d), E)  # (B*T, V), tied head
    return F.cross_entropy(logits, tgt.reshape(B * T))


def make_optimizer(params, lr, weight_decay):
    """AdamW with the decay groups of engine.DefaultDecay."""
    dec = [t for n, t in params.items() if decayed(n, tuple(t.shape))]
    rest = [t for n, t in params.items() if not decayed(n, tuple(t.shape))]
    groups = [{"params": dec, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=BETAS, eps=ADAM_EPS)


def train_step(params, opt, batch, heads, layers, rope, clip, on_grads=None):
    """One step; returns (loss, grad norm before clipping). on_grads(params) sees the raw gradients."""
    opt.zero_grad(set_to_none=True)  # torch 2.x default; fresh gradients, no fill
    loss = forward_loss(params, batch, heads, layers, rope)
    loss.backward()
    if on_grads is not None:
        on_grads(params)
    if clip > 0:
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
    else:
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t.grad) for t in params.values()]))
    opt.step()
    return float(loss), float(norm)


# ---------------------------------------------------------------------------------------------
# --check: one step on given weights and tokens, written out for the Go side to compare.
# ---------------------------------------------------------------------------------------------


def summary(t):
    """[first 8 values..., sum, sum of squares] of a tensor, as Python floats (sums in float64)."""
    a = t.detach().reshape(-1).to(torch.float64)
    return [float(v) for v in a[:SUMMARY_HEAD]] + [float(a.sum()), float((a * a).sum())]


def read_tokens(path, batch, seq, vocab):
    """tokens.bin: little-endian int32, (batch, seq+1) row-major, every id in [0, vocab)."""
    raw = np.fromfile(path, dtype="<i4")
    want = batch * (seq + 1)
    if raw.size != want or os.path.getsize(path) != 4 * want:
        raise ValueError(f"{path}: {os.path.getsize(path)} bytes, want {want} int32 values "
                         f"(batch {batch} x (seq {seq} + 1))")
    bad = np.flatnonzero((raw < 0) | (raw >= vocab))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{path}: value {i} (row {i // (seq + 1)}, column {i % (seq + 1)}): id {raw[i]} "
                         f"outside the vocabulary [0, {vocab})")
    return torch.from_numpy(raw.astype(np.int64).reshape(batch, seq + 1))


def resolve(flag, cfg, key, what):
    """A setting given by flag and/or step.json: they must agree when both are there."""
    if flag is not None and key in cfg and cfg[key] != flag:
        raise ValueError(f"step.json: {key} {cfg[key]}, but --{what} {flag}")
    val = flag if flag is not None else cfg.get(key)
    if val is None:
        raise ValueError(f"{key}: give --{what} or step.json \"{key}\"")
    return val


def check(dirname, heads=None, batch=None, seq=None, double=False):
    """Runs the --check step in DIR and writes torch_out.json and torch_after.safetensors; returns the out dict."""
    with open(os.path.join(dirname, "step.json")) as f:
        cfg = json.load(f)
    for key in ("lr", "weight_decay"):
        if not isinstance(cfg.get(key), (int, float)):
            raise ValueError(f"{dirname}/step.json: {key} {cfg.get(key)!r}, want a number")
    heads = int(resolve(heads, cfg, "heads", "heads"))
    batch = int(resolve(batch, cfg, "batch", "batch"))
    seq = int(resolve(seq, cfg, "seq", "seq"))
    clip = float(cfg.get("clip", 1.0))
    dtype = torch.float64 if double else torch.float32

    st = tl.SafetensorsFile(os.path.join(dirname, "weights.safetensors"))
    try:
        for n in st.keys():
            if st.dtype(n) != "F32":
                raise ValueError(f"weights.safetensors: tensor {n}: dtype {st.dtype(n)}, want F32")
        vocab, hidden, mlp, layers = infer_dims({n: tuple(st.shape(n)) for n in st.keys()})
        if hidden % heads or (hidden // heads) % 2:
            raise ValueError(f"hidden {hidden} with {heads} heads: head dim must be an even integer")
        names = [n for n, _ in param_shapes(vocab, hidden, mlp, layers)]
        params = {n: torch.from_numpy(st.get(n)).to(dtype).requires_grad_() for n in names}
    finally:
        st.close()
    tokens = read_tokens(os.path.join(dirname, "tokens.bin"), batch, seq, vocab)

    rope = Rope(seq, hidden // heads, dtype)
    opt = make_optimizer(params, float(cfg["lr"]), float(cfg["weight_decay"]))
    grads = {}

    def keep(ps):
        grads.update({n: summary(t.grad) for n, t in ps.items()})

    loss, norm = train_step(params, opt, tokens, heads, layers, rope, clip, on_grads=keep)
    out = {
        "loss": loss,
        "grad_norm": norm,
        "clip": clip,
        "clip_coef": min(1.0, clip / (norm + 1e-6)) if clip > 0 else 1.0,
        "dtype": "float64" if double else "float32",
        "vocab": vocab, "hidden": hidden, "mlp": mlp, "layers": layers, "heads": heads,
        "batch": batch, "seq": seq, "lr": float(cfg["lr"]), "weight_decay": float(cfg["weight_decay"]),
        "torch": torch.__version__,
        "grads": grads,
        "after": {n: summary(t) for n, t in params.items()},
    }
    with open(os.path.join(dirname, "torch_out.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    tl.write_safetensors(os.path.join(dirname, "torch_after.safetensors"),
                         {n: t.detach().to(torch.float32).numpy() for n, t in params.items()})
    return out


# ---------------------------------------------------------------------------------------------
# --bench.
# ---------------------------------------------------------------------------------------------


def bench(a):
    torch.set_num_threads(a.threads)
    batch, seq = a.batch or 16, a.seq or 128
    heads = a.heads or 6
    if a.hidden % heads or (a.hidden // heads) % 2:
        raise ValueError(f"hidden {a.hidden} with {heads} heads: head dim must be an even integer")
    params = init_params(a.vocab, a.hidden, a.mlp, a.layers, a.seed)
    opt = make_optimizer(params, a.lr, a.weight_decay)
    rope = Rope(seq, a.hidden // heads, torch.float32)
    g = torch.Generator().manual_seed(a.seed + 1)
    batches = [torch.randint(0, a.vocab, (batch, seq + 1), generator=g) for _ in range(a.warmup + a.steps)]
    times, losses = [], []
    for i, b in enumerate(batches):
        t0 = time.perf_counter()
        loss, _ = train_step(params, opt, b, heads, a.layers, rope, a.clip)
        dt = time.perf_counter() - t0
        losses.append(loss)
        if i >= a.warmup:
            times.append(dt)
    med = statistics.median(times)
    line = {
        "impl": "torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "vocab": a.vocab, "hidden": a.hidden, "layers": a.layers, "heads": heads, "mlp": a.mlp,
        "seq": seq, "batch": batch, "steps": a.steps, "warmup": a.warmup,
        "params": sum(t.numel() for t in params.values()),
        "median_s": med, "step_s": times, "tokens_per_s": batch * seq / med,
        "loss_first": losses[0], "loss_last": losses[-1],
    }
    print(json.dumps(line), flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--bench", action="store_true", help="time training steps on a random-init model")
    mode.add_argument("--check", metavar="DIR", help="one step on DIR's weights and tokens, written out")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=None, help="attention heads (bench default 6)")
    ap.add_argument("--mlp", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=None, help="tokens per sequence T (bench default 128)")
    ap.add_argument("--batch", type=int, default=None, help="sequences per step B (bench default 16)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-4, help="bench only (--check reads step.json)")
    ap.add_argument("--weight-decay", type=float, default=0.1, help="bench only")
    ap.add_argument("--clip", type=float, default=1.0, help="bench only; 0: no clipping")
    ap.add_argument("--double", action="store_true", help="--check in float64")
    a = ap.parse_args(argv)
    try:
        if a.bench:
            if a.steps < 1 or a.warmup < 0:
                raise ValueError(f"--steps {a.steps} --warmup {a.warmup}: want steps >= 1, warmup >= 0")
            return bench(a)
        torch.set_num_threads(a.threads)
        out = check(a.check, heads=a.heads, batch=a.batch, seq=a.seq, double=a.double)
        print(f"torch_lm check {a.check}: loss {out['loss']:.9g} grad_norm {out['grad_norm']:.9g} "
              f"({out['dtype']})", flush=True)
        return 0
    except (ValueError, OSError) as e:
        print(f"torch_lm: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
