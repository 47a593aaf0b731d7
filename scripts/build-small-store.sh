#!/usr/bin/env bash
# build-small-store.sh — a ~500-text real store (all-MiniLM-L6-v2, layer $LAYER, default 3) for
# tests and CI: $CACHE/stores/small-minilm-l3 unless OUT is set. See build-store.sh for the
# environment variables. Takes well under a minute on 2 cores once the cache is filled.
exec "$(dirname "${BASH_SOURCE[0]}")/build-store.sh" small "${N:-500}" "$@"
