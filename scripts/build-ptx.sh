#!/usr/bin/env bash
# Compiles engine/cuda/kernels/*.cu to PTX for Hopper (sm_90) into
# engine/cuda/ptx/*.ptx. Run on a machine with nvcc (CUDA 12.x or 13.x);
# then commit the .ptx files: engine/cuda embeds them by default (the nocudaptx
# tag leaves them out; see engine/cuda/README.md).
#
# Environment: NVCC (default nvcc), ARCH (default sm_90), NVCCFLAGS (extra flags), PTX_OUT (the
# folder to write, default engine/cuda/ptx), PTX_SRC (the .cu folder, default engine/cuda/kernels):
# scripts/lib/fresh-ptx.sh builds into a scratch folder, in the GPU bundle from its copy of kernels/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${PTX_SRC:-$root/engine/cuda/kernels}"
out="${PTX_OUT:-$root/engine/cuda/ptx}"
nvcc="${NVCC:-nvcc}"
arch="${ARCH:-sm_90}"

if ! command -v "$nvcc" >/dev/null 2>&1; then
	echo "build-ptx: $nvcc not found; run this on a machine with the CUDA toolkit" >&2
	exit 1
fi

mkdir -p "$out"
"$nvcc" --version | tail -n 1
shopt -s nullglob
files=("$src"/*.cu)
if [ ${#files[@]} -eq 0 ]; then
	echo "build-ptx: no .cu files in $src" >&2
	exit 1
fi
for f in "${files[@]}"; do
	name="$(basename "$f" .cu)"
	# -lineinfo keeps source lines for profilers; no -use_fast_math: the
	# kernels call __expf where they mean to and must match the CPU at 1e-4.
	"$nvcc" -ptx -arch="$arch" -O3 -lineinfo -std=c++17 -I "$src" \
		${NVCCFLAGS:-} -o "$out/$name.ptx" "$f"
	echo "build-ptx: $out/$name.ptx ($(grep -c '\.entry' "$out/$name.ptx") kernels)"
done
