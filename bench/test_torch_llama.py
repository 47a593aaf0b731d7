#!/usr/bin/env python3
"""Self-tests of bench/torch_llama.py: /usr/bin/python3 bench/test_torch_llama.py

Runs every test_* function, prints one line per test and 'N passed, N failed'; the exit status is 1 if
any failed. Tiny random-init models only (seconds). The strongest check is test_oracle: a second,
deliberately different implementation (numpy float64, per-position loops, RoPE as explicit 2-d
rotations with angles from exp/log) written from the same equations, against the torch forward.
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
import torch_llama as tl  # noqa: E402

TMP = tempfile.mkdtemp(prefix="test_torch_llama.")
PRESETS = sorted(tl.TINY)


def tmp(*parts):
    return os.path.join(TMP, *parts)


_made = {}


def model_dir(like, seed=3, **overrides):
    """A random-init tiny model directory, made once per (like, seed, overrides)."""
    key = (like, seed, json.dumps(overrides, sort_keys=True))
    if key not in _made:
        path = tmp(f"{like}-s{seed}-{len(_made)}")
        tl.init_random(path, like, seed, overrides=overrides)
        _made[key] = path
    return _made[key]


def load_weights(path):
    r = tl.CheckpointReader(path)
    w = {n: r.get(n) for n in r.names()}
    r.close()
    return w


def write_model(path, raw_cfg, weights):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(raw_cfg, f)
    tl.write_safetensors(os.path.join(path, "model.safetensors"), weights)


def read_cfg(path):
    with open(os.path.join(path, "config.json")) as f:
        return json.load(f)


def run(path, ids, dtype=torch.float32, logits=True):
    m = tl.Model.load(path, dtype)
    r = m.forward(torch.tensor([ids], dtype=torch.int64), logits=logits)
    out = {f"residual.{i}": h[0].double().numpy() for i, h in enumerate(r["residual"])}
    out.update({f"attn_input.{i}": x[0].double().numpy() for i, x in enumerate(r["attn_input"])})
    if logits:
        out["logits"] = r["logits"][0].double().numpy()
    return out


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def assert_close(a, b, tol, what):
    assert set(a) == set(b), f"{what}: names differ: {sorted(set(a) ^ set(b))}"
    for k in a:
        assert a[k].shape == b[k].shape, f"{what}: {k}: shape {a[k].shape} vs {b[k].shape}"
        e = rel_err(a[k], b[k])
        assert e <= tol, f"{what}: {k}: relative max error {e:.3g} > {tol}"


IDS = [5, 17, 3, 3, 60, 0, 42, 11, 29]

# ---------------------------------------------------------------------------------------------
# Safetensors.
# ---------------------------------------------------------------------------------------------


def test_safetensors_roundtrip():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float32) * 100
    y = rng.standard_normal(7).astype(np.float32)
    for dt in ("F32", "F16", "BF16"):
        p = tmp(f"rt-{dt}.safetensors")
        tl.write_safetensors(p, {"a.x": x, "b": y, "scalar": np.float32(2.5)}, dt, {"k": "v"})
        f = tl.SafetensorsFile(p)
        assert f.metadata == {"k": "v"}, f.metadata
        assert f.keys() == ["a.x", "b", "scalar"], f.keys()
        for name, v in (("a.x", x), ("b", y), ("scalar", np.float32(2.5))):
            got = f.get(name)
            assert got.dtype == np.float32 and got.shape == np.shape(v), (dt, name, got.dtype, got.shape)
            if dt == "F32":
                want = v
            elif dt == "F16":
                want = np.asarray(v).astype(np.float16).astype(np.float32)
            else:  # torch's float32 -> bfloat16 rounding is round-to-nearest-even too
                want = torch.from_numpy(np.array(v, dtype=np.float32)).bfloat16().float().numpy()
            assert np.array_equal(got, want), f"{dt} {name}: {got} vs {want}"
        # A value that is exactly representable survives unchanged in every dtype.
        if dt != "F32":
            p2 = tmp(f"rt2-{dt}.safetensors")
            tl.write_safetensors(p2, {"e": f.get("a.x")}, dt)
            assert np.array_equal(tl.SafetensorsFile(p2).get("e"), f.get("a.x")), f"{dt}: second round trip"
        f.close()


def test_safetensors_layout_known_answer():
    # A file built by hand from the format description: BF16 0x3F80 = 1.0, 0xC000 = -2.0;
    # F16 0x3C00 = 1.0, 0xC500 = -5.0; F32 little-endian.
    header = {"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
              "h": {"dtype": "F16", "shape": [1, 2], "data_offsets": [4, 8]},
              "f": {"dtype": "F32", "shape": [], "data_offsets": [8, 12]}}
    hb = json.dumps(header).encode()
    data = struct.pack("<HH", 0x3F80, 0xC000) + struct.pack("<HH", 0x3C00, 0xC500) + struct.pack("<f", 0.375)
    p = tmp("hand.safetensors")
    with open(p, "wb") as fh:
        fh.write(struct.pack("<Q", len(hb)) + hb + data)
    f = tl.SafetensorsFile(p)
    assert f.get("b").tolist() == [1.0, -2.0], f.get("b")
    assert f.get("h").tolist() == [[1.0, -5.0]], f.get("h")
    assert f.get("f").tolist() == 0.375, f.get("f")
    f.close()
    # The writer's output, parsed by hand: header length, contiguous offsets, 8-byte aligned data.
    p2 = tmp("w.safetensors")
    tl.write_safetensors(p2, {"x": np.arange(3, dtype=np.float32), "y": np.ones((2, 2), np.float32)})
    raw = open(p2, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, n
    h = json.loads(raw[8:8 + n])
    assert h["x"] == {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}, h["x"]
    assert h["y"] == {"dtype": "F32", "shape": [2, 2], "data_offsets": [12, 28]}, h["y"]
    assert len(raw) == 8 + n + 28
    assert np.frombuffer(raw[8 + n:8 + n + 12], "<f4").tolist() == [0, 1, 2]
    # bf16 rounding ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1.0; NaN stays NaN.
    bits = tl.f32_to_bf16_bits(np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, np.nan], np.float32))
    assert bits[0] == 0x3F80 and bits[1] == 0x3F82 and np.isnan(tl.bf16_bits_to_f32(bits[2:]))[0], bits


def test_safetensors_rejects_bad_offsets():
    hb = json.dumps({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}).encode()
    p = tmp("bad.safetensors")
    with open(p, "wb") as fh:
        fh.write(struct.pack("<Q", len(hb)) + hb + bytes(16))
    try:
        tl.SafetensorsFile(p)
    except ValueError as e:
        assert "data_offsets" in str(e), e
    else:
        raise AssertionError("a tensor whose offsets do not match its shape was accepted")


# ---------------------------------------------------------------------------------------------
# RoPE.
# ---------------------------------------------------------------------------------------------


def test_rope_known_answer():
    hd, theta = 8, 10000.0
    inv = tl.rope_inv_freq(hd, theta, None, torch.float64)
    assert np.allclose(inv.numpy(), [theta ** (-2 * i / hd) for i in range(hd // 2)], rtol=1e-15, atol=0)
    T = 6
    cos, sin = tl.rope_cos_sin(inv, torch.arange(T))
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((1, 1, T, hd)))
    y = tl.apply_rope(x, cos, sin)
    assert torch.equal(y[0, 0, 0], x[0, 0, 0]), "position 0 must be the identity"
    for i in range(hd // 2):
        # A unit vector on dimension i rotates in the plane (i, i + hd/2) by p * theta_i.
        e = torch.zeros(1, 1, T, hd, dtype=torch.float64)
        e[..., i] = 1.0
        r = tl.apply_rope(e, cos, sin)
        for p in range(T):
            a = p * theta ** (-2 * i / hd)
            want = np.zeros(hd)
            want[i], want[i + hd // 2] = math.cos(a), math.sin(a)
            assert np.allclose(r[0, 0, p].numpy(), want, atol=1e-12), (i, p, r[0, 0, p], want)
    # Rotations keep norms and relative positions: <R_p q, R_s k> depends on p - s only.
    q, k = x[..., 1:2, :].expand(1, 1, T, hd), x[..., 2:3, :].expand(1, 1, T, hd)
    rq, rk = tl.apply_rope(q, cos, sin), tl.apply_rope(k, cos, sin)
    assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1))
    assert abs(float(rq[0, 0, 4] @ rk[0, 0, 1] - rq[0, 0, 3] @ rk[0, 0, 0])) < 1e-12


def test_rope_llama3_scaling():
    hd, theta = 16, 10000.0
    sc = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64.0}
    base = tl.rope_inv_freq(hd, theta, None, torch.float64).numpy()
    got = tl.rope_inv_freq(hd, theta, sc, torch.float64).numpy()
    # wavelengths 2 pi / theta_i: 6.3 (< 64/4: kept), 19.9 and 62.8 (between: blended), >= 199 (> 64/1: / 8)
    assert got[0] == base[0], (got[0], base[0])
    assert np.allclose(got[3:], base[3:] / 8, rtol=1e-15), (got, base)
    for i in (1, 2):
        c = (64 / (2 * math.pi / base[i]) - 1) / 3
        assert 0 < c < 1 and abs(got[i] - ((1 - c) * base[i] / 8 + c * base[i])) < 1e-15, (i, got[i])
    for bad in ({"rope_type": "yarn", "factor": 4.0}, {"type": "linear", "factor": 2.0}):
        try:
            tl.Config(dict(tl.TINY["tiny-llama"], rope_scaling=bad))
        except ValueError as e:
            assert "rope_scaling" in str(e)
        else:
            raise AssertionError(f"rope_scaling {bad} accepted")


# ---------------------------------------------------------------------------------------------
# The forward.
# ---------------------------------------------------------------------------------------------


def oracle_forward(raw, w, ids):
    """numpy float64, one position and one head at a time; no code shared with torch_llama's forward."""
    d, n, H = raw["hidden_size"], raw["num_hidden_layers"], raw["num_attention_heads"]
    K = raw.get("num_key_value_heads") or H
    hd = raw.get("head_dim") or d // H
    eps = raw["rms_norm_eps"]
    qwen2, qwen3 = raw["model_type"] == "qwen2", raw["model_type"] == "qwen3"
    w = {k: v.astype(np.float64) for k, v in w.items()}
    # Frequencies via exp/log, then the llama3 rule one frequency at a time.
    freqs = [math.exp(-(2 * i / hd) * math.log(raw["rope_theta"])) for i in range(hd // 2)]
    rs = raw.get("rope_scaling")
    if rs:
        lo = rs["original_max_position_embeddings"] / rs["low_freq_factor"]
        hi = rs["original_max_position_embeddings"] / rs["high_freq_factor"]
        for i, f in enumerate(freqs):
            lam = 2 * math.pi / f
            if lam < hi:
                continue
            if lam > lo:
                freqs[i] = f / rs["factor"]
            else:
                c = (rs["original_max_position_embeddings"] / lam - rs["low_freq_factor"]) / (
                    rs["high_freq_factor"] - rs["low_freq_factor"])
                freqs[i] = (1 - c) * f / rs["factor"] + c * f

    def norm(v, g):
        return v / math.sqrt(float(np.dot(v, v)) / v.size + eps) * g

    def rotate(v, p):
        out = v.copy()
        for i, f in enumerate(freqs):
            c, s = math.cos(p * f), math.sin(p * f)
            a, b = v[i], v[i + hd // 2]
            out[i], out[i + hd // 2] = a * c - b * s, a * s + b * c
        return out

    T = len(ids)
    h = [w["model.embed_tokens.weight"][t].copy() for t in ids]
    res, att = [np.array(h)], []
    for L in range(n):
        p = f"model.layers.{L}."

        def proj(name, x):
            y = w[p + name + ".weight"] @ x
            return y + w[p + name + ".bias"] if p + name + ".bias" in w else y

        xs = [norm(r, w[p + "input_layernorm.weight"]) for r in h]
        att.append(np.array(xs))
        qs, ks, vs = [], [], []
        for t, x in enumerate(xs):
            q = proj("self_attn.q_proj", x).reshape(H, hd)
            k = proj("self_attn.k_proj", x).reshape(K, hd)
            v = proj("self_attn.v_proj", x).reshape(K, hd)
            if qwen3:
                q = np.array([norm(r, w[p + "self_attn.q_norm.weight"]) for r in q])
                k = np.array([norm(r, w[p + "self_attn.k_norm.weight"]) for r in k])
            qs.append(np.array([rotate(r, t) for r in q]))
            ks.append(np.array([rotate(r, t) for r in k]))
            vs.append(v)
        new_h = []
        for t in range(T):
            heads = []
            for j in range(H):
                g = j // (H // K)
                sc = np.array([qs[t][j] @ ks[s][g] for s in range(t + 1)]) / math.sqrt(hd)
                e = np.exp(sc - sc.max())
                heads.append(sum(e[s] * vs[s][g] for s in range(t + 1)) / e.sum())
            hp = h[t] + proj("self_attn.o_proj", np.concatenate(heads))
            y = norm(hp, w[p + "post_attention_layernorm.weight"])
            gate = proj("mlp.gate_proj", y)
            new_h.append(hp + proj("mlp.down_proj", gate / (1 + np.exp(-gate)) * proj("mlp.up_proj", y)))
        assert not qwen2 or p + "self_attn.q_proj.bias" in w
        h = new_h
        res.append(np.array(h))
    out = np.array([norm(r, w["model.norm.weight"]) for r in h])
    res[n] = out
    head = w["model.embed_tokens.weight"] if raw.get("tie_word_embeddings") else w["lm_head.weight"]
    o = {f"residual.{i}": r for i, r in enumerate(res)}
    o.update({f"attn_input.{i}": a for i, a in enumerate(att)})
    o["logits"] = out @ head.T
    return o


def test_oracle():
    for like in PRESETS:
        path = model_dir(like)
        want = oracle_forward(read_cfg(path), load_weights(path), IDS)
        assert_close(run(path, IDS, torch.float64), want, 1e-10, f"{like} f64 vs oracle")
        assert_close(run(path, IDS, torch.float32), want, 1e-5, f"{like} f32 vs oracle")


def test_oracle_attention_bias_and_mlp_bias():
    # Llama with attention_bias (q, k, v and o biases) and mlp_bias, and Qwen3 with attention_bias.
    for like, ov in (("tiny-llama", {"attention_bias": True, "mlp_bias": True}),
                     ("tiny-qwen3", {"attention_bias": True})):
        path = model_dir(like, **ov)
        w = load_weights(path)
        assert "model.layers.0.self_attn.o_proj.bias" in w
        assert ("model.layers.0.mlp.up_proj.bias" in w) == ("mlp_bias" in ov)
        want = oracle_forward(read_cfg(path), w, IDS)
        assert_close(run(path, IDS, torch.float64), want, 1e-10, f"{like} {ov}")


def test_f32_vs_f64():
    for like in PRESETS:
        path = model_dir(like, seed=7)
        assert_close(run(path, IDS, torch.float32), run(path, IDS, torch.float64), 1e-5, like)


def test_causality():
    for like in ("tiny-llama3", "tiny-qwen3"):
        path = model_dir(like)
        t = 5
        ids2 = list(IDS)
        ids2[t] = (ids2[t] + 1) % 80
        a, b = run(path, IDS), run(path, ids2)
        for k in a:
            assert np.array_equal(a[k][:t], b[k][:t]), f"{like}: {k}: changing token {t} changed a row < {t}"
            assert not np.allclose(a[k][t:], b[k][t:]), f"{like}: {k}: changing token {t} changed nothing"


def test_gqa_equals_mha_with_repeated_kv():
    src = model_dir("tiny-gqa-tied")
    raw, w = read_cfg(src), load_weights(src)
    H, K = raw["num_attention_heads"], raw["num_key_value_heads"]
    hd = raw["hidden_size"] // H
    assert K < H

    def expand(order):
        w2 = dict(w)
        for L in range(raw["num_hidden_layers"]):
            for t in ("k", "v"):
                name = f"model.layers.{L}.self_attn.{t}_proj.weight"
                blocks = w[name].reshape(K, hd, -1)
                w2[name] = np.concatenate([blocks[order(j)] for j in range(H)])
        return w2

    mha_raw = dict(raw, num_key_value_heads=H)
    ref = run(src, IDS)
    # Query head j reads kv head j // (H/K): the MHA twin whose kv head j is a copy of that head is equal.
    write_model(tmp("mha"), mha_raw, expand(lambda j: j // (H // K)))
    assert_close(run(tmp("mha"), IDS), ref, 1e-5, "GQA vs MHA")
    # The other pairing (kv head j % K) is a different model: the test can tell the two apart.
    write_model(tmp("mha-tiled"), mha_raw, expand(lambda j: j % K))
    assert rel_err(run(tmp("mha-tiled"), IDS)["residual.1"], ref["residual.1"]) > 1e-3


def test_tied_equals_untied_with_copied_head():
    src = model_dir("tiny-gqa-tied")
    raw, w = read_cfg(src), load_weights(src)
    assert "lm_head.weight" not in w
    untied = dict(w, **{"lm_head.weight": w["model.embed_tokens.weight"].copy()})
    write_model(tmp("untied"), dict(raw, tie_word_embeddings=False), untied)
    a, b = run(src, IDS), run(tmp("untied"), IDS)
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    # Untied without lm_head.weight is an error naming the tensor.
    write_model(tmp("untied-missing"), dict(raw, tie_word_embeddings=False), w)
    try:
        tl.Model.load(tmp("untied-missing"))
    except ValueError as e:
        assert "lm_head.weight" in str(e), e
    else:
        raise AssertionError("untied model without lm_head.weight loaded")


def test_sharded_equals_single():
    src = model_dir("tiny-qwen2")
    w = load_weights(src)
    names = sorted(w)
    shards = {"model-00001-of-00003.safetensors": names[0::3], "model-00002-of-00003.safetensors": names[1::3],
              "model-00003-of-00003.safetensors": names[2::3]}
    d = tmp("sharded")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(read_cfg(src), f)
    wmap = {}
    for fn, ns in shards.items():
        tl.write_safetensors(os.path.join(d, fn), {n: w[n] for n in ns}, "BF16" if fn.startswith("model-00002") else "F32")
        wmap.update({n: fn for n in ns})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wmap}, f)
    # The same weights, one file, the BF16 shard's tensors rounded the same way.
    single = tmp("single")
    rounded = {n: (tl.bf16_bits_to_f32(tl.f32_to_bf16_bits(w[n])) if n in shards["model-00002-of-00003.safetensors"]
                   else w[n]) for n in names}
    write_model(single, read_cfg(src), rounded)
    a, b = run(d, IDS), run(single, IDS)
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def test_cli_outputs_and_attn_input_recomputed():
    for like in ("tiny-llama", "tiny-qwen3"):
        path = model_dir(like)
        raw = read_cfg(path)
        n, d, V = raw["num_hidden_layers"], raw["hidden_size"], raw["vocab_size"]
        texts = [IDS, [1], [4, 4, 4]]
        ids_path = tmp(f"ids-{like}.json")
        with open(ids_path, "w") as f:
            json.dump({"texts": texts}, f)
        for flags in ([], ["--logits", "--f64"]):
            out = tmp(f"out-{like}-{len(flags)}.safetensors")
            rc = tl.main(["--model", path, "--ids", ids_path, "--out", out] + flags)
            assert rc == 0, rc
            f = tl.SafetensorsFile(out)
            want = set()
            for i, t in enumerate(texts):
                want |= {f"t{i}.residual.{L}" for L in range(n + 1)} | {f"t{i}.attn_input.{L}" for L in range(n)}
                if flags:
                    want.add(f"t{i}.logits")
            assert set(f.keys()) == want, sorted(set(f.keys()) ^ want)
            assert all(f.dtype(k) == "F32" for k in f.keys())
            w = load_weights(path)
            for i, t in enumerate(texts):
                assert f.shape(f"t{i}.residual.0") == [len(t), d]
                if flags:
                    assert f.shape(f"t{i}.logits") == [len(t), V]
                # residual.0 is the embedding output (HF hidden_states[0]).
                assert np.array_equal(f.get(f"t{i}.residual.0"), w["model.embed_tokens.weight"][t])
                for L in range(n):
                    r = f.get(f"t{i}.residual.{L}").astype(np.float64)
                    g = w[f"model.layers.{L}.input_layernorm.weight"].astype(np.float64)
                    x = r / np.sqrt((r * r).mean(-1, keepdims=True) + raw["rms_norm_eps"]) * g
                    e = rel_err(f.get(f"t{i}.attn_input.{L}"), x)
                    assert e < 1e-5, (like, i, L, e)
            # Each text alone: text 2 equals its own single-text forward.
            alone = run(path, texts[2], torch.float64 if flags else torch.float32, logits=bool(flags))
            for k, v in alone.items():
                assert rel_err(f.get(f"t2.{k}"), v) < 1e-6, k
            f.close()


def test_refusals():
    bad = [
        dict(tl.TINY["tiny-llama"], architectures=["GPT2LMHeadModel"], model_type="gpt2"),
        dict(tl.TINY["tiny-llama"], hidden_act="gelu"),
        dict(tl.TINY["tiny-llama"], num_key_value_heads=3),
        dict(tl.TINY["tiny-llama"], partial_rotary_factor=0.5),
    ]
    for raw in bad:
        try:
            tl.Config(raw)
        except ValueError:
            pass
        else:
            raise AssertionError(f"config accepted: {raw}")
    # Ids outside the vocabulary and a sequence longer than Mistral's sliding window are refused.
    path = model_dir("tiny-llama")
    ids_path = tmp("bad-ids.json")
    with open(ids_path, "w") as f:
        json.dump({"texts": [[1, 2, 96]]}, f)
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert tl.main(["--model", path, "--ids", ids_path, "--out", tmp("x.safetensors")]) == 1
    assert "text 0: position 2: id 96" in err.getvalue(), err.getvalue()
    mis = model_dir("tiny-llama", architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=4)
    run(mis, IDS[:4])
    try:
        run(mis, IDS[:5])
    except ValueError as e:
        assert "sliding_window" in str(e)
    else:
        raise AssertionError("a text longer than sliding_window ran")
    # A checkpoint holding tensors the config does not use (e.g. biases of an attention_bias model
    # under a config without it) is a mismatch, not silently ignored.
    src = model_dir("tiny-llama", attention_bias=True)
    write_model(tmp("mismatch"), dict(read_cfg(src), attention_bias=False), load_weights(src))
    try:
        tl.Model.load(tmp("mismatch"))
    except ValueError as e:
        assert "does not use" in str(e), e
    else:
        raise AssertionError("unused tensors accepted")


def test_bench_line():
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = tl.main(["--bench", "--model", model_dir("tiny-qwen3"), "--tokens", "64", "--seq", "16", "--threads", "1"])
    assert rc == 0
    line = buf.getvalue().strip().splitlines()[-1]
    kv = dict(f.split("=", 1) for f in line.split()[1:])
    assert line.startswith("torch_llama ") and float(kv["tokens_per_s"]) > 0, line
    assert kv["threads"] == "1" and kv["d"] == "64" and kv["layers"] == "2" and kv["tokens"] == "64", line


def main():
    return minitest.run(globals(), TMP)

if __name__ == "__main__":
    sys.exit(main())
