#!/usr/bin/env bash
# extract-vs-torch.sh — decoder extraction speed on the CPU, ours beside PyTorch's, on one checkpoint
# and machine, in one command (issue 26). Default checkpoint: the Llama-2-7B shape cut to 2 layers
# (d 4096, 32 heads, intermediate 11008; vocabulary cut to 1024 since extraction computes no
# logits), written by `geloattack model init` into a temporary directory unless DIR is given.
#
#   bench/extract-vs-torch.sh [DIR]        # ROUNDS=3 alternating rounds; THREADS=nproc
#
# Each round runs the Go benchmark (models/causallm BenchmarkDecoderExtractLlama2Shape: 16 texts of 128
# tokens per batch, the host forward with taps, as store extract runs it) and then
# bench/torch_llama.py --bench (the same 2048 tokens, sequences of 128, batch 16, no grad), and
# prints both tokens/s; quote the medians. Needs Go, /usr/bin/python3 with torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-$(nproc)}"
dir="${1:-}"
if [[ -z "$dir" ]]; then
  dir="$(mktemp -d)/llama2-2l"
  go run ./cmd/geloattack model init -like llama2-7b -layers 2 -vocab 1024 -dtype f32 -seed 1 -out "$dir"
fi
for r in $(seq 1 "$ROUNDS"); do
  go_tps=$(GELOATTACK_BENCH_MODEL="$dir" GOMAXPROCS="$THREADS" go test ./models/causallm -run '^$' -bench DecoderExtractLlama2Shape -benchtime 3x 2>/dev/null |
    awk '/tokens\/s/ { for (i = 1; i < NF; i++) if ($(i+1) == "tokens/s") print $i }')
  torch_tps=$(/usr/bin/python3 bench/torch_llama.py --bench --model "$dir" --tokens 2048 --seq 128 --batch 16 --threads "$THREADS" |
    sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')
  echo "round $r: geloattack ${go_tps} tokens/s, torch ${torch_tps} tokens/s (threads ${THREADS}, $dir)"
done
