#!/usr/bin/env python3
"""The main defence tables of docs/prompt-decoding.md against two deployers (issue 36, item 6).

Runs `geloattack decode` on the rows of geloattack's own float32 forward and on the rows of
bench/torch_deploy.py in bf16 (attacked with -deployer-rows and -deployer-precision bf16), one cell
at a time under `nice -n 19`, for the rows of the two main tables:

  lm     the trained decoder (~/.cache/geloattack/models/lm-small: d 384, 6 blocks), attacker
         blocks 0,1,2: base (10% gaussian shields of scale 1, U in fp32), U observed in bf16,
         gaussian 10, manifold 1, student_t 1, kappa 100, obs_rows 0.96 and 0.8, +384 gaussian
         shield rows of scale 1 and of scale 10 (past full rank)
  m4096  /tmp/m4096 (the Llama-2-7B block, 2 blocks, random init, bf16 file), attacker blocks 0,1:
         base, U observed in bf16, and +4096 gaussian rows of scale 1 with -bag-only

and, to look into what the bf16 deployer costs on lm: the base cell and U in bf16 with all 6
blocks scored (-blocks 0,1,2,3,4,5), -joint, the ranking search (-rank, at every setting below
full rank that the fp32 deployer reads), -recompute-error 0.02 (rho from the measured error, which
the attacker does not know), and

  lmb    lm-small with its weights rounded to bf16 (written into --work), so that the bf16
         deployer's weights are the attacker's: base, U observed in bf16, blocks 0-5 scored

Texts: bench/decode_deployer_matrix.py's (the fortunes and WordNet glosses that tokenize to 4..15
tokens with BOS under the Llama-2 tokenizer, which lm-small and /tmp/m4096 share), kept to the val
split (data.SplitOf, val_frac 0.1: the texts lm-small never trained on), so every text ends before
the -max-tokens 16 cut and a text's end can be proven. Each cell decodes --batches batches of 4
texts into its own decode -out directory (-resume: a killed cell continues where it stopped); a
d 4096 cell may also stop at --limit-4096 seconds (SIGINT: decode keeps the batches finished), and then
the table says so. Every cell runs -no-order-margin, as the older tables did.

Standard library only; the deployer runs under --torch-python.

  python3 bench/decode_defence_deployers.py --gd /tmp/gd-t36 --work /tmp/t36 [--cells REGEX] [--summary]
"""

import argparse
import array
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

from decode_deployer_matrix import make_texts
from deployer_matrix import run, wilson

NICE = ["nice", "-n", "19"]
DEPLOYERS = ["geloattack-fp32", "torch-bf16"]

MODELS = {
    # blocks: the attacker's (a row may give -blocks again: the last one counts); deployed: the
    # blocks the PyTorch deployer writes, every block a row attacks
    "lm": {"dir": os.path.expanduser("~/.cache/geloattack/models/lm-small"), "blocks": "0,1,2",
           "deployed": "0,1,2,3,4,5"},
    "m4096": {"dir": "/tmp/m4096", "blocks": "0,1", "deployed": "0,1"},
    # lm-small with its float32 weights rounded to bf16 (made by bf16_copy in --work): the
    # deployer's weights are then the attacker's, bit for bit, as with a checkpoint shipped in bf16
    "lmb": {"dir": None, "blocks": "0,1,2", "deployed": "0,1,2,3,4,5"},
}

# (model, row name, its flags on top of the base cell's[, deployers: both if left out]), in the
# order they run: the trained decoder's table, d = 4096's base, the rows that look into the bf16
# deployer's loss, then d = 4096's other rows (each up to --limit-4096 seconds).
ROWS = [
    ("lm", "base", []),
    ("lm", "obs-bf16", ["-observe-dtype", "bf16"]),
    ("lm", "gaussian10", ["-shield-scale", "10"]),
    ("lm", "manifold1", ["-shield-kind", "manifold"]),
    ("lm", "student_t1", ["-shield-kind", "student_t"]),
    ("lm", "kappa100", ["-kappa", "100"]),
    ("lm", "obs0.96", ["-obs-rows", "0.96"]),
    ("lm", "obs0.8", ["-obs-rows", "0.8"]),
    ("lm", "full384-1", ["-shield-rows", "384", "-shield-scale", "1"]),
    ("lm", "full384-10", ["-shield-rows", "384", "-shield-scale", "10"]),
    # every block of the trained decoder scored: the older table's answer to bf16's margins
    ("lm", "base-6blocks", ["-blocks", "0,1,2,3,4,5"]),
    ("lm", "obs-bf16-6blocks", ["-observe-dtype", "bf16", "-blocks", "0,1,2,3,4,5"]),
    ("m4096", "base", []),
    # the bf16 deployer's loss, looked into (after the rows above): the joint score over all 6
    # blocks, the ranking search, and rho from the measured error (PyTorch bf16 against fp32 rows of
    # the same texts: at most 0.0133 relative at blocks 0-5, where fptol.Recompute gives
    # 0.047-0.081 at blocks 0-2), which the attacker does not know: what a tighter bound would buy
    ("lm", "base-6blocks-joint", ["-blocks", "0,1,2,3,4,5", "-joint"]),
    ("lm", "base-rank", ["-rank"]),
    ("lm", "base-rho0.02", ["-recompute-error", "0.02"], ["torch-bf16"]),
    ("lm", "base-6blocks-rho0.02", ["-blocks", "0,1,2,3,4,5", "-recompute-error", "0.02"], ["torch-bf16"]),
    ("lmb", "base", []),
    ("lmb", "obs-bf16", ["-observe-dtype", "bf16"]),
    ("lmb", "base-6blocks", ["-blocks", "0,1,2,3,4,5"]),
    ("m4096", "obs-bf16", ["-observe-dtype", "bf16"]),
    ("m4096", "full4096-1-bag", ["-shield-rows", "4096", "-shield-scale", "1", "-bag-only"]),
    # the ranking search on the bf16 deployer's rows at the other settings below full rank
    ("lm", "obs-bf16-rank", ["-observe-dtype", "bf16", "-rank"], ["torch-bf16"]),
    ("lm", "gaussian10-rank", ["-shield-scale", "10", "-rank"], ["torch-bf16"]),
    ("lm", "manifold1-rank", ["-shield-kind", "manifold", "-rank"], ["torch-bf16"]),
    ("lm", "student_t1-rank", ["-shield-kind", "student_t", "-rank"], ["torch-bf16"]),
    ("lm", "kappa100-rank", ["-kappa", "100", "-rank"], ["torch-bf16"]),
    ("lm", "obs0.96-rank", ["-obs-rows", "0.96", "-rank"], ["torch-bf16"]),
]

LABELS = {
    "base": "10% gaussian 1 (base)",
    "obs-bf16": "10% gaussian 1, U observed in bf16",
    "gaussian10": "10% gaussian 10",
    "manifold1": "10% manifold 1",
    "student_t1": "10% student_t 1",
    "kappa100": "10% gaussian 1, κ 100",
    "obs0.96": "10% gaussian 1, obs_rows 0.96",
    "obs0.8": "10% gaussian 1, obs_rows 0.8",
    "full384-1": "+384 gaussian 1 (past full rank)",
    "full384-10": "+384 gaussian 10 (past full rank)",
    "full4096-1-bag": "+4096 gaussian 1, bag only (past full rank)",
    "base-6blocks": "10% gaussian 1, blocks 0–5 scored",
    "obs-bf16-6blocks": "10% gaussian 1, U observed in bf16, blocks 0–5 scored",
    "base-6blocks-joint": "10% gaussian 1, blocks 0–5 scored, -joint",
    "base-rank": "10% gaussian 1, ranking search (-rank)",
    "base-rho0.02": "10% gaussian 1, -recompute-error 0.02 (ρ from the measured error)",
    "base-6blocks-rho0.02": "10% gaussian 1, blocks 0–5, -recompute-error 0.02",
    "obs-bf16-rank": "10% gaussian 1, U observed in bf16, -rank",
    "gaussian10-rank": "10% gaussian 10, -rank",
    "manifold1-rank": "10% manifold 1, -rank",
    "student_t1-rank": "10% student_t 1, -rank",
    "kappa100-rank": "10% gaussian 1, κ 100, -rank",
    "obs0.96-rank": "10% gaussian 1, obs_rows 0.96, -rank",
}


def splitmix64(x):
    """data/split.go's splitmix64 on a uint64."""
    m = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def is_val(text_id, val_frac=0.1):
    """data.SplitOf(text_id, val_frac) == Val."""
    return (splitmix64(text_id & ((1 << 64) - 1)) >> 11) / (1 << 53) < val_frac


def bf16_copy(src, dst):
    """dst: the Hugging Face directory src with every F32 tensor of model.safetensors rounded to
    BF16 (round to nearest even, as torch's cast), config.json's torch_dtype bfloat16 (once)."""
    if os.path.exists(os.path.join(dst, "model.safetensors")):
        return dst
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), tmp)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["torch_dtype"] = "bfloat16"
    json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"), indent=2)
    raw = open(os.path.join(src, "model.safetensors"), "rb").read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    head = json.loads(raw[8:8 + hlen])
    data = raw[8 + hlen:]
    out_head, parts, off = {}, [], 0
    for name, t in sorted(((k, v) for k, v in head.items() if k != "__metadata__"),
                          key=lambda kv: kv[1]["data_offsets"][0]):
        b = data[t["data_offsets"][0]:t["data_offsets"][1]]
        if t["dtype"] == "F32":
            u = array.array("I")
            u.frombytes(b)  # little-endian machine: safetensors' byte order
            b = array.array("H", (((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF for x in u)).tobytes()
            t = dict(t, dtype="BF16")
        out_head[name] = dict(t, data_offsets=[off, off + len(b)])
        parts.append(b)
        off += len(b)
    if "__metadata__" in head:
        out_head["__metadata__"] = head["__metadata__"]
    hj = json.dumps(out_head, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(tmp, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for b in parts:
            f.write(b)
    os.rename(tmp, dst)
    return dst


def val_texts(a):
    """work/texts-val.jsonl: the val side of decode_deployer_matrix's texts, in their order, then
    the first 8 of the train side (the sampler refuses a source with an empty train split; -split
    val never draws them). The deployer then runs 201 texts instead of 2,000: minutes at d 4096."""
    out = os.path.join(a.work, "texts-val.jsonl")
    if os.path.exists(out):
        return out
    ns = argparse.Namespace(work=a.work, gd=a.gd, model=MODELS["lm"]["dir"], per_corpus=1000)
    src = make_texts(ns)
    rows = [json.loads(l) for l in open(src)]
    val = [r for r in rows if is_val(r["id"])] + [r for r in rows if not is_val(r["id"])][:8]
    with open(out + ".tmp", "w") as f:
        for r in val:
            f.write(json.dumps(r) + "\n")
    os.rename(out + ".tmp", out)
    return out


def common(a, m, src):
    return ["-model", MODELS[m]["dir"], "-texts", src, "-split", "val", "-max-texts", "2000",
            "-max-tokens", "16", "-positives", "4", "-batches", str(a.batches[m]),
            "-blocks", MODELS[m]["blocks"], "-shield-frac", "0.1", "-shield-scale", "1",
            "-no-order-margin", "-quiet"]


def deploy(a, m, src):
    """The PyTorch bf16 deployer's rows of every text decode attacks on model m (once)."""
    tokens = os.path.join(a.work, m, "deployer-texts.jsonl")
    os.makedirs(os.path.dirname(tokens), exist_ok=True)
    if not os.path.exists(tokens):
        run(NICE + [a.gd, "decode"] + common(a, m, src) + ["-deployer-texts", tokens])
    out = os.path.join(a.work, m, "dep-bf16")
    if not os.path.exists(os.path.join(out, "deployer.json")):
        if os.path.isdir(out):
            run(["rm", "-rf", out])  # a killed run's: torch_deploy.py wants a new or empty directory
        t0 = time.time()
        run(NICE + [a.torch_python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_deploy.py"),
                    "--model", MODELS[m]["dir"], "--tokens", tokens, "--out", out, "--dtype", "bf16",
                    "--blocks", MODELS[m]["deployed"], "--points", "attn-input", "--threads", "2"])
        with open(out + ".time", "w") as f:
            f.write(f"{time.time() - t0:.1f}\n")
    return out


def cell_cmd(a, m, src, dep, flags, out):
    cmd = [a.gd, "decode"] + common(a, m, src) + flags + ["-out", out, "-resume"]
    if dep == "torch-bf16":
        cmd += ["-deployer-rows", os.path.join(a.work, m, "dep-bf16"), "-deployer-precision", "bf16"]
    return cmd


def run_cell(a, m, src, dep, flags, out):
    """Runs (or resumes) one cell into the decode directory out; out.done marks it finished, with
    why it stopped, out.time the wall seconds of all its runs together."""
    if os.path.exists(out + ".done"):
        return
    limit = a.cell_limit[m]
    spent = float(open(out + ".time").read()) if os.path.exists(out + ".time") else 0.0
    left = limit - spent if limit else 0
    cmd = NICE + cell_cmd(a, m, src, dep, flags, out)
    if limit:
        cmd = ["timeout", "-s", "INT", str(max(1, int(left)))] + cmd
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    t0 = time.time()
    with open(out + ".log", "a") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=log).returncode
    with open(out + ".time", "w") as f:
        f.write(f"{spent + time.time() - t0:.1f}\n")
    if rc == 0:
        why = "finished"
    elif rc in (124, 130) and limit:
        why = f"cut at the {limit} s limit"
    else:
        sys.exit(f"{out}: decode exited {rc}; see {out}.log")
    with open(out + ".done", "w") as f:
        f.write(why + "\n")


def summarize(out):
    """The totals of a decode directory's results.jsonl (every batch it finished)."""
    res = [json.loads(l) for l in open(os.path.join(out, "results.jsonl")) if l.strip()]
    texts = exact = claims = right = 0
    acc = prec = rec = 0.0
    distinct = set()
    for b in res:
        n = len(b["truth"])
        texts += n
        distinct.update(tuple(t) for t in b["truth"])
        exact += round((b.get("exact") or 0) * n)
        claims += b["claims"]
        right += b["claims_right"]
        acc += (b.get("token_accuracy") or 0) * n
        prec += b["bag_precision"] / len(res)
        rec += b["bag_recall"] / len(res)
    # -bag-only: no order search, so no exact texts or token accuracy (null in the JSON); the bag's
    # figures instead: margin (decades; min over batches) and ranking recall (mean)
    bag_only = all(b.get("exact") is None for b in res)
    margins = [b["bag_margin"] for b in res if b.get("bag_margin") is not None]
    ranks = [b["bag_rank_recall"] for b in res if b.get("bag_rank_recall") is not None]
    why = open(out + ".done").read().strip() if os.path.exists(out + ".done") else "running"
    secs = open(out + ".time").read().strip() if os.path.exists(out + ".time") else "?"
    return dict(batches=len(res), texts=texts, distinct=len(distinct), exact=exact, claims=claims,
                wrong=claims - right, unclaimed=exact - right, ci=wilson(exact, texts),
                acc=acc / texts if texts else float("nan"), bag=f"{prec:.2f} / {rec:.2f}", why=why, s=secs,
                bag_only=bag_only, bag_margin=min(margins) if margins else float("nan"),
                rank_recall=sum(ranks) / len(ranks) if ranks else float("nan"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gd", required=True, help="a geloattack binary (go build -o ... ./cmd/geloattack)")
    p.add_argument("--work", required=True, help="working directory: texts, deployer rows, cells")
    p.add_argument("--torch-python", default="/usr/bin/python3")
    p.add_argument("--batches-lm", type=int, default=25, help="batches of 4 texts per lm-small cell")
    p.add_argument("--batches-4096", type=int, default=13, help="batches of 4 texts per d = 4096 cell")
    p.add_argument("--limit-4096", type=int, default=1200, help="seconds a d = 4096 cell may run (0: none)")
    p.add_argument("--cells", default="", help="run only the cells whose name matches this regex")
    p.add_argument("--summary", action="store_true", help="print the table of the cells run; run none")
    a = p.parse_args()
    a.batches = {"lm": a.batches_lm, "lmb": a.batches_lm, "m4096": a.batches_4096}
    a.cell_limit = {"lm": 0, "lmb": 0, "m4096": a.limit_4096}
    os.makedirs(os.path.join(a.work, "cells"), exist_ok=True)
    MODELS["lmb"]["dir"] = bf16_copy(MODELS["lm"]["dir"], os.path.join(a.work, "lm-small-bf16"))
    src = val_texts(a)
    rows = []
    for m, row, flags, *deps in ROWS:
        for dep in (deps[0] if deps else DEPLOYERS):
            name = f"{m}.{row}.{dep}"
            if a.cells and not re.search(a.cells, name):
                continue
            out = os.path.join(a.work, "cells", name)
            if not a.summary:
                if dep == "torch-bf16":
                    deploy(a, m, src)
                run_cell(a, m, src, dep, flags, out)
            if os.path.exists(os.path.join(out, "results.jsonl")):
                rows.append((m, row, dep, summarize(out)))
                if rows[-1][3]["wrong"] and not a.summary:
                    # a wrong claim is a bug in decode: stop with the cell's directory kept
                    sys.exit(f"{name}: {rows[-1][3]['wrong']} wrong claims; the cell's results are in {out}")
    print("| model | shields | deployer | batches | texts (distinct) | exact | 95% Wilson | claims | wrong claims "
          "| exact, not claimed | token acc | bag P / R | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m, row, dep, s in rows:
        lo, hi = s["ci"]
        note = "" if s["why"] == "finished" else f" ({s['why']})"
        if s["bag_only"]:
            print(f"| {m} | {LABELS[row]} | {dep} | {s['batches']}{note} | {s['texts']} ({s['distinct']}) | - (bag only) "
                  f"| - | - | - | - | - | {s['bag']}; margin min {s['bag_margin']:.2f}, ranking recall "
                  f"{s['rank_recall']:.3f} | {s['s']} |")
            continue
        print(f"| {m} | {LABELS[row]} | {dep} | {s['batches']}{note} | {s['texts']} ({s['distinct']}) | {s['exact']} "
              f"| {lo:.3f}–{hi:.3f} | {s['claims']} | {s['wrong']} | {s['unclaimed']} | {s['acc']:.3f} | {s['bag']} "
              f"| {s['s']} |")
    wrong = sum(s["wrong"] for _, _, _, s in rows)
    if wrong:
        print(f"WRONG CLAIMS: {wrong}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
