#!/usr/bin/env bash
# lib/fresh-ptx.sh KERNELS COMMITTED OUT: on a machine with nvcc, compiles every KERNELS/*.cu to PTX
# (scripts/build-ptx.sh) and lays out what engine/cuda would embed once the rebuilt lm.ptx is
# committed, for GELOATTACK_CUDA_PTX. Shared by scripts/gpu-lm-kernels.sh and the GPU bundle's run.sh
# (scripts/gpu-bundle.sh ships this file and build-ptx.sh in the bundle's scripts/).
#   KERNELS    the .cu sources (engine/cuda/kernels)
#   COMMITTED  the committed PTX (engine/cuda/ptx)
#   OUT        a folder it creates: OUT/fresh/*.ptx, every module rebuilt; OUT/ship/*.ptx, the
#              committed modules with the fresh lm.ptx in place of lm.ptx, plus every fresh module
#              that has no committed one yet (mix.ptx): what a commit of those would embed (the
#              other modules stay as they were checked)
# nvcc: $NVCC, else PATH, /usr/local/cuda*/bin, /opt/conda/bin, or a pip nvidia-cuda-nvcc wheel of
# ${PYTHON:-python3}. Prints one line per step on stdout ("nvcc: PATH", "fresh NAME.ptx: N kernels,
# same as the committed one | differs from the committed one | new"), nvcc's own output on stderr.
# Exit status: 0 built, 2 no nvcc found, 1 the compile failed.
set -uo pipefail
if [ $# -ne 3 ]; then
	echo "usage: fresh-ptx.sh KERNELS COMMITTED OUT" >&2
	exit 1
fi
kernels=$1 committed=$2 out=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
	nvcc=$(command -v nvcc 2>/dev/null || true)
fi
if [ -z "$nvcc" ]; then
	for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc /opt/conda/bin/nvcc \
		$("${PYTHON:-python3}" -c 'import site; print(" ".join(p + "/nvidia/cuda_nvcc/bin/nvcc" for p in site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
		if [ -x "$c" ]; then
			nvcc=$c
			break
		fi
	done
fi
if [ -z "$nvcc" ]; then
	echo "no nvcc found (NVCC, PATH, /usr/local/cuda*/bin, /opt/conda/bin, pip nvidia-cuda-nvcc)"
	exit 2
fi
echo "nvcc: $nvcc"

mkdir -p "$out/fresh" "$out/ship" || exit 1
if ! NVCC=$nvcc PTX_SRC=$kernels PTX_OUT=$out/fresh bash "$here/../build-ptx.sh" >&2; then
	echo "build-ptx.sh failed (nvcc's output above)"
	exit 1
fi
if [ ! -f "$out/fresh/lm.ptx" ]; then
	echo "build-ptx.sh wrote no lm.ptx"
	exit 1
fi
cp "$committed"/*.ptx "$out/ship/" && cp "$out/fresh/lm.ptx" "$out/ship/" || exit 1
for f in "$out/fresh"/*.ptx; do
	if [ ! -f "$committed/$(basename "$f")" ]; then
		cp "$f" "$out/ship/" || exit 1
	fi
done
for f in "$out/fresh"/*.ptx; do
	b=$(basename "$f")
	n=$(grep -c '\.entry' "$f")
	if [ ! -f "$committed/$b" ]; then
		echo "fresh $b: $n kernels, new"
	elif cmp -s "$f" "$committed/$b"; then
		echo "fresh $b: $n kernels, same as the committed one"
	else
		echo "fresh $b: $n kernels, differs from the committed one"
	fi
done
exit 0
