#!/usr/bin/env python3
"""Self-tests of bench/torch_deploy.py: /usr/bin/python3 bench/test_torch_deploy.py

Runs every test_* function (bench/minitest.py), tiny random-init models only (seconds). The float32
deployer is checked against torch_llama.py's reference forward; the bf16 and fp16 deployers for what
their rounding must give (every value representable in the dtype, errors of the dtype's size, fp16
finer than bf16); the output files for the layout `geloattack store import` reads.
"""

import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minitest  # noqa: E402
from minitest import row_errors, write_texts  # noqa: E402
import torch_deploy as td  # noqa: E402
import torch_llama as tl  # noqa: E402

TMP = tempfile.mkdtemp(prefix="test_torch_deploy.")
IDS = [1, 17, 3, 3, 60, 0, 42, 11, 29, 5, 77, 8]
U = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}  # unit roundoff of each dtype

_made = {}


def model_dir(like="tiny-llama", **overrides):
    """A random-init tiny model with BF16 weights (as real checkpoints ship), made once."""
    key = (like, json.dumps(overrides, sort_keys=True))
    if key not in _made:
        path = os.path.join(TMP, f"{like}-{len(_made)}")
        tl.init_random(path, like, 3, "BF16", overrides)
        _made[key] = path
    return _made[key]


def f64_rows(path, ids):
    """torch_llama's float64 forward: the exact rows the deployers approximate."""
    r = tl.Model.load(path, torch.float64).forward(torch.tensor([ids]))
    return {"residual": [t[0] for t in r["residual"]], "attn_input": [t[0] for t in r["attn_input"]]}


def test_fp32_is_the_reference_forward():
    for like in ("tiny-llama", "tiny-llama3", "tiny-qwen2", "tiny-qwen3"):
        path = model_dir(like)
        got = td.Deployer(path, torch.float32).forward(IDS)
        want = f64_rows(path, IDS)
        for k in ("residual", "attn_input"):
            for L, (g, w) in enumerate(zip(got[k], want[k])):
                e = row_errors(g, w).max()
                assert e < 2e-6, f"{like} {k}.{L}: float32 deployer off the float64 reference by {e:.3g}"


def test_rows_are_dtype_values():
    # Every row the deployer writes is a value of the storage dtype: rounding was applied last.
    for dt in ("bf16", "fp16"):
        for like in ("tiny-gqa-tied", "tiny-qwen2", "tiny-qwen3"):
            r = td.Deployer(model_dir(like), td.DTYPES[dt]).forward(IDS)
            for k in ("residual", "attn_input"):
                for L, x in enumerate(r[k]):
                    assert x.dtype == torch.float32, (dt, like, k, L, x.dtype)
                    assert torch.equal(x.to(td.DTYPES[dt]).float(), x), f"{dt} {like} {k}.{L}: not {dt} values"


def test_error_is_the_dtypes():
    # Against float64, each dtype's rows err by a few of its unit roundoffs, fp16 by less than bf16,
    # and never by nothing below the embedding (a deployer that rounded nowhere would pass as fp32).
    path = model_dir("tiny-llama3")
    want = f64_rows(path, IDS)
    worst = {}
    for dt in ("bf16", "fp16"):
        for kernels in ("emulate", "native"):
            if dt == "fp16" and kernels == "native":
                continue  # no float16 CPU kernels in torch 1.13
            got = td.Deployer(path, td.DTYPES[dt], kernels).forward(IDS)
            for L, (g, w) in enumerate(zip(got["attn_input"], want["attn_input"])):
                e = row_errors(g, w)
                assert 0.1 * U[dt] < e.max() < 8 * U[dt] * (L + 1) ** 0.5, (dt, kernels, L, e.max())
                worst[dt] = max(worst.get(dt, 0), e.max())
    assert worst["fp16"] < worst["bf16"] / 4, worst


def test_fused_attention_differs_little():
    path = model_dir("tiny-llama")
    want = f64_rows(path, IDS)
    eager = td.Deployer(path, torch.bfloat16).forward(IDS)
    fused = td.Deployer(path, torch.bfloat16, attention="fused").forward(IDS)
    assert not torch.equal(eager["residual"][1], fused["residual"][1]), "fused attention rounded as eager does"
    for L in range(len(want["attn_input"])):
        e = row_errors(fused["attn_input"][L], want["attn_input"][L]).max()
        assert e < 8 * U["bf16"] * (L + 1) ** 0.5, (L, e)


def test_native_fp16_on_cpu_is_refused_clearly():
    try:
        torch.nn.functional.linear(torch.ones(2, 2, dtype=torch.float16), torch.ones(2, 2, dtype=torch.float16))
    except RuntimeError:
        pass
    else:
        return  # this torch has float16 CPU kernels: nothing to refuse
    try:
        td.Deployer(model_dir(), torch.float16, "native")
    except ValueError as e:
        assert "--kernels emulate" in str(e), e
    else:
        raise AssertionError("native fp16 on a CPU without fp16 kernels was accepted")


def test_output_layout():
    path = model_dir("tiny-qwen3")
    texts = [{"id": 7, "tokens": IDS, "bos": 1}, {"id": 3, "tokens": [1, 4], "bos": 1},
             {"id": 12, "tokens": [9, 9, 9]}]
    src = write_texts(os.path.join(TMP, "layout.jsonl"), texts)
    out = os.path.join(TMP, "layout-out")
    info = td.deploy(path, src, out, "bf16", [0, 1], ["attn-input", "residual"], drop_bos=True)
    assert sorted(os.listdir(out)) == ["attn-input.0", "attn-input.1", "deployer.json", "residual.0", "residual.1"]
    with open(os.path.join(out, "deployer.json")) as f:
        assert json.load(f) == info
    assert info["dtype"] == "bf16" and info["kernels"] == "emulate" and info["torch"] == torch.__version__
    assert info["texts"] == 3 and info["tokens"] == len(IDS) + 5 and info["bos"] == "dropped", info
    assert info["weight_dtypes"] == ["BF16"] and info["architecture"] == "Qwen3ForCausalLM", info
    dep = td.Deployer(path, torch.bfloat16)
    for rec in texts:
        r = dep.forward(rec["tokens"])
        for point, key in (("attn-input", "attn_input"), ("residual", "residual")):
            for L in (0, 1):
                z = np.load(os.path.join(out, f"{point}.{L}", f"text_{rec['id']:08d}.npz"))
                assert set(z.files) == {"token_ids", "attention_mask", "embeddings", "text_embedding"}, z.files
                T = len(rec["tokens"])
                assert z["token_ids"].dtype == np.int32 and z["token_ids"].tolist() == rec["tokens"]
                mask = [0] * rec.get("bos", 0) + [1] * (T - rec.get("bos", 0))
                assert z["attention_mask"].dtype == np.int8 and z["attention_mask"].tolist() == mask
                assert z["embeddings"].dtype == np.float32 and z["embeddings"].shape == (T, 64)
                assert np.array_equal(z["embeddings"], r[key][L].numpy()), (point, L, rec["id"])
                emb = z["text_embedding"]
                final = r["residual"][-1].double()
                m = final[rec.get("bos", 0):].mean(0) if T > rec.get("bos", 0) else final.mean(0)
                assert np.allclose(emb, (m / m.norm()).numpy(), atol=1e-6) and abs(np.linalg.norm(emb) - 1) < 1e-6
    try:
        td.deploy(path, src, out, "bf16")
    except ValueError as e:
        assert "overwrite" in str(e), e
    else:
        raise AssertionError("a non-empty output directory was overwritten")


def test_input_is_validated():
    path = model_dir()
    vocab = tl.load_config(path).vocab
    bad = {
        "duplicate id": [{"id": 1, "tokens": [2]}, {"id": 1, "tokens": [3]}],
        "negative id": [{"id": -1, "tokens": [2]}],
        "id not an int": [{"id": "1", "tokens": [2]}],
        "out of vocabulary": [{"id": 1, "tokens": [vocab]}],
        "empty tokens": [{"id": 1, "tokens": []}],
        "bos past the end": [{"id": 1, "tokens": [2], "bos": 2}],
        "unknown key": [{"id": 1, "tokens": [2], "text": "x"}],
    }
    for i, (name, texts) in enumerate(bad.items()):
        src = write_texts(os.path.join(TMP, f"bad{i}.jsonl"), texts)
        try:
            td.deploy(path, src, os.path.join(TMP, f"bad-out{i}"), "fp32")
        except ValueError:
            pass
        else:
            raise AssertionError(f"{name}: accepted")
    src = write_texts(os.path.join(TMP, "ok.jsonl"), [{"id": 1, "tokens": [2]}])
    for args in (dict(blocks=[2]), dict(points=["mlp"]), dict(dtype_name="fp8")):
        try:
            td.deploy(path, src, os.path.join(TMP, "bad-args"), **args)
        except ValueError:
            pass
        else:
            raise AssertionError(f"{args}: accepted")


def test_cli():
    path = model_dir()
    src = write_texts(os.path.join(TMP, "cli.jsonl"), [{"id": 5, "tokens": IDS}])
    out = os.path.join(TMP, "cli-out")
    assert td.main(["--model", path, "--tokens", src, "--out", out, "--dtype", "fp16", "--blocks", "1,0",
                    "--points", "residual", "--threads", "1"]) == 0
    assert sorted(os.listdir(out)) == ["deployer.json", "residual.0", "residual.1"]
    assert td.main(["--model", path, "--tokens", src, "--out", out]) == 1  # refuses to overwrite


def main():
    return minitest.run(globals(), TMP)


if __name__ == "__main__":
    sys.exit(main())
