#!/usr/bin/env bash
# The README's test command: `go test ./...` with go test's usual per-package lines, ending with
# one line that names the groups of tests that skipped (no real store, no real tokenizers, no
# torch, no browser, no GPU, ...) and the script or package that enables each. A bare
# `go test ./...` says ok for a package whose real-data tests all skipped, since package-list
# mode hides a passing package's output; internal/testsummary reads `go test -json` instead.
#
#   scripts/test.sh [go test flags] [./packages]    (default ./...; the exit status is go test's)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# Built rather than `go run`, which turns every non-zero exit status into 1.
go build -o "$bin/testsummary" ./internal/testsummary
status=0
"$bin/testsummary" "$@" || status=$?
exit "$status"
