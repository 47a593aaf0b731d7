#!/usr/bin/env python3
"""The presence attack against a deployer we did not write (issue 36, item 1).

Runs `geloattack baseline -attack rowspace` on examples whose rows four deployers computed
(geloattack's own float32 forward, i.e. the store's rows, and bench/torch_deploy.py in fp32, bf16
and fp16) under three shield settings (10% gaussian shields of scale 1, below full rank; +d shield
rows of scale 1 and of scale 10, past full rank), one cell at a time under nice, and prints its
claims, proofs of absence: decoys proven absent (right claims) and positives proven absent (wrong
claims), each with its 95% Clopper-Pearson interval, beside the ranking's top-1.

Model and store are recover_deployer_matrix.py's (run it first, or give the same --work): the
d 256 random-init decoder and the attn-input rows of its block 1 on 2,000 fortunes. Examples: 4
texts of up to 64 rows from the val split, candidate sets of 4 examples' positives (16 texts).
The candidates are the store's rows in every cell: only the mixed rows change with the deployer.

  python3 bench/presence_deployer_matrix.py --gd /tmp/gd --work /tmp/rec36 [--summary]
"""

import argparse
import json
import os
import sys

from deployer_matrix import DEPLOYERS, blas_env, cell_seconds, cp_text, deploy, run, run_cell

# What mixes in each cell: the store's own rows (the candidates themselves, rho 0) or a PyTorch run's.
MIXED = {"geloattack-fp32": "store's rows", "torch-fp32": "PyTorch fp32", "torch-bf16": "PyTorch bf16",
         "torch-fp16": "PyTorch fp16"}
SHIELDS = {
    "below": ["-shield-frac", "0.1", "-shield-scale", "1"],
    "full1": ["-shield-rows", "256", "-shield-scale", "1"],
    "full10": ["-shield-rows", "256", "-shield-scale", "10"],
}


def common(a):
    return ["baseline", "-attack", "rowspace", "-store", os.path.join(a.work, "store"), "-model",
            os.path.join(a.work, "model"), "-positives", "4", "-tokens-per-text", "64", "-examples", str(a.examples),
            "-batch", "4"]



def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gd", required=True, help="a geloattack binary (go build -o ... ./cmd/geloattack)")
    p.add_argument("--work", required=True, help="recover_deployer_matrix.py's working directory")
    p.add_argument("--torch-python", default="/usr/bin/python3")
    p.add_argument("--examples", type=int, default=100)
    p.add_argument("--summary", action="store_true", help="print the table of the cells run; run none")
    a = p.parse_args()
    if not os.path.exists(os.path.join(a.work, "store", "meta.json")):
        sys.exit(f"{a.work}: no store: run bench/recover_deployer_matrix.py with this --work first")
    cells = os.path.join(a.work, "presence")
    os.makedirs(cells, exist_ok=True)
    tokens = os.path.join(cells, "texts.jsonl")
    if not os.path.exists(tokens):
        run(["nice", a.gd] + common(a) + SHIELDS["below"] + ["-deployer-texts", tokens])
    for dt in ("fp32", "bf16", "fp16"):
        deploy(a.torch_python, os.path.join(a.work, "model"), tokens, os.path.join(cells, "dep-" + dt), dt, "1")
    print("| shields | mixed rows | rho | top-1 (ranking) | decoys proven absent [95% CP] | positives proven absent "
          "(wrong claims) [95% CP] | s |")
    print("|---|---|---|---|---|---|---|")
    wrong = 0
    for sh in SHIELDS:
        for dep in DEPLOYERS:
            out = os.path.join(cells, f"{dep}.{sh}.json")
            if not a.summary:
                extra = [] if dep == "geloattack-fp32" else ["-deployer-rows", os.path.join(cells, "dep-" + dep.split("-")[1])]
                run_cell(out, lambda tmp: [a.gd] + common(a) + SHIELDS[sh] + extra + ["-out", tmp], blas_env("openblas", 1))
            if not os.path.exists(out):
                continue
            r = json.load(open(out))
            x = r["absence"]
            wrong += x["positives_proven_absent"]
            print(f"| {sh} | {MIXED[dep]} | {r['recompute']['rho']:.2g} | {r['top1']['mean']:.3f} | "
                  f"{x['decoys_proven_absent']}/{x['decoys']} {cp_text(x['decoys_proven_absent'], x['decoys'])} | "
                  f"{x['positives_proven_absent']}/{x['positives']} {cp_text(x['positives_proven_absent'], x['positives'])} | "
                  f"{cell_seconds(out)} |")
    if wrong:
        print(f"WRONG CLAIMS: {wrong}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
