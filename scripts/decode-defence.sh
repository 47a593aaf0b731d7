#!/usr/bin/env bash
# decode-defence.sh — the defence table of docs/prompt-decoding.md: `geloattack decode` on one
# decoder directory across the deployer's settings, one axis at a time around a base cell, one
# Markdown row per cell (the totals line of each run).
#
#   scripts/decode-defence.sh MODEL_DIR [BATCHES] > table.md
#   AXES="texts full" scripts/decode-defence.sh ...   # only those axes (base dtype shield mix obs_rows texts full rank)
#   SPLIT=val MAXTEXTS=2000 scripts/decode-defence.sh ...   # the split (default train) and the source
#                                                          # texts (the first N; default 200, 400 for the texts axis)
#   EXTRA="-joint" scripts/decode-defence.sh ...          # flags added to every cell
#   BLOCKS=0,1 scripts/decode-defence.sh ...              # the attacked blocks (default 0,1,2; a 2-block
#                                                          # checkpoint at d = 4096 has only 0,1)
# Texts are split by their source ids (data.SplitOf, val_frac 0.1), as the stores and the language
# model of configs/lm split them: with SPLIT=val a trained decoder's batches hold texts it never saw.
#
# Base cell: 4 texts per batch cut to 16 tokens, 10% gaussian shields at scale 1, orthogonal A, every
# row observed, fp32; the attacker sees blocks 0, 1 and 2 (BLOCKS). D is read from MODEL_DIR/config.json.
set -euo pipefail
model=$1
batches=${2:-2}
bin=${GELOATTACK:-geloattack}
if ! command -v "$bin" >/dev/null; then
  echo "decode-defence.sh: $bin not found: put geloattack on PATH (go install ./cmd/geloattack) or set GELOATTACK=/path/to/geloattack" >&2
  exit 1
fi
d=$(sed -n 's/.*"hidden_size": *\([0-9]*\).*/\1/p' "$model/config.json" | head -1)
split=${SPLIT:-train}
maxtexts=${MAXTEXTS:-200}
base=(-model "$model" -blocks "${BLOCKS:-0,1,2}" -batches "$batches" -max-tokens 16 -positives 4 -shield-frac 0.1 -shield-scale 1 -split "$split" -max-texts "$maxtexts")
# shellcheck disable=SC2206
base+=(${EXTRA:-})
axes=" ${AXES:-base dtype shield mix obs_rows texts full} "
echo "| axis | setting | result (texts exact, token accuracy, claims) | s |"
echo "|---|---|---|---|"
cell() {
  local axis=$1 label=$2; shift 2
  local t0 line err key=${axis// /_}
  [[ "$axes" == *" $key "* || "$axes" == *" ${key%%_*} "* ]] || return 0
  t0=$(date +%s.%N)
  err=$(mktemp)
  line=$("$bin" decode "${base[@]}" "$@" 2>"$err" | sed -n 's/^total: //p') || true
  if [[ -z "$line" ]]; then
    # Say why in the table, and the whole message on stderr.
    line="failed: $(grep -v '^decode: ' "$err" | tail -1)"
    echo "decode-defence.sh: $axis $label failed:" >&2
    cat "$err" >&2
  fi
  rm -f "$err"
  printf '| %s | %s | %s | %.0f |\n' "$axis" "$label" "$line" "$(echo "$(date +%s.%N) - $t0" | bc)"
}
cell base "fp32, 10% gaussian 1"
for dt in bf16 fp16; do cell dtype "$dt" -observe-dtype "$dt"; done
for kind in gaussian manifold student_t; do
  for sc in 1 10; do cell shield "$kind $sc (10%)" -shield-kind "$kind" -shield-scale "$sc"; done
done
cell shield "none" -shield-frac 0
cell shield "bf16, gaussian 10 (5%)" -observe-dtype bf16 -shield-frac 0.05 -shield-scale 10
cell mix "kappa 100" -kappa 100
for f in 0.96 0.8; do cell obs_rows "$f" -obs-rows "$f"; done
for p in 8 16 24; do cell texts "$p texts x 16" -positives "$p" -max-texts "$((maxtexts > 400 ? maxtexts : 400))"; done
for mult in 1 2 4; do
  for sc in 1 3 10; do cell "full rank" "+$((mult * d)) gaussian $sc" -shield-rows $((mult * d)) -shield-scale "$sc"; done
done
cell "full rank" "+$d gaussian 1, bf16" -shield-rows "$d" -observe-dtype bf16
cell "full rank" "+$d gaussian 1, kappa 100" -shield-rows "$d" -kappa 100
cell "full rank" "+$d gaussian 1, obs_rows 0.96" -shield-rows "$d" -obs-rows 0.96
cell rank "obs_rows 0.8, ranking" -obs-rows 0.8 -rank
cell rank "bf16, ranking" -observe-dtype bf16 -rank
cell rank "+$d gaussian 1, ranking" -shield-rows "$d" -rank
