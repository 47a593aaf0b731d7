#!/usr/bin/env bash
# lm-vs-torch.sh — the language model's training step on the CPU, ours beside PyTorch's, on the same
# model and batch, in one command (issue 27's target: ours at least 1.5x PyTorch's tokens/s).
# Model: configs/lm/small.yaml's decoder (32k vocabulary, 6 blocks x 384, 6 heads, MLP 1024, tied
# embedding), 16 windows of 128 tokens per step; a whole step each: forward, backward, clipping,
# AdamW.
#
#   bench/lm-vs-torch.sh          # ROUNDS=3 alternating rounds; THREADS=nproc; STEPS=5 timed steps
#
# Each round runs the Go benchmark (models/causallm BenchmarkTrainStep) and then
# bench/torch_lm.py --bench (the same shapes, threads and step), and prints both tokens/s; quote
# the medians of the rounds. Both load the system OpenBLAS, so OPENBLAS_CORETYPE (when set) pins the
# same GEMM kernel for both. Needs Go and /usr/bin/python3 with torch; run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-$(nproc)}"
STEPS="${STEPS:-5}"
go test -c -o /tmp/causallm.bench.$$ ./models/causallm
trap 'rm -f /tmp/causallm.bench.$$' EXIT
for r in $(seq 1 "$ROUNDS"); do
  go_tps=$(GOMAXPROCS="$THREADS" /tmp/causallm.bench.$$ -test.run '^$' -test.bench TrainStep -test.benchtime "${STEPS}x" 2>/dev/null |
    awk '/tokens\/s/ { for (i = 1; i < NF; i++) if ($(i+1) == "tokens/s") print $i }')
  torch_tps=$(/usr/bin/python3 bench/torch_lm.py --bench --steps "$STEPS" --warmup 1 --threads "$THREADS" |
    sed -n 's/.*"tokens_per_s": *\([0-9.]*\).*/\1/p')
  echo "round $r: geloattack ${go_tps} tokens/s, torch ${torch_tps} tokens/s (threads ${THREADS}, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset})"
done
