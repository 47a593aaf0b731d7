#!/usr/bin/env python3
"""An external GELO deployer for BERT-family encoders (all-MiniLM-L6-v2): PyTorch in fp32, bf16 or fp16.

bench/torch_deploy.py is the decoders' deployer; this is the encoders'. It computes the per-token
hidden states of a Hugging Face BertModel checkpoint (config.json + *.safetensors, read by hand: this
machine has no transformers package) the way a transformers deployer would, written from the
published BERT equations (post-LN blocks, exact erf GELU, absolute positions, token type 0), and writes
them in the layout `geloattack recover -deployer-rows` reads (bench/torch_deploy.py's: data/deployer).

Numerics (dtype bf16 or fp16; fp32 is plain float32 throughout). The weights are cast from the file to
the dtype (round to nearest even: all-MiniLM-L6-v2's fp16 weights are exact in fp16 and rounded in
bf16, as model.to(torch.bfloat16) rounds them). Every kernel reads dtype inputs, computes in float32
and rounds its output to the dtype once, as PyTorch's CUDA kernels do (float32 "opmath"):
  embeddings   word + token type (rounded), + position (rounded), LayerNorm (statistics in float32,
               output rounded)
  attention    q, k, v = x W^T + b (one rounding each, the bias in the GEMM's epilogue); eager
               (default, transformers' BertSelfAttention): S = q k^T rounded, S * (1/sqrt(hd)) rounded
               (transformers divides by sqrt(hd): the two differ in float32's last bit, before the
               dtype's rounding), softmax in float32 rounded, P v rounded; fused (--attention fused, SDPA /
               FlashAttention-like): scores and softmax in float32, exp(S - max) rounded for the
               P v GEMM, normalised in float32, rounded once
  block        o = ctx W_o^T + b rounded; x1 = LayerNorm(o + x) (sum rounded, LN rounded);
               f = GELU(x1 W_1^T + b_1) (GEMM rounded, GELU in float32 rounded);
               x = LayerNorm(f W_2^T + b_2 + x1) (GEMM rounded, sum rounded, LN rounded)
--kernels emulate (default) holds float32 tensors rounded after each kernel as above (any device,
also fp16, which torch 1.13 has no CPU matmul for); --kernels native holds dtype tensors and lets
PyTorch's own kernels for the dtype on --device round.

Texts run one at a time (batch 1, no padding). Token ids come from geloattack's tokenizer
(`geloattack recover -deployer-texts FILE`): the deployer computes exactly the texts the attacker
targets, [CLS] and [SEP] included.

Input (--tokens): JSON lines {"id": TEXT_ID, "tokens": [ids...], "bos": K} (bench/torch_deploy.py's
format; K, the leading special tokens, is 1 for [CLS]).
Output (--out DIR, new or empty):
  DIR/residual.<L>/text_<TEXT_ID>.npz  Hugging Face's hidden_states[L] (L = 0: the embeddings'
      LayerNorm output; L = n: the last block's), which is also block L's input: token_ids int32 (T,),
      attention_mask int8 (T,) (all 1: no row is dropped), embeddings float32 (T, d) (the dtype's values
      widened exactly), text_embedding float32 (d,) (sentence-transformers' embedding: the mean of
      hidden_states[n] over the text's tokens, L2-normalised, computed in float64)
  DIR/deployer.json  written last: the stack, the model, the input (data/deployer.Info); point
      "residual" (an encoder has no attn-input point apart from it)

CLI:
  python3 bench/torch_bert_deploy.py --model DIR --tokens TEXTS.jsonl --out OUT --dtype bf16 \
      [--blocks 3] [--kernels emulate|native] [--attention eager|fused] [--device cpu] [--threads K]
  then: geloattack recover -store STORE -model DIR ... -deployer-rows OUT
Self-tests: /usr/bin/python3 bench/test_torch_bert_deploy.py
"""

import argparse
import json
import math
import os
import platform
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_deploy as td  # noqa: E402  (the output format: FORMAT, INFO_FILE, read_texts, save_npz, ...)
import torch_llama as tl  # noqa: E402  (safetensors dtypes)

DTYPES = td.DTYPES
POINT = "residual"
TEXT_EMBEDDING = ("mean of hidden_states[num_hidden_layers] over the text's tokens ([CLS] and [SEP] "
                  "included), L2-normalised (sentence-transformers' mean pooling)")


def read_safetensors(path):
    """name -> float32 numpy array of every float tensor of one safetensors file (integer buffers
    such as embeddings.position_ids are skipped), and the set of float dtypes stored."""
    f = tl.SafetensorsFile(path, skip_other=True)
    try:
        out = {name: f.get(name).astype(np.float32) for name in f.keys()}
        return out, sorted({f.dtype(name) for name in f.keys()})
    finally:
        f.close()


def checkpoint_file(model_dir):
    """The directory's one *.safetensors file."""
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if len(files) != 1:
        raise ValueError(f"--model {model_dir}: want exactly one *.safetensors file, found {files}")
    return os.path.join(model_dir, files[0])


class Config:
    """The part of a BERT config.json the forward needs, validated."""

    def __init__(self, raw, where):
        if raw.get("model_type", "bert") != "bert":
            raise ValueError(f"{where}: model_type {raw.get('model_type')!r}: want bert")
        if raw.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{where}: hidden_act {raw.get('hidden_act')!r}: only the exact (erf) gelu is implemented")
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{where}: position_embedding_type {raw.get('position_embedding_type')!r}: want absolute")
        try:
            self.hidden = int(raw["hidden_size"])
            self.layers = int(raw["num_hidden_layers"])
            self.heads = int(raw["num_attention_heads"])
            self.inter = int(raw["intermediate_size"])
            self.max_pos = int(raw["max_position_embeddings"])
            self.vocab = int(raw["vocab_size"])
            self.eps = float(raw.get("layer_norm_eps", 1e-12))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: {e!r}") from None
        if min(self.hidden, self.layers, self.heads, self.inter, self.max_pos, self.vocab) < 1 or self.hidden % self.heads:
            raise ValueError(f"{where}: hidden_size {self.hidden}, num_attention_heads {self.heads}: want positive, divisible")
        self.head_dim = self.hidden // self.heads


class Deployer:
    """A BertModel computing like a transformers deployer in one storage dtype (torch.float64 is
    accepted too: the self-tests' exact reference)."""

    def __init__(self, model_dir, dtype=torch.float32, kernels="emulate", attention="eager", device="cpu"):
        if attention not in ("eager", "fused"):
            raise ValueError(f"--attention {attention!r}: want eager or fused")
        self.num = td.Numerics(dtype, kernels)
        if dtype == torch.float64:
            self.num.emulate, self.num.hold = False, torch.float64
        self.attention = attention
        self.device = device
        if str(device).startswith("cuda"):
            torch.backends.cuda.matmul.allow_tf32 = False  # emulation needs true float32 GEMMs
        cfg_path = os.path.join(model_dir, "config.json")
        with open(cfg_path) as f:
            self.raw_cfg = json.load(f)
        self.cfg = Config(self.raw_cfg, cfg_path)
        tensors, self.weight_dtypes = read_safetensors(checkpoint_file(model_dir))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""
        c = self.cfg

        def w(name, shape):
            full = prefix + name
            if full not in tensors:
                raise ValueError(f"--model {model_dir}: tensor {full} missing")
            x = tensors[full]
            if list(x.shape) != list(shape):
                raise ValueError(f"--model {model_dir}: tensor {full}: shape {list(x.shape)}, want {list(shape)}")
            t = torch.from_numpy(np.ascontiguousarray(x)).to(device)
            if dtype == torch.float64:
                return t.to(torch.float64)
            return self.num.weight(t)

        h, f = c.hidden, c.inter
        self.word = w("embeddings.word_embeddings.weight", (c.vocab, h))
        self.pos = w("embeddings.position_embeddings.weight", (c.max_pos, h))
        self.type0 = w("embeddings.token_type_embeddings.weight", (int(self.raw_cfg.get("type_vocab_size", 2)), h))[0]
        self.emb_ln = (w("embeddings.LayerNorm.weight", (h,)), w("embeddings.LayerNorm.bias", (h,)))
        self.blocks = []
        for i in range(c.layers):
            p = f"encoder.layer.{i}."
            self.blocks.append({
                "q": (w(p + "attention.self.query.weight", (h, h)), w(p + "attention.self.query.bias", (h,))),
                "k": (w(p + "attention.self.key.weight", (h, h)), w(p + "attention.self.key.bias", (h,))),
                "v": (w(p + "attention.self.value.weight", (h, h)), w(p + "attention.self.value.bias", (h,))),
                "o": (w(p + "attention.output.dense.weight", (h, h)), w(p + "attention.output.dense.bias", (h,))),
                "ln1": (w(p + "attention.output.LayerNorm.weight", (h,)), w(p + "attention.output.LayerNorm.bias", (h,))),
                "f1": (w(p + "intermediate.dense.weight", (f, h)), w(p + "intermediate.dense.bias", (f,))),
                "f2": (w(p + "output.dense.weight", (h, f)), w(p + "output.dense.bias", (h,))),
                "ln2": (w(p + "output.LayerNorm.weight", (h,)), w(p + "output.LayerNorm.bias", (h,))),
            })
        if kernels == "native" and dtype not in (torch.float32, torch.float64):
            self._check_native_kernels()

    def _check_native_kernels(self):
        """Fails early, and clearly, where PyTorch has no kernels for the dtype on the device."""
        x = torch.ones(2, 2, dtype=self.num.dtype, device=self.device)
        try:
            F.linear(x, x, x[0])
            F.layer_norm(x, (2,), x[0], x[0], 1e-12)
            F.gelu(x)
            torch.softmax(x, -1)
        except RuntimeError as e:
            raise ValueError(f"--kernels native: torch {torch.__version__} has no {self.num.dtype} kernels on "
                             f"{self.device} ({e}); use --kernels emulate") from None

    def layer_norm(self, x, wb):
        """nn.LayerNorm: mean and variance in float32 (float64 for the reference), output rounded once."""
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        y = F.layer_norm(x.to(acc), (x.shape[-1],), wb[0].to(acc), wb[1].to(acc), self.cfg.eps)
        return self.num.out(y)

    def attend(self, q, k, v):
        """Bidirectional attention of (1, H, T, hd) heads, no mask (one text, no padding)."""
        out = self.num.out
        scale = 1.0 / math.sqrt(self.cfg.head_dim)
        acc = torch.float64 if q.dtype == torch.float64 else torch.float32
        if self.attention == "eager":
            s = out(torch.matmul(q, k.transpose(-1, -2)))
            s = out(s * scale)
            p = out(torch.softmax(s.to(acc), dim=-1))
            return out(torch.matmul(p, v))
        s = torch.matmul(q.to(acc), k.to(acc).transpose(-1, -2)) * scale
        e = torch.exp(s - s.amax(-1, keepdim=True))
        denom = e.sum(-1, keepdim=True)
        pv = torch.matmul(out(e).to(acc), v.to(acc))
        return out(pv / denom)

    @torch.no_grad()
    def forward(self, ids):
        """ids: one text's token ids (list) -> hidden_states [n+1 x (T, d)], float32 tensors holding the
        dtype's values (float64 for the reference)."""
        c, out = self.cfg, self.num.out
        T = len(ids)
        if T > c.max_pos:
            raise ValueError(f"a text of {T} tokens exceeds max_position_embeddings {c.max_pos}")
        H, hd = c.heads, c.head_dim
        ids_t = torch.tensor(ids, dtype=torch.int64, device=self.device)
        x = out(self.word[ids_t] + self.type0)
        x = out(x + self.pos[:T])
        x = self.layer_norm(x, self.emb_ln)[None]  # (1, T, d)
        hidden = [x]

        def lin(y, wb):
            return out(F.linear(y, wb[0], wb[1]))

        def gelu(y):
            acc = torch.float64 if y.dtype == torch.float64 else torch.float32
            return out(F.gelu(y.to(acc)))

        for b in self.blocks:
            q, k, v = (lin(x, b[n]).view(1, T, H, hd).transpose(1, 2) for n in ("q", "k", "v"))  # (1, H, T, hd)
            a = self.attend(q, k, v).transpose(1, 2).reshape(1, T, H * hd)
            x1 = self.layer_norm(out(lin(a, b["o"]) + x), b["ln1"])
            f = gelu(lin(x1, b["f1"]))
            x = self.layer_norm(out(lin(f, b["f2"]) + x1), b["ln2"])
            hidden.append(x)
        keep = torch.float64 if self.num.hold == torch.float64 else torch.float32
        return [t[0].to(keep) for t in hidden]


def text_embedding(last):
    """sentence-transformers' embedding from hidden_states[n] (T, d): the mean over every token
    (one text, no padding), L2-normalised; computed in float64."""
    m = last.double().mean(0)
    n = float(m.norm())
    return (m / n if n > 0 else m).float().cpu().numpy()


def deploy(model_dir, tokens_path, out_dir, dtype_name="bf16", blocks=(3,), kernels="emulate", attention="eager",
           device="cpu"):
    """Runs every text alone (positions from 0, batch 1) and writes hidden_states[L] for each L of blocks;
    returns deployer.json's content."""
    if dtype_name not in DTYPES:
        raise ValueError(f"--dtype {dtype_name!r}: want one of {sorted(DTYPES)}")
    if not blocks:
        raise ValueError("no blocks to write")
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise ValueError(f"--out {out_dir}: exists and is not an empty directory (runs never overwrite)")
    dep = Deployer(model_dir, DTYPES[dtype_name], kernels, attention, device)
    cfg = dep.cfg
    for L in blocks:
        if not 0 <= L <= cfg.layers:
            raise ValueError(f"--blocks {L}: hidden states exist for 0..{cfg.layers}")
    texts = td.read_texts(tokens_path, cfg.vocab, cfg.max_pos)
    dirs = {L: os.path.join(out_dir, f"{POINT}.{L}") for L in blocks}
    for d in dirs.values():
        os.makedirs(d)
    for tid, toks, _ in texts:
        hs = dep.forward(toks)
        emb = text_embedding(hs[cfg.layers])
        mask = np.ones(len(toks), np.int8)
        ids = np.asarray(toks, np.int32)
        for L, d in dirs.items():
            td.save_npz(os.path.join(d, f"text_{tid:08d}.npz"), token_ids=ids, attention_mask=mask,
                        embeddings=hs[L].cpu().numpy().astype(np.float32), text_embedding=emb)
    info = {
        "format": td.FORMAT,
        "generator": "bench/torch_bert_deploy.py",
        "framework": "pytorch",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "device": str(device),
        "device_name": td.device_name(device),
        "threads": torch.get_num_threads(),
        "dtype": dtype_name,
        "kernels": "emulate" if dep.num.emulate else "native",
        "attention": attention,
        "model": os.path.abspath(model_dir),
        "architecture": next(iter(dep.raw_cfg.get("architectures") or []), "BertModel"),
        "config_sha256": td.sha256_file(os.path.join(model_dir, "config.json")),
        "weight_dtypes": dep.weight_dtypes,
        "layers": cfg.layers,
        "hidden_size": cfg.hidden,
        "input": os.path.abspath(tokens_path),
        "input_sha256": td.sha256_file(tokens_path),
        "texts": len(texts),
        "tokens": sum(len(t) for _, t, _ in texts),
        "points": [POINT],
        "blocks": sorted(blocks),
        "bos": "kept",
        "rows_dtype": "float32",
        "text_embedding": TEXT_EMBEDDING,
    }
    tmp = os.path.join(out_dir, td.INFO_FILE + ".partial")
    with open(tmp, "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, td.INFO_FILE))
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF BertModel directory: config.json + one *.safetensors")
    ap.add_argument("--tokens", required=True, help='JSON lines {"id": N, "tokens": [...], "bos": K}')
    ap.add_argument("--out", required=True, help="output directory (must not exist or be empty)")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES), help="compute and storage dtype")
    ap.add_argument("--blocks", default="3", help="comma-separated L of hidden_states[L] (0: the embeddings)")
    ap.add_argument("--kernels", default="emulate", choices=["emulate", "native"],
                    help="emulate: float32 kernels rounding every output (CUDA's way, any device); "
                         "native: torch's kernels for the dtype on --device")
    ap.add_argument("--attention", default="eager", choices=["eager", "fused"],
                    help="eager: transformers' matmul-softmax-matmul; fused: SDPA/FlashAttention-like rounding")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    a = ap.parse_args(argv)
    try:
        if a.threads:
            torch.set_num_threads(a.threads)
        blocks = td.parse_ints(a.blocks, "--blocks")
        info = deploy(a.model, a.tokens, a.out, a.dtype, blocks, a.kernels, a.attention, a.device)
        print(f"torch_bert_deploy: wrote {a.out}: {info['texts']} texts, {info['tokens']} tokens, hidden states "
              f"{','.join(map(str, blocks))}, {a.dtype} ({info['kernels']} kernels, {a.attention} attention) on "
              f"{info['device_name']}, torch {torch.__version__}")
    except (ValueError, KeyError, FileNotFoundError) as e:
        print(f"torch_bert_deploy: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
