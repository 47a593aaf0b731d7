#!/usr/bin/env python3
"""Content recovery against a deployer we did not write (issue 36, item 2).

Runs `geloattack recover` on the victims' rows of four deployers (geloattack's own float32
forward, and bench/torch_deploy.py in fp32, bf16 and fp16), under four attacker BLAS (gonum,
OpenBLAS's own kernel for the CPU, OPENBLAS_CORETYPE=Haswell, OPENBLAS_CORETYPE=SkylakeX) and
three shield settings (10% gaussian shields of scale 1, below full rank; +d shield rows of scale 1
and of scale 10, past full rank), each with the secrets present and with them removed from the
candidates (-absent), one cell at a time under nice, and prints the matrix: victims, claimed (count,
95% Clopper-Pearson interval), wrong claims, "not among the candidates" said of a present secret,
"ranked first, not claimed", and with the secrets absent, claims and "not among".

The decoder is decode_deployer_matrix.py's (deployer_matrix.MODEL_INIT: d 256, random init); the
store is the attn-input rows of its block 1 on the first 2,000 fortunes of scripts/fetch-data.sh's
corpus (at most 64 tokens, BOS rows dropped, float16), as docs/content-recovery.md's "Decoders".
Victims: "my PIN is {x} ok" with a secret among 1000 of the 10^4 PINs, in the base cell (4 texts of
up to 64 rows). The victims are the same in every cell (the secrets depend on the seed, set and
count only), so one deployer run per dtype serves them all.

Standard library only; the deployer runs under --torch-python (a python3 with torch). Cells whose
JSON exists are not rerun, so an interrupted run resumes.

  python3 bench/recover_deployer_matrix.py --gd /tmp/gd --work /tmp/rec36 [--cells REGEX] [--summary]
"""

import argparse
import os
import re
import sys

from deployer_matrix import (BLAS, DEPLOYERS, blas_env, cell_seconds, cp_text, deploy, init_model, run,
                             run_cell, summarize_recover)

SHIELDS = {
    "below": ["-shield-frac", "0.1", "-shield-scale", "1"],
    "full1": ["-shield-rows", "256", "-shield-scale", "1"],
    "full10": ["-shield-rows", "256", "-shield-scale", "10"],
}
SHIELD_WORDS = {
    "below": "10% gaussian 1 (below full rank)",
    "full1": "+256 gaussian 1 (+1x d, past full rank)",
    "full10": "+256 gaussian 10 (past full rank)",
}
DEPLOYER_WORDS = {"geloattack-fp32": "geloattack fp32", "torch-fp32": "PyTorch fp32", "torch-bf16": "PyTorch bf16",
                  "torch-fp16": "PyTorch fp16"}
BLAS_WORDS = {"gonum": "gonum", "openblas": "OpenBLAS default", "haswell": "Haswell", "skylakex": "SkylakeX"}


def make_store(a):
    st = os.path.join(a.work, "store")
    if not os.path.exists(os.path.join(st, "meta.json")):
        run(["nice", a.gd, "store", "extract", "-model", a.model, "-texts", a.corpus, "-corpora", "fortunes",
             "-max-texts", "2000", "-max-tokens", "64", "-layer", "1", "-point", "attn-input", "-drop-special",
             "-out", st])
    return st


def common(a):
    return ["-store", a.store, "-model", a.model, "-positives", "4", "-tokens-per-text", "64", "-suffix", " ok",
            "-candidates", "1000", "-victims", str(a.victims), "-quiet"]


def deploy_all(a):
    tokens = os.path.join(a.work, "victims.jsonl")
    if not os.path.exists(tokens):
        run(["nice", a.gd, "recover"] + common(a) + ["-deployer-texts", tokens])
    for dt in ("fp32", "bf16", "fp16"):
        deploy(a.torch_python, a.model, tokens, os.path.join(a.work, "dep-" + dt), dt, "1")


def cells():
    out = []
    for sh in SHIELDS:
        for dep in DEPLOYERS:
            for blas in BLAS:
                for absent in (False, True):
                    out.append((dep, blas, sh, absent))
    return out


def cell_name(dep, blas, sh, absent):
    return f"{dep}.{blas}.{sh}" + (".absent" if absent else "")


def cell_cmd(a, dep, sh, absent, out):
    cmd = [a.gd, "recover"] + common(a) + SHIELDS[sh] + ["-out", out]
    if dep != "geloattack-fp32":
        cmd += ["-deployer-rows", os.path.join(a.work, "dep-" + dep.split("-")[1])]
    if absent:
        cmd += ["-absent"]
    return cmd


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gd", required=True, help="a geloattack binary (go build -o ... ./cmd/geloattack)")
    p.add_argument("--work", required=True, help="working directory: model, store, deployer rows, cells")
    p.add_argument("--tokenizer", default=os.path.expanduser(
        "~/.cache/geloattack/tokenizers/llama2/tokenizer.json"))
    p.add_argument("--corpus", default=os.path.expanduser("~/.cache/geloattack/corpus"))
    p.add_argument("--torch-python", default="/usr/bin/python3")
    p.add_argument("--victims", type=int, default=100)
    p.add_argument("--gomaxprocs", type=int, default=1,
                   help="GOMAXPROCS of each cell (0: the Go default); the verdicts do not depend on it")
    p.add_argument("--cells", default="", help="run only the cells whose name matches this regex")
    p.add_argument("--summary", action="store_true", help="print the table of the cells run; run none")
    a = p.parse_args()
    os.makedirs(os.path.join(a.work, "cells"), exist_ok=True)
    a.model = init_model(a.gd, a.work, a.tokenizer)
    a.store = make_store(a)
    deploy_all(a)
    got = {}
    for dep, blas, sh, absent in cells():
        name = cell_name(dep, blas, sh, absent)
        if a.cells and not re.search(a.cells, name):
            continue
        out = os.path.join(a.work, "cells", name + ".json")
        if not a.summary:
            run_cell(out, lambda tmp: cell_cmd(a, dep, sh, absent, tmp), blas_env(blas, a.gomaxprocs))
        if os.path.exists(out):
            s = summarize_recover(out)
            s["s"] = cell_seconds(out)
            got[(dep, blas, sh, absent)] = s
    print("| shields | deployer | attacker BLAS | rho | victims | claimed [95% CP] | wrong claims | \"not among\", "
          "secret present | ranked first, not claimed (secret first) | -absent: claims | -absent: \"not among\" | "
          "rank (min-max) | gap max | s (present / absent) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for sh in SHIELDS:
        for dep in DEPLOYERS:
            for blas in BLAS:
                s, x = got.get((dep, blas, sh, False)), got.get((dep, blas, sh, True))
                if s is None and x is None:
                    continue
                f = lambda d, k: "-" if d is None else d[k]
                pres = "-" if s is None else (f"{s['claimed']}/{s['victims']} {cp_text(s['claimed'], s['victims'])}")
                ranked = "-" if s is None else f"{s['ranked']} ({s['ranked_secret_first']})"
                src = s or x
                gap = "-" if src["gap"] is None else f"{src['gap']:.2g}"
                print(f"| {SHIELD_WORDS[sh]} | {DEPLOYER_WORDS[dep]} | {BLAS_WORDS[blas]} | {src['rho']:.2g} | "
                      f"{f(s, 'victims')} | {pres} | {f(s, 'wrong')} | {f(s, 'not_among_present')} | {ranked} | "
                      f"{f(x, 'claimed')} | {f(x, 'not_among')} | {src['rank_min']}-{src['rank_max']} | {gap} | "
                      f"{f(s, 's')} / {f(x, 's')} |")
                for d in (s, x):
                    if d is not None:
                        bad += d["wrong"] + d["not_among_present"]
    # The attacker's BLAS should change no verdict: say where it did, and where only the candidate
    # ranked first did (two candidates within the last bits of each other).
    for sh in SHIELDS:
        for dep in DEPLOYERS:
            for absent in (False, True):
                vs = [(b, got[(dep, b, sh, absent)]["verdicts"]) for b in BLAS if (dep, b, sh, absent) in got]
                for b, v in vs[1:]:
                    ref = vs[0][1]
                    verdicts = sum(1 for x, y in zip(v, ref) if x[0] != y[0])
                    guesses = sum(1 for x, y in zip(v, ref) if x[0] == y[0] and x[1] != y[1])
                    if verdicts or guesses:
                        print(f"{cell_name(dep, b, sh, absent)} against {vs[0][0]}: {verdicts} verdicts differ, "
                              f"{guesses} more victims rank another candidate first", file=sys.stderr)
    if bad:
        print(f"WRONG CLAIMS OR PRESENT SECRETS CALLED 'NOT AMONG': {bad}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
