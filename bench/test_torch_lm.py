#!/usr/bin/env python3
"""Self-tests of bench/torch_lm.py: /usr/bin/python3 bench/test_torch_lm.py

Runs every test_* function, prints one line per test and 'N passed, N failed'; the exit status is 1 if
any failed. A tiny random model only (V 50, d 16, f 24, L 2, H 2, B 2, T 5; seconds). The strongest
checks compare `--check` against a second, deliberately different implementation of the loss (numpy
float64, one position and one head at a time, RoPE as explicit 2-d rotations with angles from
exp/log, tokens.bin parsed with struct): its value, its central finite differences at the first 8
entries of every tensor and its directional derivatives along all-ones (= the gradient's sum) and
along the gradient itself (= the sum of squares); and the AdamW step against the first-step closed
form w (1 - lr wd [decayed]) - lr g_c / (|g_c| + eps), g_c the clipped gradient, with the decayed
set written out by name.
"""

import contextlib
import io
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
import torch_lm as lm  # noqa: E402

TMP = tempfile.mkdtemp(prefix="test_torch_lm.")
V, D, FF, L, H, B, T = 50, 16, 24, 2, 2, 2, 5
EPS = 1e-5

# The decayed tensors by name (not by torch_lm.decayed): embedding and every projection; no norms.
DECAYED = {"model.embed_tokens.weight"} | {
    f"model.layers.{i}.{n}.weight" for i in range(L)
    for n in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
              "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}


def tmp(*parts):
    return os.path.join(TMP, *parts)


def tiny_weights(seed):
    """Random float32 weights with the model's names, scaled so that every nonlinearity matters."""
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in lm.param_shapes(V, D, FF, L):
        if len(shape) == 1:
            w[name] = (1 + 0.3 * rng.standard_normal(shape)).astype(np.float32)
        else:
            w[name] = (rng.standard_normal(shape) / math.sqrt(shape[1]) * 1.5).astype(np.float32)
    return w


def write_case(name, seed=1, lr=0.01, wd=0.3, clip=1.0, tokens=None, step_extra=None, weights=None):
    """A --check directory: weights.safetensors, tokens.bin (B, T+1) int32 LE, step.json."""
    d = tmp(name)
    os.makedirs(d, exist_ok=True)
    w = weights if weights is not None else tiny_weights(seed)
    tl.write_safetensors(os.path.join(d, "weights.safetensors"), w)
    if tokens is None:
        tokens = np.random.default_rng(seed + 100).integers(0, V, size=(B, T + 1))
    with open(os.path.join(d, "tokens.bin"), "wb") as f:
        f.write(struct.pack(f"<{np.size(tokens)}i", *np.ravel(tokens).tolist()))
    cfg = {"lr": lr, "weight_decay": wd, "heads": H, "clip": clip}
    cfg.update(step_extra or {})
    with open(os.path.join(d, "step.json"), "w") as f:
        json.dump(cfg, f)
    return d, w


def run_check(d, *flags):
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        rc = lm.main(["--check", d, "--batch", str(B), "--seq", str(T), "--threads", "1"] + list(flags))
    assert rc == 0, (rc, err.getvalue())
    with open(os.path.join(d, "torch_out.json")) as f:
        return json.load(f)


def read_tokens_struct(path):
    with open(path, "rb") as f:
        raw = f.read()
    vals = struct.unpack(f"<{len(raw) // 4}i", raw)
    return [list(vals[r * (T + 1):(r + 1) * (T + 1)]) for r in range(len(vals) // (T + 1))]


# ---------------------------------------------------------------------------------------------
# The oracle: numpy float64, one position and one head at a time.
# ---------------------------------------------------------------------------------------------


def oracle_loss(w, rows):
    w = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    hd = D // H
    freqs = [math.exp(-(2 * i / hd) * math.log(10000.0)) for i in range(hd // 2)]

    def norm(v, g):
        return v / math.sqrt(float(np.dot(v, v)) / v.size + EPS) * g

    def rotate(v, p):
        out = v.copy()
        for i, f in enumerate(freqs):
            c, s = math.cos(p * f), math.sin(p * f)
            a, b = v[i], v[i + hd // 2]
            out[i], out[i + hd // 2] = a * c - b * s, a * s + b * c
        return out

    E = w["model.embed_tokens.weight"]
    total, count = 0.0, 0
    for row in rows:
        ids, targets = row[:-1], row[1:]
        h = [E[t].copy() for t in ids]
        for layer in range(L):
            p = f"model.layers.{layer}."
            xs = [norm(r, w[p + "input_layernorm.weight"]) for r in h]
            qs, ks, vs = [], [], []
            for t, x in enumerate(xs):
                q = (w[p + "self_attn.q_proj.weight"] @ x).reshape(H, hd)
                k = (w[p + "self_attn.k_proj.weight"] @ x).reshape(H, hd)
                qs.append([rotate(q[j], t) for j in range(H)])
                ks.append([rotate(k[j], t) for j in range(H)])
                vs.append((w[p + "self_attn.v_proj.weight"] @ x).reshape(H, hd))
            new = []
            for t in range(len(ids)):
                heads = []
                for j in range(H):
                    sc = np.array([qs[t][j] @ ks[s][j] for s in range(t + 1)]) / math.sqrt(hd)
                    e = np.exp(sc - sc.max())
                    heads.append(sum(e[s] * vs[s][j] for s in range(t + 1)) / e.sum())
                hp = h[t] + w[p + "self_attn.o_proj.weight"] @ np.concatenate(heads)
                y = norm(hp, w[p + "post_attention_layernorm.weight"])
                gate = w[p + "mlp.gate_proj.weight"] @ y
                up = w[p + "mlp.up_proj.weight"] @ y
                new.append(hp + w[p + "mlp.down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * up))
            h = new
        for t, r in enumerate(h):
            z = E @ norm(r, w["model.norm.weight"])
            m = z.max()
            total += m + math.log(np.exp(z - m).sum()) - z[targets[t]]
            count += 1
    return total / count


def torch_grads(w, rows):
    """Full float64 gradients from torch_lm's forward (in-process), for the directional checks."""
    params = {n: torch.from_numpy(np.asarray(v, dtype=np.float64)).requires_grad_() for n, v in w.items()}
    loss = lm.forward_loss(params, torch.tensor(rows, dtype=torch.int64), H, L, lm.Rope(T, D // H, torch.float64))
    loss.backward()
    return float(loss), {n: t.grad.numpy().copy() for n, t in params.items()}


def rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


# ---------------------------------------------------------------------------------------------
# Tests.
# ---------------------------------------------------------------------------------------------


def test_safetensors_round_trip_and_layout():
    rng = np.random.default_rng(5)
    ts = {"a.weight": rng.standard_normal((3, 7)).astype(np.float32),
          "b": rng.standard_normal(5).astype(np.float32),
          "c.x": np.array([0.0, -0.0, np.inf, 1e-45], dtype=np.float32)}
    path = tmp("rt.safetensors")
    tl.write_safetensors(path, ts)
    # Bytes by hand: 8-byte LE header length, JSON header, then the data back to back in order.
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    off = 0
    for name, a in ts.items():
        e = header[name]
        assert e["dtype"] == "F32" and e["shape"] == list(a.shape), (name, e)
        assert e["data_offsets"] == [off, off + a.nbytes], (name, e)
        got = np.frombuffer(raw[8 + n + off:8 + n + off + a.nbytes], dtype="<f4").reshape(a.shape)
        assert np.array_equal(got.view(np.uint32), a.view(np.uint32)), name
        off += a.nbytes
    assert len(raw) == 8 + n + off
    f = tl.SafetensorsFile(path)
    for name, a in ts.items():
        assert np.array_equal(f.get(name).view(np.uint32), a.view(np.uint32)), name
    f.close()


def test_loss_and_grads_vs_oracle_finite_differences():
    d, w = write_case("fd", seed=2, clip=1e3)
    out = run_check(d, "--double")
    rows = read_tokens_struct(os.path.join(d, "tokens.bin"))
    want = oracle_loss(w, rows)
    assert abs(out["loss"] - want) < 1e-12 * abs(want), (out["loss"], want)
    loss, g = torch_grads(w, rows)
    assert abs(loss - want) < 1e-12 * abs(want)
    h = 1e-5
    w64 = {n: v.astype(np.float64) for n, v in w.items()}

    def fd(name, direction):
        plus = dict(w64, **{name: w64[name] + h * direction})
        minus = dict(w64, **{name: w64[name] - h * direction})
        return (oracle_loss(plus, rows) - oracle_loss(minus, rows)) / (2 * h)

    for name, v in w64.items():
        s = out["grads"][name]
        assert len(s) == 10, (name, len(s))
        flat = g[name].reshape(-1)
        # The JSON summary is the in-process gradient's: first 8 values, sum, sum of squares.
        assert rel(s[:8], flat[:8]) < 1e-12, name
        assert abs(s[8] - flat.sum()) <= 1e-12 * np.abs(flat).sum() and abs(s[9] - (flat ** 2).sum()) <= 1e-12 * s[9], name
        # ...and the oracle's finite differences agree with it.
        for i in range(8):
            e = np.zeros(v.size)
            e[i] = 1
            num = fd(name, e.reshape(v.shape))
            assert abs(num - s[i]) < 1e-8 + 1e-6 * abs(s[i]), (name, i, num, s[i])
        num_sum = fd(name, np.ones(v.shape))
        assert abs(num_sum - s[8]) < 1e-8 + 1e-6 * abs(s[8]), (name, "sum", num_sum, s[8])
        num_sq = fd(name, g[name])
        assert abs(num_sq - s[9]) < 1e-8 + 1e-6 * s[9], (name, "sumsq", num_sq, s[9])
        assert s[9] > 1e-8, (name, "gradient vanishes: the test would not see a wrong one")
    norm = math.sqrt(sum(out["grads"][n][9] for n in w))
    assert abs(out["grad_norm"] - norm) < 1e-12 * norm, (out["grad_norm"], norm)


def adamw_expected(w, g, lr, wd, coef):
    """First AdamW step (bias-corrected): m_hat = g_c, v_hat = g_c^2."""
    out = {}
    for n, v in w.items():
        v = v.astype(np.float64)
        gc = g[n] * coef
        decay = lr * wd if n in DECAYED else 0.0
        out[n] = v * (1 - decay) - lr * gc / (np.abs(gc) + 1e-8)
    return out


def test_adamw_step_clipped_and_not():
    for name, clip, want_clipped in (("clipped", 0.05, True), ("unclipped", 1e3, False)):
        lr, wd = 0.02, 0.4
        d, w = write_case(name, seed=3, lr=lr, wd=wd, clip=clip)
        out = run_check(d, "--double")
        rows = read_tokens_struct(os.path.join(d, "tokens.bin"))
        _, g = torch_grads(w, rows)
        norm = math.sqrt(sum(float((v ** 2).sum()) for v in g.values()))
        assert abs(out["grad_norm"] - norm) < 1e-12 * norm
        assert (norm > clip) == want_clipped, (name, norm, clip)
        coef = min(1.0, clip / (norm + 1e-6))
        assert abs(out["clip_coef"] - coef) < 1e-15
        want = adamw_expected(w, g, lr, wd, coef)
        f = tl.SafetensorsFile(os.path.join(d, "torch_after.safetensors"))
        in_order = [n for n, _ in lm.param_shapes(V, D, FF, L)]
        assert f.keys() == in_order, f.keys()
        for n, v in want.items():
            s = out["after"][n]
            flat = v.reshape(-1)
            assert np.max(np.abs(np.array(s[:8]) - flat[:8])) < 1e-12, (name, n)
            assert abs(s[8] - flat.sum()) < 1e-10 * np.abs(flat).sum() and abs(s[9] - (flat ** 2).sum()) < 1e-10 * s[9], (name, n)
            a = f.get(n)
            assert f.dtype(n) == "F32" and list(a.shape) == list(v.shape), n
            assert np.array_equal(a, v.astype(np.float32)), (name, n, rel(a, v))
        f.close()
        # The decay set matters: the norms moved by lr (|g_c| >> eps, to 1e-2), decayed tensors by
        # lr*wd*w (here up to ~0.01) besides.
        for n in ("model.norm.weight", "model.layers.1.input_layernorm.weight"):
            delta = np.array(out["after"][n][:8]) - w[n].astype(np.float64)[:8]
            assert np.allclose(np.abs(delta), lr, rtol=1e-2), (n, delta)
        for n in ("model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight"):
            w0 = w[n].astype(np.float64).reshape(-1)[:8]
            delta = np.array(out["after"][n][:8]) - w0 * (1 - lr * wd)
            assert np.allclose(np.abs(delta), lr, rtol=1e-2), (n, delta)
            assert np.max(np.abs(lr * wd * w0)) > 0.1 * lr, n


def test_optimizer_two_steps_closed_form():
    # One step cannot see the betas (bias correction cancels them); two steps with set gradients can.
    rng = np.random.default_rng(8)
    w0 = {"a.weight": rng.standard_normal((3, 4)), "a.norm.weight": rng.standard_normal((4, 5)),
          "b.weight": rng.standard_normal(6), "c.bias": rng.standard_normal((2, 2))}
    grads = [{n: rng.standard_normal(v.shape) for n, v in w0.items()} for _ in range(2)]
    params = {n: torch.tensor(v, requires_grad=True) for n, v in w0.items()}
    lr, wd = 0.1, 0.3
    opt = lm.make_optimizer(params, lr, wd)
    for gs in grads:
        for n, t in params.items():
            t.grad = torch.tensor(gs[n])
        opt.step()
    b1, b2, eps = 0.9, 0.95, 1e-8
    for n, v in w0.items():
        m = s = 0
        for k, gs in enumerate(grads, 1):
            g = gs[n]
            m, s = b1 * m + (1 - b1) * g, b2 * s + (1 - b2) * g * g
            v = v * (1 - (lr * wd if n == "a.weight" else 0)) - lr * (m / (1 - b1 ** k)) / (np.sqrt(s / (1 - b2 ** k)) + eps)
        assert rel(params[n].detach().numpy(), v) < 1e-12, (n, rel(params[n].detach().numpy(), v))


def test_float32_close_to_float64():
    d, w = write_case("f32", seed=4, clip=0.1)
    a = run_check(d)
    b = run_check(d, "--double")
    assert a["dtype"] == "float32" and b["dtype"] == "float64"
    assert abs(a["loss"] - b["loss"]) < 1e-6 * b["loss"], (a["loss"], b["loss"])
    assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-5 * b["grad_norm"]
    for n in w:
        ga, gb = np.array(a["grads"][n]), np.array(b["grads"][n])
        assert np.max(np.abs(ga[:8] - gb[:8])) < 1e-5 * max(1.0, np.max(np.abs(gb[:8]))), n
        assert abs(ga[9] - gb[9]) < 1e-4 * gb[9], n
        # Elementwise sign updates can flip where |g| ~ float32 noise; first 8 of each tensor are fine here.
        aa, ab = np.array(a["after"][n][:8]), np.array(b["after"][n][:8])
        assert np.max(np.abs(aa - ab)) < 1e-5, (n, aa, ab)


def test_tokens_layout_row_major_inputs_targets():
    # Only the target of position (0, T-1) is a rare token; the rest repeat one id. Moving that
    # token to another cell of the (B, T+1) array changes the loss as the oracle says it does.
    w = tiny_weights(6)
    base = np.full((B, T + 1), 7)
    for r, c in ((0, T), (1, 0), (0, 3)):
        tok = base.copy()
        tok[r, c] = 41
        d, _ = write_case(f"layout-{r}-{c}", weights=w, tokens=tok)
        out = run_check(d, "--double")
        want = oracle_loss(w, tok.tolist())
        assert abs(out["loss"] - want) < 1e-12 * want, (r, c, out["loss"], want)
    # A (B, T+1) array read with the wrong row length would differ: B*(T+1) is checked exactly.
    assert read_tokens_struct(os.path.join(tmp("layout-1-0"), "tokens.bin"))[1][0] == 41


def test_refusals():
    cases = []
    d, w = write_case("bad-size")
    with open(os.path.join(d, "tokens.bin"), "ab") as f:
        f.write(b"\0\0\0\0")
    cases.append((d, [], "int32 values"))
    tok = np.zeros((B, T + 1), dtype=np.int64)
    tok[1, 2] = V
    d, _ = write_case("bad-id", tokens=tok)
    cases.append((d, [], "row 1, column 2"))
    d, _ = write_case("bad-heads")
    cases.append((d, ["--heads", "4"], "heads"))
    w2 = dict(tiny_weights(1))
    w2["model.layers.1.mlp.up_proj.weight"] = w2["model.layers.1.mlp.up_proj.weight"][:, :8]
    d, _ = write_case("bad-shape", weights=w2)
    cases.append((d, [], "model.layers.1.mlp.up_proj.weight"))
    w3 = dict(tiny_weights(1))
    del w3["model.norm.weight"]
    d, _ = write_case("bad-missing", weights=w3)
    cases.append((d, [], "model.norm.weight"))
    w4 = dict(tiny_weights(1), **{"lm_head.weight": np.zeros((V, D), np.float32)})
    d, _ = write_case("bad-extra", weights=w4)
    cases.append((d, [], "lm_head.weight"))
    d, _ = write_case("bad-batch", step_extra={"batch": B + 1, "seq": T})
    cases.append((d, [], "step.json: batch 3, but --batch 2"))
    for d, flags, needle in cases:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = lm.main(["--check", d, "--batch", str(B), "--seq", str(T)] + flags)
        assert rc == 1 and needle in err.getvalue(), (d, rc, err.getvalue())


def test_shape_from_step_json():
    # batch, seq and heads from step.json alone (no flags) give the same step as the flags.
    d, w = write_case("from-json", seed=9, step_extra={"batch": B, "seq": T})
    with contextlib.redirect_stdout(io.StringIO()):
        assert lm.main(["--check", d, "--double", "--threads", "1"]) == 0
    with open(os.path.join(d, "torch_out.json")) as f:
        a = json.load(f)
    b = run_check(d, "--double", "--heads", str(H))
    assert a["batch"] == B and a["seq"] == T and a["heads"] == H and a["loss"] == b["loss"], (a["loss"], b["loss"])
    assert a["grads"] == b["grads"] and a["after"] == b["after"]


def test_bench_init_and_decay_rule():
    Vb, Db, Fb, Lb = 1000, 384, 1024, 6
    p = lm.init_params(Vb, Db, Fb, Lb, seed=3)
    assert [(n, tuple(t.shape)) for n, t in p.items()] == lm.param_shapes(Vb, Db, Fb, Lb)
    for n, t in p.items():
        t = t.detach().double()
        if t.dim() == 1:
            assert torch.all(t == 1), n
        else:
            want = 0.02 / math.sqrt(2 * Lb) if n.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
            assert abs(float(t.std()) / want - 1) < 0.02 and abs(float(t.mean())) < want / 50, (n, float(t.std()))
    got = {n for n, t in lm.init_params(V, D, FF, L, seed=1).items() if lm.decayed(n, tuple(t.shape))}
    assert got == DECAYED, sorted(got ^ DECAYED)
    # Same seed, same init; another seed, another.
    a, b = lm.init_params(V, D, FF, L, seed=1), lm.init_params(V, D, FF, L, seed=2)
    assert all(torch.equal(a[n], lm.init_params(V, D, FF, L, seed=1)[n]) for n in a)
    assert not torch.equal(a["model.embed_tokens.weight"], b["model.embed_tokens.weight"])


def test_bench_line():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = lm.main(["--bench", "--vocab", "200", "--hidden", "32", "--layers", "2", "--heads", "4", "--mlp", "48",
                      "--seq", "16", "--batch", "3", "--steps", "3", "--warmup", "1", "--threads", "1"])
    assert rc == 0
    line = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert line["impl"] == "torch" and line["threads"] == 1 and len(line["step_s"]) == 3, line
    assert line["median_s"] == sorted(line["step_s"])[1]
    assert abs(line["tokens_per_s"] - 3 * 16 / line["median_s"]) < 1e-9 * line["tokens_per_s"]
    # A near-uniform start: loss near ln V.
    assert abs(line["loss_first"] - math.log(200)) < 0.1, line["loss_first"]


def main():
    torch.set_num_threads(1)
    return minitest.run(globals(), TMP)

if __name__ == "__main__":
    sys.exit(main())
