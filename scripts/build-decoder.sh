#!/usr/bin/env bash
# build-decoder.sh — the decoder geloattack trains itself (issue 27), into the cache:
#   1. fetches the corpora and the Llama-2-style tokenizer (fetch-data.sh corpus, fetch-tokenizers.sh);
#   2. trains configs/lm/small.yaml (6 blocks x 384, 32k vocabulary, sequences of 128; about an
#      hour on 2 cores) in $CACHE/train/lm-small, resuming an interrupted run;
#   3. exports it as a Hugging Face directory $CACHE/models/lm-small (config.json, model.safetensors
#      in float32, tokenizer files, geloattack-run.json);
#   4. checks that directory against bench/torch_llama.py, the independent PyTorch forward, when
#      /usr/bin/python3 has torch (every layer's rows and the logits, relative difference <= 1e-5);
#   5. extracts two decoder stores of the first $N texts (default 20000, the real MiniLM store's) at
#      block $LAYER (default 3): $CACHE/stores/lm-small-attn-input-l$LAYER (the rows q/k/v read) and
#      $CACHE/stores/lm-small-residual-l$LAYER, float16, -dedup exact (the BOS rows are identical).
# The store's val split (sampler.val_frac 0.1, by text id) is the language model's val split, so
# the attacks' val texts were never trained on.
# Environment: GELOATTACK_CACHE (cache root), GELOATTACK_BIN (use this binary), N, LAYER,
# FORCE=1 (re-export and re-extract; the training run is kept).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="${GELOATTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/geloattack}"
N="${N:-20000}"
LAYER="${LAYER:-3}"
RUN="$CACHE/train/lm-small"
MODEL="$CACHE/models/lm-small"

"$ROOT/scripts/fetch-data.sh" corpus
"$ROOT/scripts/fetch-tokenizers.sh"

bin="${GELOATTACK_BIN:-}"
if [[ -z "$bin" ]]; then
  bin="$CACHE/bin/geloattack"
  mkdir -p "$(dirname "$bin")"
  (cd "$ROOT" && go build -o "$bin" ./cmd/geloattack)
fi

# The shipped config names the default cache; for another cache, a copy pointing at it.
mkdir -p "$CACHE/train"
cfg="$ROOT/configs/lm/small.yaml"
if [[ "$CACHE" != "$HOME/.cache/geloattack" ]]; then
  cfg="$CACHE/train/lm-small.yaml"
  sed "s|~/.cache/geloattack|$CACHE|g" "$ROOT/configs/lm/small.yaml" > "$cfg"
fi

if [[ -f "$RUN/report.json" ]]; then
  echo "build-decoder: $RUN is trained" >&2
elif ls "$RUN"/ckpt-*.safetensors >/dev/null 2>&1; then
  "$bin" train -config "$cfg" -out "$RUN" -resume
else
  "$bin" train -config "$cfg" -out "$RUN"
fi

if [[ "${FORCE:-0}" == 1 ]]; then
  rm -rf "$MODEL"
fi
if [[ ! -f "$MODEL/config.json" ]]; then
  "$bin" model export -run "$RUN" -out "$MODEL" -dtype f32
fi

if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  (cd "$ROOT" && GELOATTACK_CROSSCHECK_MODEL="$MODEL" go test -count=1 -v -run '^TestTorchCrossCheckModelDir$' ./models/causallm) |
    grep -E 'worst relative|^(--- |ok|FAIL)' >&2
else
  echo "build-decoder: /usr/bin/python3 has no torch; PyTorch cross-check skipped" >&2
fi

for point in attn-input residual; do
  out="$CACHE/stores/lm-small-$point-l$LAYER"
  if [[ -f "$out/meta.json" && "${FORCE:-0}" != 1 ]]; then
    echo "build-decoder: $out exists (FORCE=1 rebuilds it)" >&2
    continue
  fi
  rm -rf "$out"
  "$bin" store extract -model "$MODEL" -model-name "geloattack lm-small ($(basename "$RUN"), configs/lm/small.yaml)" \
    -texts "$CACHE/corpus" -point "$point" -layer "$LAYER" -max-texts "$N" -dedup exact -out "$out"
  echo "build-decoder: $out" >&2
done
