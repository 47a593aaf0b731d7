"""What the deployer matrices of issue 36 share (bench/decode_deployer_matrix.py,
bench/recover_deployer_matrix.py): the attacker's BLAS settings, the d = 256 random-init decoder
both attack, the PyTorch deployer's run, one resumable cell, and the intervals of a count.

Standard library only: the matrices run under the system python3, the deployer under --torch-python.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The attacker's BLAS: the environment of the attacking command. "openblas" is OpenBLAS's own
# choice for the CPU (SkylakeX on an AVX-512 machine, where it and "skylakex" are one kernel).
BLAS = {
    "gonum": {"GELOATTACK_BLAS": "gonum"},
    "openblas": {},
    "haswell": {"OPENBLAS_CORETYPE": "Haswell"},
    "skylakex": {"OPENBLAS_CORETYPE": "SkylakeX"},
}

# The deployers: geloattack's own float32 forward, and bench/torch_deploy.py in three dtypes.
DEPLOYERS = ["geloattack-fp32", "torch-fp32", "torch-bf16", "torch-fp16"]

# The checkpoint both matrices attack: Llama-2-shaped, 4 blocks, d 256, 2 heads of 128, the real
# Llama-2 tokenizer (32,000 ids), random init with seed 1, bf16 weights.
MODEL_INIT = ["model", "init", "-like", "llama2-7b", "-layers", "4", "-hidden", "256", "-seed", "1"]


def run(cmd, env=None, **kw):
    """Runs cmd, echoing it on stderr; a failure stops the matrix."""
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, env=env, check=True, **kw)


def wilson(k, n, z=1.96):
    """The Wilson score interval of k successes in n trials (95% at z = 1.96)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, c - h), min(1.0, c + h))


def _binom_cdf(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0:
        return 1.0
    if p >= 1:
        return 1.0 if k >= n else 0.0
    lp, lq = math.log(p), math.log1p(-p)
    return min(1.0, sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
                        for i in range(k + 1)))


def clopper_pearson(k, n, alpha=0.05):
    """The exact (Clopper-Pearson) interval of k successes in n trials, by bisection on the
    binomial tails: lo solves P(X >= k | lo) = alpha/2, hi solves P(X <= k | hi) = alpha/2
    (eval.ClopperPearson's definition)."""
    if n == 0:
        return (float("nan"), float("nan"))

    def solve(f):  # f increasing in p on [0, 1]; the p where f crosses 0
        a, b = 0.0, 1.0
        for _ in range(100):
            m = (a + b) / 2
            if f(m) < 0:
                a = m
            else:
                b = m
        return (a + b) / 2

    lo = 0.0 if k == 0 else solve(lambda p: (1 - _binom_cdf(k - 1, n, p)) - alpha / 2)
    hi = 1.0 if k == n else solve(lambda p: alpha / 2 - _binom_cdf(k, n, p))
    return (lo, hi)


def cp_text(k, n):
    """k/n's 95% Clopper-Pearson interval as the docs print it ("[0.963, 1.000]"), rounded outward
    to 3 digits as eval.Proportion's String rounds, so the printed interval covers the computed one."""
    lo, hi = clopper_pearson(k, n)
    return f"[{math.floor(lo * 1000) / 1000:.3f}, {math.ceil(hi * 1000) / 1000:.3f}]"


def init_model(gd, work, tokenizer):
    """work/model: the checkpoint both matrices attack (made once)."""
    model = os.path.join(work, "model")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        run(["nice", gd] + MODEL_INIT + ["-tokenizer", tokenizer, "-out", model])
    return model


def deploy(torch_python, model, tokens, out, dtype, blocks, threads=2):
    """Runs bench/torch_deploy.py on tokens into out (once: a finished run has deployer.json)."""
    if os.path.exists(os.path.join(out, "deployer.json")):
        return
    run(["nice", torch_python, os.path.join(HERE, "torch_deploy.py"), "--model", model, "--tokens", tokens,
         "--out", out, "--dtype", dtype, "--blocks", blocks, "--points", "attn-input", "--threads", str(threads)])


def blas_env(blas, gomaxprocs=0):
    """The environment of an attacking command under the attacker BLAS named blas."""
    env = dict(os.environ)
    for k in ("GELOATTACK_BLAS", "OPENBLAS_CORETYPE", "GOMAXPROCS"):
        env.pop(k, None)
    env.update(BLAS[blas])
    if gomaxprocs:
        env["GOMAXPROCS"] = str(gomaxprocs)
    return env


def run_cell(out, cmd_of, env, inner=None):
    """Runs one cell once: cmd_of(tmp) is the command, writing its result to tmp (out + ".tmp"; a
    directory holding the result file inner, when inner is given), which becomes out. A cell whose
    out exists is not rerun, so an interrupted matrix resumes; out.log holds the command's output,
    out.time its wall seconds."""
    if os.path.exists(out):
        return
    tmp = out + ".tmp"
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)  # a killed cell's: the commands write only into a new or empty directory
    elif os.path.exists(tmp):
        os.remove(tmp)
    t0 = time.time()
    with open(out + ".log", "w") as log:
        run(["nice"] + cmd_of(tmp), env=env, stdout=log, stderr=log)
    if inner:
        os.rename(os.path.join(tmp, inner), out)
        shutil.rmtree(tmp)
    else:
        os.rename(tmp, out)
    with open(out + ".time", "w") as f:
        f.write(f"{time.time() - t0:.1f}\n")


def cell_seconds(out):
    """The wall seconds run_cell recorded for out, or "?"."""
    try:
        return open(out + ".time").read().strip()
    except OSError:
        return "?"


def summarize_recover(path):
    """The verdict counts of one recover result (content.Result's JSON): claims and wrong claims,
    "not among the candidates" (said of a present secret too), "ranked first, not claimed" (with
    the secret first), present secrets ranked first by the attack score, the bound and the
    deployer's gap, the ranks, and each victim's (verdict, guess)."""
    with open(path) as f:
        r = json.load(f)
    vs = r["victims"]
    gap = r.get("deployer_gap") or {}
    s = dict(victims=len(vs), claimed=0, wrong=0, not_among=0, not_among_present=0, ranked=0, ranked_secret_first=0,
             secret_first=0, rho=r["recompute"]["rho"], gap=gap.get("max"), gap_median=gap.get("median"),
             rank_min=r["rank_min"], rank_max=r["rank_max"], full_rank=r["full_rank"])
    attack = r["scores"].index("attack")
    for v in vs:
        first = not v.get("secret_absent") and v["outcomes"][attack]["rank"] == 1
        if first:
            s["secret_first"] += 1
        if v["claimed"]:
            s["claimed"] += 1
            if v.get("secret_absent") or v["guess"] != v["value"]:
                s["wrong"] += 1
        if v["verdict"] == "not among the candidates":
            s["not_among"] += 1
            if not v.get("secret_absent"):
                s["not_among_present"] += 1
        if v["verdict"] == "ranked first, not claimed":
            s["ranked"] += 1
            if first:
                s["ranked_secret_first"] += 1
    s["verdicts"] = [(v["verdict"], v["guess"]) for v in vs]
    return s
