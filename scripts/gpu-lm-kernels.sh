#!/usr/bin/env bash
# gpu-lm-kernels.sh [BINDIR]: on the GPU machine, from the repository root (no Go needed), with
# BINDIR (default .gpu/lm) holding engine_cuda.test from scripts/gpu-lm-build.sh. It
#   1. compiles every kernels/*.cu to PTX with scripts/build-ptx.sh into a scratch folder (nvcc from
#      $NVCC, PATH, /usr/local/cuda*/bin or a pip nvidia-cuda-nvcc wheel);
#   2. assembles what a commit of lm.ptx would embed: the committed engine/cuda/ptx/*.ptx plus the
#      fresh lm.ptx (steps 1 and 2: scripts/lib/fresh-ptx.sh, which the GPU bundle runs too);
#   3. runs scripts/gpu-lm-torch-check.py on the fresh lm.ptx when PyTorch with CUDA is there (each
#      kernel against float64 PyTorch, no Go involved);
#   4. runs the engine/cuda test binary with GELOATTACK_CUDA_PTX pointing there: every op's
#      crosscheck at fp32, tf32 and bf16 (the LM ops among them), the determinism runs, the
#      fused-kernel tables and TestBackendLMKernelsCUDA, -test.v;
#   5. copies lm.ptx, every fresh .ptx (fresh-ptx/, to compare with the committed ones) and
#      gpu-lm.log to $OUT (default ./gpu-lm-out).
# GELOATTACK_LM_TEST_TIMEOUT: seconds for the tests (default 420).
# Exit status 0 only when the PTX built, the oracle (where it ran) and every selected test passed,
# none of the crosschecks skipped and the LM cases ran (not skipped for want of the kernels).
set -uo pipefail
root=$(pwd)
bindir=${1:-.gpu/lm}
out=${OUT:-$root/gpu-lm-out}
mkdir -p "$out"
log=$out/gpu-lm.log
: >"$log"
say() { echo "gpu-lm: $*" | tee -a "$log"; }

testbin=$bindir/engine_cuda.test
[ -f "$testbin.gz" ] && gzip -dkf "$testbin.gz"
if [ ! -f "$testbin" ]; then
	say "no $testbin: build it here with scripts/gpu-lm-build.sh and carry $bindir"
	exit 2
fi
chmod +x "$testbin"
testbin=$(cd "$(dirname "$testbin")" && pwd)/$(basename "$testbin")
[ -f "$bindir/MANIFEST" ] && sed 's/^/gpu-lm: binary /' "$bindir/MANIFEST" | tee -a "$log"

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu-lm: gpu /' | tee -a "$log"

# Steps 1 and 2 (scripts/lib/fresh-ptx.sh, shared with the GPU bundle's run.sh).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash scripts/lib/fresh-ptx.sh engine/cuda/kernels engine/cuda/ptx "$work" 2>>"$log" | sed 's/^/gpu-lm: /' | tee -a "$log"
case ${PIPESTATUS[0]} in
0) ;;
2)
	say "set NVCC to the compiler's path"
	exit 2
	;;
*)
	say "compiling the PTX failed (log above)"
	tail -n 40 "$log"
	exit 1
	;;
esac
fresh=$work/fresh
ship=$work/ship
mkdir -p "$out/fresh-ptx"
cp "$fresh"/*.ptx "$out/fresh-ptx/"
cp "$fresh/lm.ptx" "$out/lm.ptx"

# An oracle without Go: each lm.cu kernel launched on PyTorch tensors against float64 PyTorch.
oracle=0
if "${PYTHON:-python3}" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	"${PYTHON:-python3}" scripts/gpu-lm-torch-check.py "$fresh/lm.ptx" 2>&1 | tee -a "$log" | sed 's/^/gpu-lm: torch: /'
	oracle=${PIPESTATUS[0]}
	say "torch oracle: exit $oracle"
else
	say "torch oracle skipped: no PyTorch with CUDA (${PYTHON:-python3})"
fi

# The test binary reads kernels/*.cu, testdata/ and ../op_*.go: run it from engine/cuda.
sel='^(TestBackendCrossCheck(FP32|TF32|BF16)|TestBackendDeterminism|TestBackendLMKernelsCUDA|TestFusedKernelTable|TestOptionalKernels|TestKernelSources)$'
say "running: GELOATTACK_CUDA_PTX=<committed + fresh lm.ptx> engine_cuda.test -test.run '$sel' -test.v"
start=$(date +%s)
(cd engine/cuda && GELOATTACK_CUDA_PTX=$ship timeout "${GELOATTACK_LM_TEST_TIMEOUT:-420}" "$testbin" -test.run "$sel" -test.v -test.timeout="$((${GELOATTACK_LM_TEST_TIMEOUT:-420} - 5))s") >>"$log" 2>&1
rc=$?
say "tests: exit $rc after $(($(date +%s) - start)) s"

status=0
[ $rc -eq 0 ] || status=1
[ "$oracle" -eq 0 ] || status=1
for t in TestBackendCrossCheckFP32 TestBackendCrossCheckTF32 TestBackendCrossCheckBF16 TestBackendDeterminism TestBackendLMKernelsCUDA; do
	if ! grep -q -- "^--- PASS: $t " "$log"; then
		say "FAIL: $t did not pass ($(grep -- "^--- [A-Z]*: $t " "$log" | head -n 1))"
		status=1
	fi
done
if grep -q 'skipped: the device backend has no' "$log"; then
	say "FAIL: LM crosscheck cases skipped: the kernels were not registered"
	status=1
fi
grep -E '^\s*--- FAIL' "$log" | head -n 30 | sed 's/^/gpu-lm: /'
grep -E 'largest error' "$log" | grep -E 'RoPE|CausalAttention|Embedding|CrossEntropy|LMTape|SpanAttention' | sed 's/^ */gpu-lm: /' | tee -a "$out/summary.txt"
say "result: $([ $status -eq 0 ] && echo PASS || echo FAIL); $out holds lm.ptx, fresh-ptx/ and gpu-lm.log"
exit $status
