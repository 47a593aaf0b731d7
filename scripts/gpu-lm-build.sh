#!/usr/bin/env bash
# gpu-lm-build.sh [OUTDIR]: builds, here (with Go), what scripts/gpu-lm-kernels.sh runs on the GPU
# machine: engine/cuda's test binary for linux/amd64, CGO_ENABLED=0, -trimpath (as
# scripts/gpu-bundle.sh builds it), into OUTDIR (default .gpu/lm, ignored by git). Carry that folder
# with the device run:
#   run(carry [".gpu/lm"], command "bash scripts/gpu-lm-kernels.sh .gpu/lm")
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu/lm}
mkdir -p "$out"
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go test -c -trimpath -ldflags='-s -w' -o "$out/engine_cuda.test" ./engine/cuda
{
	echo "built: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- engine scripts || echo ' (with uncommitted changes)')"
	echo "go: $(go version)"
} >"$out/MANIFEST"
echo "gpu-lm-build: $out/engine_cuda.test ($(du -h "$out/engine_cuda.test" | cut -f1)); carry $out, run scripts/gpu-lm-kernels.sh $out on the GPU machine"
