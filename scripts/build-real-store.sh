#!/usr/bin/env bash
# build-real-store.sh — the real store: 20,000 texts (fortunes, WordNet glosses, State of the
# Union chunks) through all-MiniLM-L6-v2, layer $LAYER (default 3), about 660k tokens:
# $CACHE/stores/real-minilm-l3 unless OUT is set (~0.5 GB as float16). N overrides the count.
# See build-store.sh for the environment variables.
exec "$(dirname "${BASH_SOURCE[0]}")/build-store.sh" real "${N:-20000}" "$@"
