#!/usr/bin/env python3
"""Probe: can the order of a prompt be read back when GELO drops rows of U (obs_rows < 1)?

docs/prompt-decoding.md, "What is left". With a fraction of U's rows dropped, V = rowspace(U_obs)
misses dim W - dim V directions of W = rowspace([X; S]); call their span Q (W's part outside V).
Every true row x of block l lies in V + Q exactly, a wrong extension does not, so testing
candidates against V + Q would give the order back. The attacker does not have Q. This script
measures, along the true texts of decoded batches, how well the true next token is ranked first
by its residual against:
  - V alone (what `geloattack decode -rank` does with rows dropped);
  - V + Q_hat, Q_hat the top principal directions of attacker-side candidates' residuals against V
    (the extensions of [BOS] and of [BOS, b] by every bag token b: no truth needed), at the
    dimension of the spectrum's largest gap, and at the true missing dimension (an attacker knowing
    obs_rows could estimate it from n_obs);
  - V + Q, the true Q (an oracle, from the truth: the upper bound of this family of attacks).

It rebuilds U itself from the true texts, in float64 (a best case for the attacker: no rounding):
block-l rows of the texts (bench/torch_llama.py, the PyTorch reference forward), gaussian shields
(a tenth of the rows, scale 1 in the rows' RMS), a Haar-orthogonal A, then keeps a random 80% of
U's rows. The texts and bags come from `geloattack decode ... -bag-only -rank -obs-rows 0.8 -out
DIR`, DIR/results.json (batches' "truth" and "bag"; the ranking bag reads every true token there).

Usage: /usr/bin/python3 bench/decode_missing_subspace.py MODEL_DIR BATCHES.json [--block 1]
       [--seed 1] [--obs-rows 0.8]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_llama import Model  # noqa: E402


def orth_rows(m, tol=1e-9):
    """Orthonormal basis (d, r) of the span of m's rows, at relative singular-value tolerance tol."""
    _, s, vt = np.linalg.svd(m, full_matrices=False)
    return vt[s > tol * s[0]].T


def residual(c, basis):
    """Energy fraction of each row of c (t, d) outside span(basis) (d, r), and the residuals (t, d)."""
    r = c - (c @ basis) @ basis.T
    return (r ** 2).sum(1) / (c ** 2).sum(1), r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("batches")
    ap.add_argument("--block", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--obs-rows", type=float, default=0.8)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = Model.load(args.model, dtype=torch.float64)
    rng = np.random.default_rng(args.seed)
    layer = args.block

    def last_rows(prefixes):
        """Block-l input row at the last position of each prefix (all of one length): (t, d)."""
        with torch.no_grad():
            out = model.forward(torch.tensor(prefixes, dtype=torch.long))
        return out["attn_input"][layer][:, -1, :].numpy()

    for bi, b in enumerate(json.load(open(args.batches))):
        truth, bag = b["truth"], b["bag"]
        with torch.no_grad():
            x = np.concatenate([model.forward(torch.tensor([t]))["attn_input"][layer][0].numpy() for t in truth])
        n, d = x.shape
        shields = rng.standard_normal((max(1, round(0.1 * n)), d)) * np.sqrt((x ** 2).mean())
        z = np.concatenate([x, shields])
        a = np.linalg.qr(rng.standard_normal((len(z), len(z))))[0]
        u = a @ z
        kept = rng.permutation(len(u))[: int(round(args.obs_rows * len(u)))]
        v = orth_rows(u[kept])
        w = orth_rows(z)
        missing = w.shape[1] - v.shape[1]
        bos = truth[0][0]
        sample = [last_rows([[bos, t] for t in bag])]
        sample += [last_rows([[bos, b1, t] for t in bag]) for b1 in bag if b1 != bos]
        _, res = residual(np.concatenate(sample), v)
        _, s, vt = np.linalg.svd(res, full_matrices=False)
        lg = np.log(s[:60])
        gap = int(np.argmax(lg[:-1] - lg[1:])) + 1
        q_true = orth_rows((w - v @ (v.T @ w)).T)
        print(f"batch {bi}: block {layer}, n {n} + {len(shields)} shields, dim W {w.shape[1]}, dim V {v.shape[1]} "
              f"(missing {missing}); {len(res)} sampled residuals, largest gap of their spectrum after {gap}: "
              f"{np.round(s[:12] / s[0], 3).tolist()}")
        tests = [("V", v),
                 (f"V + Q_hat ({gap}, gap)", orth_rows(np.concatenate([v, vt[:gap].T], 1).T)),
                 (f"V + Q_hat ({missing}, true dim)", orth_rows(np.concatenate([v, vt[:missing].T], 1).T)),
                 ("V + Q (oracle)", orth_rows(np.concatenate([v, q_true], 1).T))]
        for label, basis in tests:
            first, ranks = 0, []
            for t in truth:
                for p in range(1, len(t)):
                    prefix = t[:p]
                    cands = sorted(set(bag) | {t[p]})
                    frac, _ = residual(last_rows([prefix + [c] for c in cands]), basis)
                    score = np.log10(np.maximum(frac, 1e-300))
                    right = {o[p] for o in truth if len(o) > p and o[:p] == prefix}
                    mine = score[cands.index(t[p])]
                    rank = 1 + sum(1 for i, c in enumerate(cands) if c not in right and score[i] < mine)
                    ranks.append(rank)
                    first += rank == 1
            print(f"  {label:28s} true next token first at {first / len(ranks):.2f} of {len(ranks)} steps, "
                  f"median rank {np.median(ranks):.1f} of ~{len(bag)}")


if __name__ == "__main__":
    main()
