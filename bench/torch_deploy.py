#!/usr/bin/env python3
"""An external GELO deployer: a decoder's hidden-state rows computed by PyTorch in fp32, bf16 or fp16.

GELO's deployer computes the rows H it mixes (U = A[H; S]) with its own stack, not with geloattack's
float32 Go forward. This script is that deployer: it runs a Llama-family Hugging Face checkpoint (the
features of bench/torch_llama.py, whose config, checkpoint reader and RoPE frequencies it reuses) in a
compute dtype with the mixed-precision rules of Hugging Face transformers' eager modeling code, and
writes the rows in the layout `geloattack store import` reads, so that the attacks can be run on the
rows a real deployer would produce and their error against geloattack's rows can be measured.

Numerics (dtype bf16 or fp16; fp32 is plain float32 throughout). Every tensor the model holds is in the
storage dtype: weights (cast from the file with round-to-nearest-even, exact for a bf16 file read as
bf16), embeddings, activations, the residual stream. Every kernel reads storage-dtype inputs, computes
in float32 (GEMMs accumulate in float32) and rounds its output to the storage dtype once. Where
transformers upcasts, so does this:
  RMSNorm       mean(x^2), rsqrt and the scaling in float32, cast to the dtype, then gain * x in the dtype
  RoPE          inverse frequencies and angles in float32, cos/sin cast to the dtype, then
                q*cos + rotate_half(q)*sin as three rounded kernels
  attention     eager (default): S = q k^T rounded, S*scale rounded, softmax in float32 rounded, P v
                rounded; fused (--attention fused, FlashAttention-2-like): scores and softmax statistics
                in float32, exp(S - max) rounded to the dtype for the P v GEMM, normalised in float32,
                rounded once
  MLP           gate, up rounded; silu rounded; product rounded; down rounded; residual adds rounded
--kernels emulate (default) holds the values in float32 tensors and rounds after each kernel as above:
this is how a CUDA deployer's kernels round (float32 "opmath", one rounding per output) and it runs on
any CPU, also for fp16, which PyTorch 1.13 has no CPU matmul for. --kernels native instead holds
dtype tensors and lets PyTorch's own kernels for that dtype on --device round (on a GPU: the real cuBLAS
and elementwise kernels, whose accumulation order differs).

Input (--tokens): JSON lines, one text each: {"id": TEXT_ID, "tokens": [ids...], "bos": K}, where
TEXT_ID is a distinct integer >= 0 (the text's id in the attacked source, the store's text_id), tokens
are what geloattack's tokenizer gave (special tokens included) and K (default 0) is how many leading
tokens are the tokenizer's special prefix (BOS). Tokenizing happens on the geloattack side: this
machine has no Hugging Face tokenizers, and the attack must see the same ids anyway.

Output (--out DIR, which must not exist or be empty):
  DIR/<point>.<L>/text_<TEXT_ID>.npz  one per text and requested (point, block), `store import`'s layout:
      token_ids int32 (T,), attention_mask int8 (T,) (0 on the BOS rows with --drop-bos, which a store
      then leaves out while the other rows keep their true positions), embeddings float32 (T, d) (the
      dtype's values widened exactly), text_embedding float32 (d,) (the L2-normalised mean of the
      final-norm rows, BOS excluded: geloattack's decoder candidate embedding)
      point attn-input, L = 0..n-1: RMSNorm(h_L)*g_L, block L's input_layernorm output (the rows GELO
      mixes); point residual, L = 0..n: Hugging Face's hidden_states[L] (n: after the final norm)
  DIR/deployer.json  written last (its presence marks a complete run): which stack computed the rows
      (torch, python, numpy versions; device; dtype; kernels; attention), the model (directory,
      architecture, sha256 of config.json, weight dtypes in the file), the input (path, sha256,
      texts, tokens), the points and blocks, the BOS handling. Read it with geloattack's data/deployer.

CLI:
  python3 bench/torch_deploy.py --model DIR --tokens TEXTS.jsonl --out OUT --dtype bf16 \
      [--blocks 0,1] [--points attn-input,residual] [--drop-bos] [--kernels emulate|native] \
      [--attention eager|fused] [--device cpu] [--threads K]
  then: geloattack store import -in OUT/attn-input.0 -out STORE -layer 0 -model NAME
Self-tests: /usr/bin/python3 bench/test_torch_deploy.py
"""

import argparse
import hashlib
import json
import math
import os
import platform
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama as tl  # noqa: E402  (config, safetensors reader, RoPE frequencies)

FORMAT = "geloattack-deployer/1"
INFO_FILE = "deployer.json"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
POINTS = ("attn-input", "residual")
TEXT_EMBEDDING = ("mean of the final-norm rows (hidden_states[num_layers]) over the text's tokens, "
                  "BOS excluded, L2-normalised")


class Numerics:
    """How the deployer's kernels round: `out` is what one kernel writes (see the module docstring)."""

    def __init__(self, dtype, kernels):
        if kernels not in ("emulate", "native"):
            raise ValueError(f"--kernels {kernels!r}: want emulate or native")
        self.dtype = dtype
        # Emulation only matters below float32; fp32 is float32 either way.
        self.emulate = kernels == "emulate" and dtype != torch.float32
        self.hold = torch.float32 if self.emulate else dtype  # the torch dtype tensors are held in

    def out(self, x):
        """x rounded to the storage dtype, held as the model holds tensors."""
        if self.emulate:
            return x.to(self.dtype).to(torch.float32)
        return x.to(self.dtype)

    def weight(self, w):
        """A float32 weight as the deployer holds it: cast (rounded to nearest even) to the dtype."""
        return self.out(w.to(torch.float32))


class Deployer:
    """A Llama-family decoder computing like a transformers deployer in one storage dtype."""

    def __init__(self, model_dir, dtype=torch.float32, kernels="emulate", attention="eager", device="cpu"):
        if attention not in ("eager", "fused"):
            raise ValueError(f"--attention {attention!r}: want eager or fused")
        self.num = Numerics(dtype, kernels)
        self.attention = attention
        self.device = device
        if str(device).startswith("cuda"):
            # Emulation needs true float32 GEMMs; TF32 would round their inputs to 10 bits.
            torch.backends.cuda.matmul.allow_tf32 = False
        # torch_llama's Model validates the config against the checkpoint (names, shapes, unused
        # tensors) and gives float32 weights; they are then rounded to the storage dtype here.
        ref = tl.Model.load(model_dir, torch.float32, device)
        self.cfg = ref.cfg
        w = self.num.weight
        self.embed = w(ref.embed)
        self.norm = w(ref.norm)
        self.blocks = [{k: (w(v) if v is not None else None) for k, v in b.items()} for b in ref.blocks]
        # transformers computes the inverse frequencies, and the angles, in float32.
        self.inv_freq = tl.rope_inv_freq(self.cfg.head_dim, self.cfg.theta, self.cfg.rope_scaling,
                                         torch.float32).to(device)
        if kernels == "native" and dtype != torch.float32:
            self._check_native_kernels()

    def _check_native_kernels(self):
        """Fails early, and clearly, where PyTorch has no kernels for the dtype on the device."""
        x = torch.ones(2, 2, dtype=self.num.dtype, device=self.device)
        try:
            F.linear(x, x)
            torch.rsqrt(x)
            F.silu(x)
        except RuntimeError as e:
            raise ValueError(f"--kernels native: torch {torch.__version__} has no {self.num.dtype} kernels on "
                             f"{self.device} ({e}); use --kernels emulate") from None

    def rms_norm(self, x, g):
        """transformers' RMSNorm: statistics and scaling in float32, cast back, gain in the dtype."""
        out = self.num.out
        xf = x.to(torch.float32)
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.eps)
        return out(g * out(xf))

    def rope(self, x, cos, sin):
        """x * cos + rotate_half(x) * sin, each product and the sum a rounded kernel."""
        out = self.num.out
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # exact
        return out(out(x * cos) + out(rot * sin))

    def attend(self, q, k, v, mask):
        """Causal attention of (1, H, T, hd) heads; k, v already repeated to H heads."""
        out = self.num.out
        scale = 1.0 / math.sqrt(self.cfg.head_dim)
        if self.attention == "eager":
            s = out(torch.matmul(q, k.transpose(-1, -2)))
            s = out(s * scale)
            s = s.to(torch.float32).masked_fill(mask, float("-inf"))
            p = out(torch.softmax(s, dim=-1))
            return out(torch.matmul(p, v))
        # fused: one kernel whose score and softmax arithmetic stays in float32; only the
        # unnormalised probabilities are rounded, to feed the P v GEMM in the dtype.
        s = torch.matmul(q.to(torch.float32), k.to(torch.float32).transpose(-1, -2)) * scale
        s = s.masked_fill(mask, float("-inf"))
        e = torch.exp(s - s.amax(-1, keepdim=True))
        denom = e.sum(-1, keepdim=True)
        pv = torch.matmul(out(e).to(torch.float32), v.to(torch.float32))
        return out(pv / denom)

    @torch.no_grad()
    def forward(self, ids):
        """ids: one text's token ids (list) -> {"residual": [n+1 x (T, d)], "attn_input": [n x (T, d)]},
        float32 tensors holding the dtype's values."""
        cfg, out = self.cfg, self.num.out
        T = len(ids)
        if cfg.window is not None and T > cfg.window:
            raise ValueError(f"a text of {T} tokens exceeds sliding_window {cfg.window}, which is not implemented")
        H, K, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        rep = H // K
        pos = torch.arange(T, device=self.device, dtype=torch.float32)
        ang = pos[:, None] * self.inv_freq[None, :]
        ang = torch.cat([ang, ang], dim=-1)  # rotate-half layout: (T, hd)
        cos, sin = out(ang.cos()), out(ang.sin())
        mask = torch.ones(T, T, dtype=torch.bool, device=self.device).triu(1)
        ids_t = torch.tensor(ids, dtype=torch.int64, device=self.device)
        h = self.embed[ids_t][None]  # (1, T, d)
        residual, attn_input = [h], []

        def lin(x, w, b=None):
            return out(F.linear(x, w, b))

        for b in self.blocks:
            x = self.rms_norm(h, b["ln1"])
            attn_input.append(x)
            q = lin(x, b["q"], b["qb"]).view(1, T, H, hd)
            k = lin(x, b["k"], b["kb"]).view(1, T, K, hd)
            v = lin(x, b["v"], b["vb"]).view(1, T, K, hd)
            if cfg.qk_norm:  # Qwen3: per-head RMSNorm before RoPE
                q = self.rms_norm(q, b["qn"])
                k = self.rms_norm(k, b["kn"])
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (1, heads, T, hd)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            if rep > 1:
                k = k.repeat_interleave(rep, dim=1)
                v = v.repeat_interleave(rep, dim=1)
            a = self.attend(q, k, v, mask).transpose(1, 2).reshape(1, T, H * hd)
            h = out(h + lin(a, b["o"], b["ob"]))
            y = self.rms_norm(h, b["ln2"])
            act = out(F.silu(lin(y, b["gate"], b["gateb"])))
            h = out(h + lin(out(act * lin(y, b["up"], b["upb"])), b["down"], b["downb"]))
            residual.append(h)
        residual[cfg.layers] = self.rms_norm(h, self.norm)  # hidden_states[n]: after the final norm
        f32 = lambda t: t[0].to(torch.float32)  # noqa: E731
        return {"residual": [f32(t) for t in residual], "attn_input": [f32(t) for t in attn_input]}


# ---------------------------------------------------------------------------------------------
# Input and output.
# ---------------------------------------------------------------------------------------------


def read_texts(path, vocab, max_len=None):
    """The JSON-lines input: [(id, tokens, bos)], validated (distinct ids >= 0, ids in the vocabulary)."""
    texts, seen = [], {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{where}: not JSON: {e}") from None
            if not isinstance(rec, dict) or set(rec) - {"id", "tokens", "bos"}:
                raise ValueError(f"{where}: want an object with id, tokens and optionally bos")
            tid, toks, bos = rec.get("id"), rec.get("tokens"), rec.get("bos", 0)
            if not isinstance(tid, int) or isinstance(tid, bool) or tid < 0 or tid >= 1 << 63:
                raise ValueError(f"{where}: id {tid!r}: want an integer in [0, 2^63)")
            if tid in seen:
                raise ValueError(f"{where}: id {tid} already on line {seen[tid]}")
            seen[tid] = n
            if not isinstance(toks, list) or not toks:
                raise ValueError(f"{where}: tokens: want a non-empty list of ids")
            for j, x in enumerate(toks):
                if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < vocab:
                    raise ValueError(f"{where}: tokens[{j}] = {x!r}: not an id in [0, {vocab})")
            if max_len is not None and len(toks) > max_len:
                raise ValueError(f"{where}: {len(toks)} tokens, past max_position_embeddings {max_len}")
            if not isinstance(bos, int) or isinstance(bos, bool) or not 0 <= bos <= len(toks):
                raise ValueError(f"{where}: bos {bos!r}: want 0..{len(toks)} leading special tokens")
            texts.append((tid, toks, bos))
    if not texts:
        raise ValueError(f"{path}: no texts")
    return texts


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weight_dtypes(model_dir):
    """The tensor dtypes stored in the checkpoint's safetensors files, sorted."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    dts = set()
    for fn in files:
        st = tl.SafetensorsFile(os.path.join(model_dir, fn))
        dts.update(st.dtype(n) for n in st.keys())
        st.close()
    return sorted(dts)


def device_name(device):
    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"{platform.machine()} CPU"


def save_npz(path, **arrays):
    """np.savez through a temporary name, so that a killed run leaves no truncated .npz behind."""
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def text_embedding(final, bos):
    """geloattack's decoder candidate embedding from the final-norm rows (T, d): mean over the non-BOS
    rows (all rows when BOS is all there is), L2-normalised; computed in float64."""
    rows = final.double()
    if rows.shape[0] > bos:
        rows = rows[bos:]
    m = rows.mean(0)
    n = float(m.norm())
    return (m / n if n > 0 else m).float().cpu().numpy()


def deploy(model_dir, tokens_path, out_dir, dtype_name="bf16", blocks=(0,), points=("attn-input",),
           drop_bos=False, kernels="emulate", attention="eager", device="cpu"):
    """Runs every text alone (positions from 0, batch 1) and writes the requested rows; returns the info."""
    if dtype_name not in DTYPES:
        raise ValueError(f"--dtype {dtype_name!r}: want one of {sorted(DTYPES)}")
    for p in points:
        if p not in POINTS:
            raise ValueError(f"--points: {p!r}: want attn-input or residual")
    if not points or not blocks:
        raise ValueError("no points or no blocks to write")
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise ValueError(f"--out {out_dir}: exists and is not an empty directory (runs never overwrite)")
    dep = Deployer(model_dir, DTYPES[dtype_name], kernels, attention, device)
    cfg = dep.cfg
    for p in points:
        top = cfg.layers - 1 if p == "attn-input" else cfg.layers
        for L in blocks:
            if not 0 <= L <= top:
                raise ValueError(f"--blocks {L}: {p} rows exist for blocks 0..{top}")
    with open(os.path.join(model_dir, "config.json")) as f:
        raw_cfg = json.load(f)
    texts = read_texts(tokens_path, cfg.vocab, raw_cfg.get("max_position_embeddings"))
    dirs = {(p, L): os.path.join(out_dir, f"{p}.{L}") for p in points for L in blocks}
    for d in dirs.values():
        os.makedirs(d)
    for tid, toks, bos in texts:
        r = dep.forward(toks)
        emb = text_embedding(r["residual"][cfg.layers], bos)
        mask = np.ones(len(toks), np.int8)
        if drop_bos:
            mask[:bos] = 0
        ids = np.asarray(toks, np.int32)
        for (p, L), d in dirs.items():
            rows = (r["attn_input"] if p == "attn-input" else r["residual"])[L]
            save_npz(os.path.join(d, f"text_{tid:08d}.npz"), token_ids=ids, attention_mask=mask,
                     embeddings=rows.cpu().numpy().astype(np.float32), text_embedding=emb)
    info = {
        "format": FORMAT,
        "generator": "bench/torch_deploy.py",
        "framework": "pytorch",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "device": str(device),
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "dtype": dtype_name,
        "kernels": "emulate" if dep.num.emulate else "native",
        "attention": attention,
        "model": os.path.abspath(model_dir),
        "architecture": next((a for a in raw_cfg.get("architectures") or [] if a in tl.ARCHS), cfg.kind),
        "config_sha256": sha256_file(os.path.join(model_dir, "config.json")),
        "weight_dtypes": weight_dtypes(model_dir),
        "layers": cfg.layers,
        "hidden_size": cfg.hidden,
        "input": os.path.abspath(tokens_path),
        "input_sha256": sha256_file(tokens_path),
        "texts": len(texts),
        "tokens": sum(len(t) for _, t, _ in texts),
        "points": list(points),
        "blocks": sorted(blocks),
        "bos": "dropped" if drop_bos else "kept",
        "rows_dtype": "float32",
        "text_embedding": TEXT_EMBEDDING,
    }
    tmp = os.path.join(out_dir, INFO_FILE + ".partial")
    with open(tmp, "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, INFO_FILE))
    return info


def parse_ints(s, what):
    try:
        out = sorted({int(x) for x in s.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"{what} {s!r}: want comma-separated integers") from None
    if not out:
        raise ValueError(f"{what} {s!r}: empty")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF directory: config.json + model.safetensors (or index + shards)")
    ap.add_argument("--tokens", required=True, help='JSON lines {"id": N, "tokens": [...], "bos": K}')
    ap.add_argument("--out", required=True, help="output directory (must not exist or be empty)")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES), help="compute and storage dtype")
    ap.add_argument("--blocks", default="0", help="comma-separated block numbers L")
    ap.add_argument("--points", default="attn-input", help="comma-separated: attn-input, residual")
    ap.add_argument("--drop-bos", action="store_true", help="mask each text's leading `bos` rows out of the store")
    ap.add_argument("--kernels", default="emulate", choices=["emulate", "native"],
                    help="emulate: float32 kernels rounding every output (CUDA's way, any device); "
                         "native: torch's kernels for the dtype on --device")
    ap.add_argument("--attention", default="eager", choices=["eager", "fused"],
                    help="eager: transformers' matmul-softmax-matmul; fused: FlashAttention-like rounding")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    a = ap.parse_args(argv)
    try:
        if a.threads:
            torch.set_num_threads(a.threads)
        blocks = parse_ints(a.blocks, "--blocks")
        points = [p.strip() for p in a.points.split(",") if p.strip()]
        info = deploy(a.model, a.tokens, a.out, a.dtype, blocks, points, a.drop_bos, a.kernels, a.attention,
                      a.device)
        print(f"torch_deploy: wrote {a.out}: {info['texts']} texts, {info['tokens']} tokens, "
              f"{','.join(points)} of blocks {','.join(map(str, blocks))}, {a.dtype} "
              f"({info['kernels']} kernels, {a.attention} attention) on {info['device_name']}, "
              f"torch {torch.__version__}")
    except (ValueError, KeyError, FileNotFoundError) as e:
        print(f"torch_deploy: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
