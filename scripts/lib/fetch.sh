# lib/fetch.sh — helpers shared by the fetch scripts: sourced, not run. The caller sets DL (the
# download directory) and LOG_NAME (the prefix of log lines) before calling them.

log() { printf '%s: %s\n' "${LOG_NAME:-fetch}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# sha512_b64 FILE: the file's SHA-512 in npm's integrity encoding (base64 of the raw digest).
sha512_b64() {
  local hex
  hex=$(sha512sum "$1" | cut -c1-128)
  # shellcheck disable=SC2059
  printf "$(printf '%s' "$hex" | sed 's/../\\x&/g')" | base64 -w0
}

# npm_fetch SPEC TGZ SHA512: a verified npm tarball in $DL (npm pack installs nothing).
npm_fetch() {
  local spec=$1 tgz=$2 want=$3
  if [[ -f "$DL/$tgz" && "$(sha512_b64 "$DL/$tgz")" == "$want" ]]; then return; fi
  command -v npm >/dev/null || die "npm is needed to download $spec"
  log "npm pack $spec"
  (cd "$DL" && npm pack --loglevel=error "$spec" >/dev/null)
  [[ -f "$DL/$tgz" ]] || die "npm pack $spec did not write $DL/$tgz"
  local got
  got=$(sha512_b64 "$DL/$tgz")
  if [[ "$got" != "$want" ]]; then
    rm -f "$DL/$tgz"
    die "$tgz: sha512-$got, want sha512-$want (removed)"
  fi
}
