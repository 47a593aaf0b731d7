#!/usr/bin/env python3
"""PyTorch reference forward of Llama-family decoders read from a Hugging Face directory.

An independent reference for the Go decoder (models/decoder): written from the published equations,
not from either implementation, so that agreement between the two is evidence. Plain PyTorch (>= 1.13,
Debian's python3-torch) and numpy; no `transformers`, no `safetensors` package: both file formats are
read and written here.

Input: a Hugging Face directory with config.json and model.safetensors, or shards listed in
model.safetensors.index.json ("weight_map": tensor name -> shard file). Safetensors layout: 8-byte
little-endian header length n, n bytes of JSON {name: {dtype, shape, data_offsets: [begin, end)}}
(offsets relative to the end of the header), then the raw little-endian data. Read: F32, F16, BF16
(the upper 16 bits of an IEEE float32), F64. Written: F32 (the tests also write F16 and BF16, rounded
to nearest even).

Architectures (config.json "architectures"): LlamaForCausalLM (Llama, Llama-2, Llama-3/3.1/3.2),
MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM. Fields used: hidden_size d,
intermediate_size m, num_hidden_layers n, num_attention_heads H, num_key_value_heads K (grouped-query
attention, default H), head_dim (default d/H), rms_norm_eps, rope_theta, rope_scaling (null, "default"
or "llama3"; others are refused), tie_word_embeddings (default false for these four), attention_bias,
mlp_bias (Llama), vocab_size, hidden_act (must be silu), sliding_window (refused when a text is longer).

Forward (Llama paper, Touvron et al. 2023, sections 2.2; Llama-2 paper for GQA; Llama 3 model card and
the Llama 3.1 release for the rope scaling; Qwen2 / Qwen3 model cards for the biases and the q/k norm),
for one text of ids t_0..t_{T-1} at positions p = 0..T-1:
  h_0 = E[ids]                                               embedding                    (T, d)
  for block l = 0..n-1:
    x   = RMSNorm(h_l) * g_attn           RMSNorm(x) = x / sqrt(mean_j x_j^2 + eps)       (T, d)  "attn_input.l"
    q   = x Wq^T (+bq)  -> H heads of head_dim hd;  k = x Wk^T (+bk), v = x Wv^T (+bv) -> K heads
          (q/k/v biases: Qwen2 always; Llama / Mistral / Qwen3 when attention_bias, which also gives o_proj one)
    Qwen3: q_h = RMSNorm(q_h) * g_qnorm, k_h = RMSNorm(k_h) * g_knorm per head (over hd), before RoPE
    RoPE (RoFormer, Su et al. 2021) in the rotate-half layout of HF checkpoints: dimension i pairs with
          i + hd/2, theta_i = rope_theta^(-2i/hd), i < hd/2;
          y_i = x_i cos(p theta_i) - x_{i+hd/2} sin(p theta_i),  y_{i+hd/2} = x_{i+hd/2} cos(p theta_i) + x_i sin(p theta_i)
          llama3 scaling (Llama 3.1) on theta_i with wavelength w_i = 2 pi / theta_i, old context L0,
          factor s, low/high frequency factors a, b: w_i < L0/b: unchanged; w_i > L0/a: theta_i / s;
          else (1 - c) theta_i / s + c theta_i with c = (L0 / w_i - a) / (b - a).
    attention per head (GQA: query head j reads kv head j // (H/K), i.e. kv heads repeated H/K times):
          A = softmax(q k^T / sqrt(hd) + causal mask (-inf above the diagonal)) v
    h'  = h_l + concat_heads(A) Wo^T (+bo)
    y   = RMSNorm(h') * g_mlp
    h_{l+1} = h' + Wdown (silu(Wgate y) * Wup y)             SwiGLU (Shazeer 2020), silu(z) = z sigmoid(z)
  out = RMSNorm(h_n) * g_final;  logits = out E^T (tie_word_embeddings) or out Wlm^T.
Outputs follow the HF hidden_states convention: "residual.L" for L < n is the input of block L
(L = 0 is the embedding output, h_L), and "residual.n" is `out`, after the final norm.

Precision: float32 by default, as HF runs a float32 model: RoPE's inverse frequencies and angles are
computed in the compute dtype (in float32 the angle p*theta_i carries a relative error ~6e-8, ~1e-4 rad
at p ~ 2000); --f64 converts the weights to float64 and computes everything in float64 (a tighter
reference; the output file is float32 either way). Each text runs alone (batch 1, no padding).

CLI:
  python3 bench/torch_llama.py --model DIR --ids IDS.json --out OUT.safetensors [--logits] [--f64]
      IDS.json: {"texts": [[id, ...], ...]}. OUT holds F32 tensors t{i}.residual.{L} (T_i, d) for
      L = 0..n, t{i}.attn_input.{L} (T_i, d) for L = 0..n-1 and, with --logits, t{i}.logits (T_i, vocab).
  python3 bench/torch_llama.py --bench --model DIR --tokens N [--seq T] [--threads K] [--batch B]
      extraction throughput (float32, no grad): N random ids in sequences of T; prints one line
      `torch_llama tokens_per_s=... threads=... d=... layers=... ...` (median of 3 runs after a warmup).
      Without --model, --like NAME [--set KEY=JSON ...] benchmarks a random-init model of that shape.
  python3 bench/torch_llama.py --init-random DIR --like tiny-llama|tiny-llama3|tiny-gqa-tied|tiny-qwen2|tiny-qwen3 --seed S
      writes a small random-init HF directory (config.json + model.safetensors, F32) for self-tests;
      --set KEY=JSON overrides config fields (e.g. --set hidden_size=256), --init-dtype F16|BF16.
Self-tests: /usr/bin/python3 bench/test_torch_llama.py
"""

import argparse
import json
import math
import mmap
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Safetensors.
# ---------------------------------------------------------------------------------------------

# dtype name -> (bytes per element, little-endian numpy dtype of the stored bits)
_ST_DTYPES = {
    "F64": (8, "<f8"),
    "F32": (4, "<f4"),
    "F16": (2, "<f2"),
    "BF16": (2, "<u2"),
}


def bf16_bits_to_f32(bits):
    """BF16 bit patterns (uint16 array) -> float32: bf16 is the upper half of a float32."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 array -> BF16 bit patterns (uint16), rounded to nearest, ties to even; NaN stays NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded).astype(np.uint16)


class SafetensorsFile:
    """A safetensors file opened by mmap; get(name) returns a float32 (F64: float64) numpy copy.

    skip_other: tensors of a dtype get() cannot read (integer buffers such as a BERT checkpoint's
    position_ids) are listed in .skipped instead of refusing the file."""

    def __init__(self, path, skip_other=False):
        self.path = path
        self.skipped = []
        self._f = open(path, "rb")
        size = os.fstat(self._f.fileno()).st_size
        if size < 8:
            raise ValueError(f"safetensors {path}: {size} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", self._f.read(8))
        if n > size - 8:
            raise ValueError(f"safetensors {path}: header length {n} past the end of the file ({size} bytes)")
        try:
            header = json.loads(self._f.read(n).decode("utf-8"))
        except ValueError as e:
            raise ValueError(f"safetensors {path}: header is not JSON: {e}") from e
        self.metadata = header.pop("__metadata__", None) or {}
        self._data_start = 8 + n
        self._data_len = size - 8 - n
        self.entries = {}
        for name, e in header.items():
            dt = e.get("dtype")
            if dt not in _ST_DTYPES and skip_other:
                self.skipped.append(name)
                continue
            if dt not in _ST_DTYPES:
                raise ValueError(f"safetensors {path}: tensor {name}: dtype {dt!r} not supported "
                                 f"(want one of {sorted(_ST_DTYPES)})")
            shape = [int(s) for s in e["shape"]]
            begin, end = (int(o) for o in e["data_offsets"])
            want = _ST_DTYPES[dt][0] * int(np.prod(shape, dtype=np.int64))
            if end - begin != want or begin < 0 or end > self._data_len:
                raise ValueError(f"safetensors {path}: tensor {name}: data_offsets [{begin}, {end}) do not "
                                 f"hold {dt} {shape} ({want} bytes) inside {self._data_len} data bytes")
            self.entries[name] = (dt, shape, begin, end)
        self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ) if size > 0 else None

    def keys(self):
        return list(self.entries)

    def shape(self, name):
        return list(self.entries[name][1])

    def dtype(self, name):
        return self.entries[name][0]

    def get(self, name):
        dt, shape, begin, end = self.entries[name]
        raw = np.frombuffer(self._mm, dtype=_ST_DTYPES[dt][1], count=(end - begin) // _ST_DTYPES[dt][0],
                            offset=self._data_start + begin)
        if dt == "BF16":
            out = bf16_bits_to_f32(raw)
        elif dt == "F64":
            out = raw.astype(np.float64)
        else:
            out = raw.astype(np.float32)  # a native-endian copy (F16 widened exactly)
        return out.reshape(shape)

    def close(self):
        if self._mm is not None:
            self._mm.close()
        self._f.close()


def _encode(arr, dtype):
    if dtype == "F32":
        return np.ascontiguousarray(arr, dtype="<f4").tobytes()
    if dtype == "F64":
        return np.ascontiguousarray(arr, dtype="<f8").tobytes()
    if dtype == "F16":
        return np.ascontiguousarray(arr, dtype="<f2").tobytes()
    if dtype == "BF16":
        return f32_to_bf16_bits(np.asarray(arr, dtype=np.float32)).astype("<u2").tobytes()
    raise ValueError(f"safetensors: cannot write dtype {dtype!r}")


class SafetensorsWriter:
    """Streams tensors into a safetensors file whose header (names, dtypes, shapes) is known up front.

    entries: [(name, dtype, shape)] in the order the data will be written by write(); the header is
    padded with spaces to a multiple of 8 bytes so that the data start 8-byte aligned.
    """

    def __init__(self, path, entries, metadata=None):
        header = {}
        if metadata:
            header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
        off = 0
        self._order = []
        for name, dt, shape in entries:
            if name in header:
                raise ValueError(f"safetensors {path}: duplicate tensor name {name}")
            nbytes = _ST_DTYPES[dt][0] * int(np.prod(shape, dtype=np.int64))
            header[name] = {"dtype": dt, "shape": [int(s) for s in shape], "data_offsets": [off, off + nbytes]}
            self._order.append((name, dt, tuple(int(s) for s in shape)))
            off += nbytes
        hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
        hb += b" " * ((-len(hb)) % 8)
        self.path = path
        self._f = open(path, "wb")
        self._f.write(struct.pack("<Q", len(hb)))
        self._f.write(hb)
        self._next = 0

    def write(self, name, arr):
        if self._next >= len(self._order):
            raise ValueError(f"safetensors {self.path}: tensor {name} not in the header")
        want, dt, shape = self._order[self._next]
        arr = np.asarray(arr)
        if name != want or tuple(arr.shape) != shape:
            raise ValueError(f"safetensors {self.path}: wrote {name} {tuple(arr.shape)}, header expects "
                             f"{want} {shape} next")
        self._f.write(_encode(arr, dt))
        self._next += 1

    def close(self):
        self._f.close()
        if self._next != len(self._order):
            raise ValueError(f"safetensors {self.path}: {len(self._order) - self._next} tensors not written")


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """Writes {name: array} with one dtype (F32, F16, BF16, F64) for all tensors, in dict order."""
    w = SafetensorsWriter(path, [(k, dtype, np.shape(v)) for k, v in tensors.items()], metadata)
    for k, v in tensors.items():
        w.write(k, v)
    w.close()


class CheckpointReader:
    """The tensors of an HF directory: model.safetensors, or shards via model.safetensors.index.json."""

    def __init__(self, model_dir):
        self.dir = model_dir
        single = os.path.join(model_dir, "model.safetensors")
        index = os.path.join(model_dir, "model.safetensors.index.json")
        self._files = {}
        self._where = {}
        if os.path.exists(index):
            with open(index) as f:
                wmap = json.load(f).get("weight_map")
            if not isinstance(wmap, dict) or not wmap:
                raise ValueError(f"{index}: no weight_map")
            for name, fn in wmap.items():
                if fn not in self._files:
                    self._files[fn] = SafetensorsFile(os.path.join(model_dir, fn))
                if name not in self._files[fn].entries:
                    raise ValueError(f"{index}: tensor {name} mapped to {fn}, which does not hold it")
                self._where[name] = fn
        elif os.path.exists(single):
            self._files["model.safetensors"] = SafetensorsFile(single)
            for name in self._files["model.safetensors"].keys():
                self._where[name] = "model.safetensors"
        else:
            raise FileNotFoundError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")

    def names(self):
        return set(self._where)

    def shape(self, name):
        return self._files[self._where[name]].shape(name)

    def get(self, name):
        if name not in self._where:
            raise KeyError(f"{self.dir}: tensor {name} not in the checkpoint")
        return self._files[self._where[name]].get(name)

    def close(self):
        for f in self._files.values():
            f.close()


# ---------------------------------------------------------------------------------------------
# Config.
# ---------------------------------------------------------------------------------------------

ARCHS = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
         "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}


class Config:
    """The fields of an HF config.json that the forward uses, validated."""

    def __init__(self, raw, source="config.json"):
        def need(k):
            if raw.get(k) is None:
                raise ValueError(f"{source}: field {k} missing")
            return raw[k]

        archs = raw.get("architectures") or []
        kinds = [ARCHS[a] for a in archs if a in ARCHS]
        if not kinds:
            mt = raw.get("model_type")
            if mt in ARCHS.values():
                kinds = [mt]
            else:
                raise ValueError(f"{source}: architectures {archs} / model_type {mt!r}: want one of {sorted(ARCHS)}")
        self.kind = kinds[0]
        self.hidden = int(need("hidden_size"))
        self.inter = int(need("intermediate_size"))
        self.layers = int(need("num_hidden_layers"))
        self.heads = int(need("num_attention_heads"))
        self.kv_heads = int(raw.get("num_key_value_heads") or self.heads)
        self.head_dim = int(raw.get("head_dim") or self.hidden // self.heads)
        self.eps = float(need("rms_norm_eps"))
        self.theta = float(raw.get("rope_theta") or 10000.0)
        self.vocab = int(need("vocab_size"))
        self.tied = bool(raw.get("tie_word_embeddings", False))
        self.qk_norm = self.kind == "qwen3"
        ab = bool(raw.get("attention_bias", False))
        self.qkv_bias = True if self.kind == "qwen2" else ab
        self.o_bias = False if self.kind == "qwen2" else ab
        self.mlp_bias = bool(raw.get("mlp_bias", False)) if self.kind == "llama" else False
        act = raw.get("hidden_act", "silu")
        if act not in ("silu", "swish"):
            raise ValueError(f"{source}: hidden_act {act!r}: only silu is supported")
        if self.heads % self.kv_heads != 0:
            raise ValueError(f"{source}: num_attention_heads {self.heads} not a multiple of "
                             f"num_key_value_heads {self.kv_heads}")
        if self.head_dim % 2 != 0:
            raise ValueError(f"{source}: head_dim {self.head_dim} is odd; RoPE pairs dimensions")
        if raw.get("head_dim") is None and self.hidden % self.heads != 0:
            raise ValueError(f"{source}: hidden_size {self.hidden} not a multiple of heads {self.heads}")
        prf = raw.get("partial_rotary_factor", 1.0)
        if prf not in (None, 1, 1.0):
            raise ValueError(f"{source}: partial_rotary_factor {prf} not supported")
        # The window past which a sliding-window model attends differently from full causal attention.
        self.window = None
        sw = raw.get("sliding_window")
        if sw is not None and (self.kind == "mistral" or raw.get("use_sliding_window", False)):
            self.window = int(sw)
        rs = raw.get("rope_scaling")
        self.rope_scaling = None
        if rs is not None:
            t = rs.get("rope_type", rs.get("type"))
            if t == "default":
                pass
            elif t == "llama3":
                self.rope_scaling = {
                    "factor": float(rs["factor"]),
                    "low_freq_factor": float(rs["low_freq_factor"]),
                    "high_freq_factor": float(rs["high_freq_factor"]),
                    "original_max_position_embeddings": float(rs["original_max_position_embeddings"]),
                }
                if self.rope_scaling["high_freq_factor"] <= self.rope_scaling["low_freq_factor"]:
                    raise ValueError(f"{source}: rope_scaling: high_freq_factor must exceed low_freq_factor")
            else:
                raise ValueError(f"{source}: rope_scaling type {t!r} not supported (null, default or llama3)")


def load_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        return Config(json.load(f), path)


# ---------------------------------------------------------------------------------------------
# Model.
# ---------------------------------------------------------------------------------------------


def rope_inv_freq(head_dim, theta, scaling, dtype):
    """theta_i = theta^(-2i/hd), i < hd/2, computed in dtype; llama3 scaling if given. -> (hd/2,)"""
    exponent = torch.arange(0, head_dim, 2, dtype=torch.int64).to(dtype) / head_dim
    inv = 1.0 / (theta ** exponent)
    if scaling is None:
        return inv
    s = scaling["factor"]
    a, b = scaling["low_freq_factor"], scaling["high_freq_factor"]
    l0 = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    c = (l0 / wavelen - a) / (b - a)
    mid = (1 - c) * inv / s + c * inv
    out = torch.where(wavelen > l0 / a, inv / s, mid)
    return torch.where(wavelen < l0 / b, inv, out)


def rope_cos_sin(inv_freq, positions):
    """cos, sin of p*theta_i laid out for rotate-half: (T, hd), column i and i + hd/2 equal."""
    ang = positions.to(inv_freq.dtype)[:, None] * inv_freq[None, :]  # (T, hd/2)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """x: (B, heads, T, hd) -> x cos + rotate_half(x) sin, rotate_half(x) = [-x2, x1]."""
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


def rms_norm(x, g, eps):
    """x / sqrt(mean(x^2) + eps) * g over the last dim."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


class Model:
    """A Llama-family decoder: config + weights as torch tensors in one compute dtype."""

    def __init__(self, cfg, reader, dtype=torch.float32, device="cpu"):
        self.cfg = cfg
        self.dtype = dtype
        self.device = device
        used = set()
        names = reader.names()

        def w(name, shape):
            if name not in names:
                raise ValueError(f"{reader.dir}: tensor {name} missing (config {cfg.kind})")
            if list(reader.shape(name)) != list(shape):
                raise ValueError(f"{reader.dir}: tensor {name} has shape {reader.shape(name)}, want {list(shape)}")
            used.add(name)
            return torch.from_numpy(reader.get(name)).to(device=device, dtype=dtype)

        d, hd, H, K, m = cfg.hidden, cfg.head_dim, cfg.heads, cfg.kv_heads, cfg.inter
        self.embed = w("model.embed_tokens.weight", (cfg.vocab, d))  # (V, d)
        self.blocks = []
        for i in range(cfg.layers):
            p = f"model.layers.{i}."
            b = {
                "ln1": w(p + "input_layernorm.weight", (d,)),
                "q": w(p + "self_attn.q_proj.weight", (H * hd, d)),
                "k": w(p + "self_attn.k_proj.weight", (K * hd, d)),
                "v": w(p + "self_attn.v_proj.weight", (K * hd, d)),
                "o": w(p + "self_attn.o_proj.weight", (d, H * hd)),
                "ln2": w(p + "post_attention_layernorm.weight", (d,)),
                "gate": w(p + "mlp.gate_proj.weight", (m, d)),
                "up": w(p + "mlp.up_proj.weight", (m, d)),
                "down": w(p + "mlp.down_proj.weight", (d, m)),
            }
            for t, n in (("q", H * hd), ("k", K * hd), ("v", K * hd)):
                b[t + "b"] = w(p + f"self_attn.{t}_proj.bias", (n,)) if cfg.qkv_bias else None
            b["ob"] = w(p + "self_attn.o_proj.bias", (d,)) if cfg.o_bias else None
            for t, n in (("gate", m), ("up", m), ("down", d)):
                b[t + "b"] = w(p + f"mlp.{t}_proj.bias", (n,)) if cfg.mlp_bias else None
            if cfg.qk_norm:
                b["qn"] = w(p + "self_attn.q_norm.weight", (hd,))
                b["kn"] = w(p + "self_attn.k_norm.weight", (hd,))
            self.blocks.append(b)
        self.norm = w("model.norm.weight", (d,))
        if cfg.tied:
            self.lm_head = self.embed
            used.add("lm_head.weight")  # some tied checkpoints store a copy; the tie wins, as in HF
        else:
            self.lm_head = w("lm_head.weight", (cfg.vocab, d))
        extra = sorted(n for n in names - used if not n.endswith("rotary_emb.inv_freq"))
        if extra:
            raise ValueError(f"{reader.dir}: {len(extra)} tensors the {cfg.kind} config does not use, "
                             f"e.g. {extra[:3]} (a config/checkpoint mismatch?)")
        self.inv_freq = rope_inv_freq(hd, cfg.theta, cfg.rope_scaling, dtype).to(device)

    @classmethod
    def load(cls, model_dir, dtype=torch.float32, device="cpu"):
        cfg = load_config(model_dir)
        reader = CheckpointReader(model_dir)
        try:
            return cls(cfg, reader, dtype, device)
        finally:
            reader.close()

    @torch.no_grad()
    def forward(self, ids, logits=False):
        """ids: (B, T) int64 -> {"residual": [n+1 x (B, T, d)], "attn_input": [n x (B, T, d)], "logits"}."""
        cfg = self.cfg
        B, T = ids.shape
        if cfg.window is not None and T > cfg.window:
            raise ValueError(f"sequence of {T} tokens exceeds sliding_window {cfg.window}; "
                             f"sliding-window attention is not implemented")
        H, K, hd, eps = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.eps
        rep = H // K
        cos, sin = rope_cos_sin(self.inv_freq, torch.arange(T, device=self.device))  # (T, hd)
        mask = torch.ones(T, T, dtype=torch.bool, device=self.device).triu(1)  # True above the diagonal
        scale = 1.0 / math.sqrt(hd)
        h = self.embed[ids]  # (B, T, d)
        residual, attn_input = [h], []
        for b in self.blocks:
            x = rms_norm(h, b["ln1"], eps)
            attn_input.append(x)
            q = F.linear(x, b["q"], b["qb"]).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
            k = F.linear(x, b["k"], b["kb"]).view(B, T, K, hd).transpose(1, 2)  # (B, K, T, hd)
            v = F.linear(x, b["v"], b["vb"]).view(B, T, K, hd).transpose(1, 2)
            if cfg.qk_norm:
                q = rms_norm(q, b["qn"], eps)
                k = rms_norm(k, b["kn"], eps)
            q = apply_rope(q, cos, sin)
            k = apply_rope(k, cos, sin)
            if rep > 1:  # query head j reads kv head j // rep
                k = k.repeat_interleave(rep, dim=1)
                v = v.repeat_interleave(rep, dim=1)
            s = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, H, T, T)
            s = s.masked_fill(mask, float("-inf"))
            a = torch.matmul(torch.softmax(s, dim=-1), v)  # (B, H, T, hd)
            a = a.transpose(1, 2).reshape(B, T, H * hd)
            h = h + F.linear(a, b["o"], b["ob"])
            y = rms_norm(h, b["ln2"], eps)
            mlp = F.silu(F.linear(y, b["gate"], b["gateb"])) * F.linear(y, b["up"], b["upb"])
            h = h + F.linear(mlp, b["down"], b["downb"])
            residual.append(h)
        out = rms_norm(h, self.norm, eps)
        residual[cfg.layers] = out  # HF hidden_states: the last entry is after the final norm
        res = {"residual": residual, "attn_input": attn_input}
        if logits:
            res["logits"] = F.linear(out, self.lm_head)  # (B, T, V)
        return res


# ---------------------------------------------------------------------------------------------
# Random-init checkpoints for the self-tests.
# ---------------------------------------------------------------------------------------------

TINY = {
    "tiny-llama": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64,
                       intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=4, rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                       tie_word_embeddings=False, attention_bias=False, vocab_size=96),
    # Llama 3.1-style rope scaling with a short original context so that every branch is used at hd 16.
    "tiny-llama3": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64,
                        intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0,
                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
                        tie_word_embeddings=False, attention_bias=False, vocab_size=96),
    "tiny-gqa-tied": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64,
                          intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                          num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=500000.0,
                          rope_scaling=None, tie_word_embeddings=True, attention_bias=False, vocab_size=80),
    "tiny-qwen2": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=64,
                       intermediate_size=144, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None,
                       tie_word_embeddings=True, use_sliding_window=False, sliding_window=32,
                       vocab_size=100),
    # head_dim * heads (128) != hidden_size (64), as in Qwen3-0.6B.
    "tiny-qwen3": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=64,
                       intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=1000000.0,
                       rope_scaling=None, tie_word_embeddings=True, attention_bias=False, vocab_size=88),
}


def random_weights(cfg, seed):
    """Random weights for cfg from numpy's seeded generator: linear N(0, 1/fan_in), norms 1 + N(0, 0.1^2),
    biases N(0, 0.1^2), embedding N(0, 1). Returns {HF name: float32 array}."""
    rng = np.random.default_rng(seed)
    d, hd, H, K, m = cfg.hidden, cfg.head_dim, cfg.heads, cfg.kv_heads, cfg.inter

    def lin(o, i):
        return (rng.standard_normal((o, i)) / math.sqrt(i)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def bias(n):
        return (0.1 * rng.standard_normal(n)).astype(np.float32)

    t = {"model.embed_tokens.weight": rng.standard_normal((cfg.vocab, d)).astype(np.float32)}
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(d)
        t[p + "self_attn.q_proj.weight"] = lin(H * hd, d)
        t[p + "self_attn.k_proj.weight"] = lin(K * hd, d)
        t[p + "self_attn.v_proj.weight"] = lin(K * hd, d)
        t[p + "self_attn.o_proj.weight"] = lin(d, H * hd)
        if cfg.qkv_bias:
            t[p + "self_attn.q_proj.bias"] = bias(H * hd)
            t[p + "self_attn.k_proj.bias"] = bias(K * hd)
            t[p + "self_attn.v_proj.bias"] = bias(K * hd)
        if cfg.o_bias:
            t[p + "self_attn.o_proj.bias"] = bias(d)
        if cfg.qk_norm:
            t[p + "self_attn.q_norm.weight"] = norm(hd)
            t[p + "self_attn.k_norm.weight"] = norm(hd)
        t[p + "post_attention_layernorm.weight"] = norm(d)
        t[p + "mlp.gate_proj.weight"] = lin(m, d)
        t[p + "mlp.up_proj.weight"] = lin(m, d)
        t[p + "mlp.down_proj.weight"] = lin(d, m)
        if cfg.mlp_bias:
            t[p + "mlp.gate_proj.bias"] = bias(m)
            t[p + "mlp.up_proj.bias"] = bias(m)
            t[p + "mlp.down_proj.bias"] = bias(d)
    t["model.norm.weight"] = norm(d)
    if not cfg.tied:
        t["lm_head.weight"] = lin(cfg.vocab, d)
    return t


def init_random(out_dir, like, seed, dtype="F32", overrides=None):
    """Writes config.json + model.safetensors of a random-init tiny model; returns the config dict."""
    if like not in TINY:
        raise ValueError(f"--like {like!r}: want one of {sorted(TINY)}")
    raw = dict(TINY[like])
    raw.update(overrides or {})
    raw.setdefault("hidden_act", "silu")
    raw.setdefault("max_position_embeddings", 2048)
    raw["torch_dtype"] = "float32"
    cfg = Config(raw, f"--like {like}")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(raw, f, indent=2)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), random_weights(cfg, seed), dtype,
                      metadata={"format": "pt"})
    return raw


# ---------------------------------------------------------------------------------------------
# Commands.
# ---------------------------------------------------------------------------------------------


def read_ids(path, vocab):
    with open(path) as f:
        texts = json.load(f).get("texts")
    if not isinstance(texts, list) or not texts:
        raise ValueError(f"{path}: want {{\"texts\": [[id, ...], ...]}} with at least one text")
    out = []
    for i, t in enumerate(texts):
        if not isinstance(t, list) or not t:
            raise ValueError(f"{path}: text {i}: want a non-empty list of ids")
        for j, x in enumerate(t):
            if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < vocab:
                raise ValueError(f"{path}: text {i}: position {j}: id {x!r} not in [0, {vocab})")
        out.append(t)
    return out


def extract(model_dir, ids_path, out_path, logits=False, f64=False, device="cpu"):
    """Runs every text alone and streams its hidden states into out_path (F32 safetensors)."""
    dtype = torch.float64 if f64 else torch.float32
    model = Model.load(model_dir, dtype, device)
    cfg = model.cfg
    texts = read_ids(ids_path, cfg.vocab)
    entries = []
    for i, t in enumerate(texts):
        T = len(t)
        entries += [(f"t{i}.residual.{L}", "F32", (T, cfg.hidden)) for L in range(cfg.layers + 1)]
        entries += [(f"t{i}.attn_input.{L}", "F32", (T, cfg.hidden)) for L in range(cfg.layers)]
        if logits:
            entries.append((f"t{i}.logits", "F32", (T, cfg.vocab)))
    meta = {"format": "pt", "generator": "bench/torch_llama.py", "model": os.path.abspath(model_dir),
            "architecture": cfg.kind, "compute_dtype": str(dtype).replace("torch.", ""),
            "texts": len(texts), "layers": cfg.layers, "hidden_size": cfg.hidden,
            "residual": "HF hidden_states: L<n input of block L, L=n after the final norm"}
    w = SafetensorsWriter(out_path, entries, meta)
    try:
        for i, t in enumerate(texts):
            r = model.forward(torch.tensor([t], dtype=torch.int64, device=device), logits=logits)
            for L, h in enumerate(r["residual"]):
                w.write(f"t{i}.residual.{L}", h[0].float().cpu().numpy())
            for L, x in enumerate(r["attn_input"]):
                w.write(f"t{i}.attn_input.{L}", x[0].float().cpu().numpy())
            if logits:
                w.write(f"t{i}.logits", r["logits"][0].float().cpu().numpy())
    finally:
        w.close()
    return len(texts)


def bench(model_dir, like, tokens, seq, batch, threads, seed, logits=False, device="cpu", runs=3, overrides=None):
    """Median tokens/s over `runs` timed passes of `tokens` random ids (float32, no grad)."""
    if threads:
        torch.set_num_threads(threads)
    if model_dir:
        model = Model.load(model_dir, torch.float32, device)
    else:
        cfg = Config(dict(TINY[like], hidden_act="silu", **(overrides or {})), f"--like {like}")

        class _Mem:  # an in-memory reader over random weights
            dir = f"<random {like}>"

            def __init__(self, t):
                self.t = t

            def names(self):
                return set(self.t)

            def shape(self, n):
                return list(self.t[n].shape)

            def get(self, n):
                return self.t[n]

        model = Model(cfg, _Mem(random_weights(cfg, seed)), torch.float32, device)
    cfg = model.cfg
    g = torch.Generator().manual_seed(seed)
    seqs = tokens // seq
    if seqs < 1:
        raise ValueError(f"--tokens {tokens} is less than one sequence of --seq {seq}")
    ids = torch.randint(0, cfg.vocab, (seqs, seq), generator=g).to(device)
    n = seqs * seq

    def one():
        for s in range(0, seqs, batch):
            model.forward(ids[s:s + batch], logits=logits)
        if device != "cpu":
            torch.cuda.synchronize()

    one()  # warmup
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        one()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"torch_llama tokens_per_s={n / med:.1f} threads={torch.get_num_threads()} d={cfg.hidden} "
          f"layers={cfg.layers} heads={cfg.heads} kv_heads={cfg.kv_heads} ffn={cfg.inter} vocab={cfg.vocab} "
          f"seq={seq} batch={batch} tokens={n} logits={int(logits)} device={device} "
          f"run_s_median={med:.4f} run_s_min={min(times):.4f} torch={torch.__version__}", flush=True)
    return n / med


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="HF directory: config.json + model.safetensors (or index + shards)")
    ap.add_argument("--ids", help='JSON file {"texts": [[id, ...], ...]}')
    ap.add_argument("--out", help="output safetensors path (F32)")
    ap.add_argument("--logits", action="store_true", help="also write t{i}.logits (T_i, vocab)")
    ap.add_argument("--f64", action="store_true", help="compute in float64 (output still F32)")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--bench", action="store_true", help="extraction throughput instead of extraction")
    ap.add_argument("--tokens", type=int, default=4096, help="--bench: total tokens per run")
    ap.add_argument("--seq", type=int, default=256, help="--bench: tokens per sequence")
    ap.add_argument("--batch", type=int, default=1, help="--bench: sequences per forward")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--init-random", metavar="DIR", help="write a random-init tiny HF directory")
    ap.add_argument("--like", default="tiny-llama", choices=sorted(TINY), help="--init-random / --bench preset")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="--init-random / --bench --like: override a config field, e.g. hidden_size=2048")
    ap.add_argument("--init-dtype", default="F32", choices=["F32", "F16", "BF16"],
                    help="--init-random: weight dtype in the file")
    a = ap.parse_args(argv)
    try:
        overrides = {}
        for kv in a.set:
            k, sep, v = kv.partition("=")
            if not sep:
                raise ValueError(f"--set {kv!r}: want KEY=JSON")
            try:
                overrides[k] = json.loads(v)
            except ValueError:
                raise ValueError(f"--set {kv!r}: value is not JSON") from None
        if a.init_random:
            init_random(a.init_random, a.like, a.seed, a.init_dtype, overrides)
            print(f"wrote {a.init_random} ({a.like}, seed {a.seed})")
        elif a.bench:
            bench(a.model, a.like, a.tokens, a.seq, a.batch, a.threads, a.seed, a.logits, a.device,
                  overrides=overrides)
        else:
            if not (a.model and a.ids and a.out):
                ap.error("extraction needs --model, --ids and --out (or --bench, or --init-random)")
            if a.threads:
                torch.set_num_threads(a.threads)
            n = extract(a.model, a.ids, a.out, a.logits, a.f64, a.device)
            print(f"wrote {a.out}: {n} texts")
    except (ValueError, KeyError, FileNotFoundError) as e:
        print(f"torch_llama: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
