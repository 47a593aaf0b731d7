#!/usr/bin/env python3
"""Prompt decoding against a deployer we did not write (issue 36, items 2 and 6).

Runs `geloattack decode` on the rows of four deployers (geloattack's own float32 forward, and
bench/torch_deploy.py in fp32, bf16 and fp16), with three attacker BLAS (gonum, OpenBLAS's own
kernel for the CPU, OPENBLAS_CORETYPE=Haswell) and three shield settings (10% gaussian shields of
scale 1, below full rank; +d shield rows of scale 1 and of scale 10, past full rank), one cell at
a time under nice, and prints the matrix: texts, exact texts read (count, 95% Wilson interval),
claims, wrong claims, and texts read exactly but not claimed.

Texts: the scripts/fetch-data.sh corpora's fortunes and WordNet glosses that tokenize to 4..15
tokens (BOS included), the first --per-corpus of each in the order decode reads the corpora, interleaved, written as a
.jsonl source with their source ids (so -split is the stores' split). Every text ends before the
-max-tokens 16 cut, so the search is not stopped by the model's context and a text's end can be
proven (a text the cut ends is open and never claimed: docs/prompt-decoding.md).

Standard library only; the deployer runs under --torch-python (a python3 with torch). Cells whose
JSON exists are not rerun, so an interrupted run resumes.

  python3 bench/decode_deployer_matrix.py --gd /tmp/gd --work /tmp/i36 [--cells REGEX] [--summary]
"""

import argparse
import json
import os
import re
import sys

from deployer_matrix import DEPLOYERS, blas_env, cell_seconds, deploy as torch_deploy, init_model, run, run_cell, wilson

# The attacker's BLAS of this matrix (deployer_matrix.BLAS): OpenBLAS's own kernel is SkylakeX on
# the machine it ran on, so "skylakex" would repeat it.
BLAS = ["gonum", "openblas", "haswell"]
SHIELDS = {
    "below": ["-shield-frac", "0.1", "-shield-scale", "1"],
    "full1": ["-shield-rows", "256", "-shield-scale", "1"],
    "full10": ["-shield-rows", "256", "-shield-scale", "10"],
}


def decode_tokens(tokenizer, ids):
    """The text of SentencePiece-BPE ids (tokenizer.json's decoder: ▁ -> space, byte fallback)."""
    b = bytearray()
    for i in ids:
        p = tokenizer[i]
        if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            b.append(int(p[3:5], 16))
        else:
            b += p.replace("\u2581", " ").encode()
    s = b.decode("utf-8", "replace")
    return s[1:] if s.startswith(" ") else s


def make_texts(a):
    src = os.path.join(a.work, "texts.jsonl")
    if os.path.exists(src):
        return src
    all64 = os.path.join(a.work, "all64.tokens.jsonl")
    run(["nice", a.gd, "decode", "-model", a.model, "-max-texts", "1000000", "-max-tokens", "64",
         "-deployer-texts", all64])
    tj = json.load(open(os.path.join(a.model, "tokenizer.json")))
    inv = {v: k for k, v in tj["model"]["vocab"].items()}
    picked = {"1": [], "2": []}  # source id's first digit: 1 fortunes, 2 WordNet (3 sotu: none short)
    for line in open(all64):
        r = json.loads(line)
        t, c = r["tokens"], str(r["id"])[0]
        if 4 <= len(t) <= 15 and c in picked and len(picked[c]) < a.per_corpus:
            picked[c].append({"id": r["id"], "text": decode_tokens(inv, t[r["bos"]:]), "tokens": t})
    rows = [x for pair in zip(picked["1"], picked["2"]) for x in pair]
    tmp = os.path.join(a.work, "texts.tmp.jsonl")  # .jsonl: decode reads it as JSON lines
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps({"id": r["id"], "text": r["text"]}) + "\n")
    # The texts must tokenize back to the same ids.
    rt = os.path.join(a.work, "texts.roundtrip.jsonl")
    run(["nice", a.gd, "decode", "-model", a.model, "-texts", tmp, "-max-texts", "1000000",
         "-max-tokens", "64", "-deployer-texts", rt])
    back = {json.loads(l)["id"]: json.loads(l)["tokens"] for l in open(rt)}
    bad = [r["id"] for r in rows if back.get(r["id"]) != r["tokens"]]
    if bad:
        sys.exit(f"texts: {len(bad)} texts do not tokenize back to their ids, e.g. {bad[:3]}")
    os.rename(tmp, src)
    return src


def common(a, src):
    return ["-model", a.model, "-texts", src, "-split", a.split, "-max-texts", str(a.max_texts),
            "-max-tokens", "16", "-positives", "4", "-batches", str(a.batches), "-blocks", "0,1",
            "-no-order-margin"]


def deploy(a, src):
    tokens = os.path.join(a.work, "deployer-texts.jsonl")
    if not os.path.exists(tokens):
        run(["nice", a.gd, "decode"] + common(a, src) + ["-deployer-texts", tokens])
    for dt in ("fp32", "bf16", "fp16"):
        torch_deploy(a.torch_python, a.model, tokens, os.path.join(a.work, "dep-" + dt), dt, "0,1")


def cells():
    out = []
    for dep in DEPLOYERS:
        for sh in SHIELDS:
            for blas in BLAS:
                out.append((dep, blas, sh, None))
    for dep in DEPLOYERS:  # U observed in bf16, below full rank
        for blas in BLAS:
            out.append((dep, blas, "below", "bf16"))
    return out


def cell_name(dep, blas, sh, obs):
    return f"{dep}.{blas}.{sh}" + (f".obs-{obs}" if obs else "")


def cell_cmd(a, src, dep, sh, obs, out):
    cmd = [a.gd, "decode"] + common(a, src) + SHIELDS[sh] + ["-out", out]
    if dep != "geloattack-fp32":
        cmd += ["-deployer-rows", os.path.join(a.work, "dep-" + dep.split("-")[1])]
    if obs:
        cmd += ["-observe-dtype", obs]
    return cmd


def summarize(path):
    res = json.load(open(path))
    texts = exact = claims = right = 0
    acc = prec = rec = 0.0
    distinct = set()
    for b in res:
        texts += len(b["truth"])
        distinct.update(tuple(t) for t in b["truth"])
        exact += round(b["exact"] * len(b["truth"]))
        claims += b["claims"]
        right += b["claims_right"]
        acc += b["token_accuracy"] * len(b["truth"])
        prec += b["bag_precision"] / len(res)
        rec += b["bag_recall"] / len(res)
    return dict(texts=texts, distinct=len(distinct), exact=exact, claims=claims, wrong=claims - right,
                unclaimed=exact - right, ci=wilson(exact, texts),
                acc=acc / texts, bag=f"{prec:.2f} / {rec:.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gd", required=True, help="a geloattack binary (go build -o ... ./cmd/geloattack)")
    p.add_argument("--work", required=True, help="working directory: model, texts, deployer rows, cells")
    p.add_argument("--tokenizer", default=os.path.expanduser(
        "~/.cache/geloattack/tokenizers/llama2/tokenizer.json"))
    p.add_argument("--torch-python", default="/usr/bin/python3")
    p.add_argument("--per-corpus", type=int, default=1000)
    p.add_argument("--split", default="val")
    p.add_argument("--max-texts", type=int, default=2000)
    p.add_argument("--batches", type=int, default=25)
    p.add_argument("--cells", default="", help="run only the cells whose name matches this regex")
    p.add_argument("--summary", action="store_true", help="print the table of the cells run; run none")
    a = p.parse_args()
    os.makedirs(os.path.join(a.work, "cells"), exist_ok=True)
    a.model = init_model(a.gd, a.work, a.tokenizer)
    src = make_texts(a)
    deploy(a, src)
    rows = []
    for dep, blas, sh, obs in cells():
        name = cell_name(dep, blas, sh, obs)
        if a.cells and not re.search(a.cells, name):
            continue
        out = os.path.join(a.work, "cells", name + ".json")
        if not a.summary:
            # decode's -out directory; its results.json is the cell's file
            run_cell(out, lambda tmp: cell_cmd(a, src, dep, sh, obs, tmp), blas_env(blas), inner="results.json")
        if os.path.exists(out):
            s = summarize(out)
            s["s"] = cell_seconds(out)
            rows.append((name, s))
    print("| cell | texts (distinct) | exact | 95% Wilson | claims | wrong claims | exact, not claimed "
          "| token acc | bag P / R | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, s in rows:
        lo, hi = s["ci"]
        print(f"| {name} | {s['texts']} ({s['distinct']}) | {s['exact']} | {lo:.3f}–{hi:.3f} | {s['claims']} | "
              f"{s['wrong']} | {s['unclaimed']} | {s['acc']:.3f} | {s['bag']} | {s['s']} |")
    wrong = sum(s["wrong"] for _, s in rows)
    if wrong:
        print(f"WRONG CLAIMS: {wrong}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
