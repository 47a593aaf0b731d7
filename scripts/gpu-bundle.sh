#!/usr/bin/env bash
# gpu-bundle.sh [OUTDIR]: builds everything a GPU machine without Go needs to check the whole GPU
# path in one command (docs/gpu.md): the geloattack binary and the test binaries of every package
# with GPU tests, for linux/amd64 with CGO_ENABLED=0, stripped and gzipped, the files those tests
# read (the CUDA kernels' sources among them), the configs and the PyTorch twin, the CPU figures
# committed in README.md, scripts/build-ptx.sh and scripts/lib/fresh-ptx.sh (run.sh compiles the
# kernels there with nvcc and tests the fresh PTX), and run.sh (from scripts/gpu-bundle-run.sh). Default OUTDIR: gpu-bundle/ at the repository root (ignored by git).
# Copy the folder to the GPU machine as it is and run OUTDIR/run.sh [REPORT_DIR] there.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-$root/gpu-bundle}
case $out in /*) ;; *) out=$root/$out ;; esac

# Every package with GPU tests, as "package:regexp". The regexp selects the package's GPU tests
# for run.sh's crosscheck part on a GPU (go test -run syntax); without a GPU run.sh runs the whole
# binary in -test.short mode instead, where the GPU tests skip. The convention: a GPU test's name
# holds CUDA, and on a GPU it runs (a test that skips there fails the check). The language model's package (models/causallm) is here; add others when they have GPU
# tests; engine/cuda must stay first (run.sh runs its GemmStrided crosscheck before anything else).
packages=(
	"engine/cuda:."
	"models/settransformer:CUDA"
	"models/causallm:CUDA"
	"train:CUDA"
	"tasks:CUDA"
	"runner:CUDA"
	"engine:CUDA"
	"engine/device:ThisMachine|CUDA"
)

# The bundle travels to the device machine with the working tree, 64 MiB in all (docs/gpu.md).
max_bytes=$((64 << 20))

export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
flags=(-trimpath -ldflags='-s -w')

rm -rf "$out"
mkdir -p "$out/bin" "$out/src" "$out/configs" "$out/bench"
# src/ holds copies of Go files (engine/op_*.go for a kernel-table test): a go.mod of its own makes
# the folder a separate module, so `go vet ./...` and `go test ./...` at the root skip it.
printf 'module geloattack-gpu-bundle\n' >"$out/go.mod"
echo "gpu-bundle: building into $out"

go build "${flags[@]}" -o "$out/bin/geloattack" ./cmd/geloattack
: >"$out/packages.txt"
for entry in "${packages[@]}"; do
	pkg=${entry%%:*}
	filter=${entry#*:}
	name=${pkg//\//_}.test
	go test -c "${flags[@]}" -o "$out/bin/$name" "./$pkg"
	if [ ! -x "$out/bin/$name" ]; then
		echo "gpu-bundle: $pkg has no tests" >&2
		exit 1
	fi
	printf '%s\t%s\t%s\n' "$pkg" "$name" "$filter" >>"$out/packages.txt"
	# The tests run from their package's folder and read files beside the code (kernels/*.cu,
	# testdata/): copy every file of the folder that is not Go source, subfolders included.
	git ls-files -co --exclude-standard -- "$pkg" | { grep -v '\.go$' || true; } | while read -r f; do
		mkdir -p "$out/src/$(dirname "$f")"
		cp "$f" "$out/src/$f"
	done
	mkdir -p "$out/src/$pkg"
done
# engine/cuda's TestFusedKernelTable reads the kernel names the engine's op files declare
# (../op_*.go from its folder): ship those sources too.
mkdir -p "$out/src/engine"
cp engine/op_*.go "$out/src/engine/"
gzip -9 "$out"/bin/*

cp configs/quickstart.yaml configs/unmix-quickstart.yaml "$out/configs/"
cp bench/torch_settransformer.py "$out/bench/"
# models/causallm's PyTorch step check reads ../../bench/torch_lm.py (which imports torch_llama.py) from its package folder
# (src/models/causallm), and CI runs the bundle with GELOATTACK_REQUIRE_TORCH=1.
mkdir -p "$out/src/bench"
cp bench/torch_lm.py bench/torch_llama.py "$out/src/bench/"   # torch_lm.py imports torch_llama
cp scripts/gpu-bundle-run.sh "$out/run.sh"
chmod +x "$out/run.sh"
# run.sh compiles engine/cuda/kernels/*.cu (src/engine/cuda/kernels) on the GPU machine, as
# scripts/gpu-lm-kernels.sh does, with the same two scripts at the same relative paths.
mkdir -p "$out/scripts/lib"
cp scripts/build-ptx.sh "$out/scripts/"
cp scripts/lib/fresh-ptx.sh "$out/scripts/lib/"

# Part 7 (the decoder at real size, issue 39): the Llama-2 tokenizer and 600 texts of State of the
# Union chunks (about 120 words each, one per line, the addresses in file-name order), from the
# download cache scripts/fetch-data.sh fills. Without them the bundle still builds, and run.sh's
# part 7 says why it cannot run (decoder/MISSING).
cache=${GELOATTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/geloattack}
mkdir -p "$out/decoder"
tokdir=${GELOATTACK_TOKENIZERS:-$cache/tokenizers}/llama2
sotu=$cache/corpus/sotu/package/data
if [ -f "$tokdir/tokenizer.json" ] && ls "$sotu"/*.txt >/dev/null 2>&1; then
	cp "$tokdir/tokenizer.json" "$out/decoder/"
	[ -f "$tokdir/tokenizer_config.json" ] && cp "$tokdir/tokenizer_config.json" "$out/decoder/"
	# awk reads the files itself (the glob sorts them): a pipe into it would die of SIGPIPE at its exit.
	LC_ALL=C awk '
		{ for (i = 1; i <= NF; i++) { line = line (n ? " " : "") $i; n++; if (n == 120) { print line; line = ""; n = 0; if (++k == 600) exit } } }
	' "$sotu"/*.txt >"$out/decoder/texts.txt"
	echo "gpu-bundle: part 7's decoder inputs: the Llama-2 tokenizer, $(wc -l <"$out/decoder/texts.txt") texts ($(du -k "$out/decoder/texts.txt" | cut -f1) KiB)"
else
	echo "bundle built without the Llama-2 tokenizer ($tokdir/tokenizer.json) or the State of the Union corpus ($sotu): run scripts/fetch-tokenizers.sh and scripts/fetch-data.sh where the bundle is built" >"$out/decoder/MISSING"
	echo "gpu-bundle: warning: $(cat "$out/decoder/MISSING"); run.sh skips part 7" >&2
fi

# The CPU figures README.md commits, as "run<TAB>metric<TAB>val": the quickstart's final table
# (section "What the quickstart does and prints") and the unmix quickstart's (section "GPU check").
awk '
	/^## / { sec = $0 }
	sec ~ /What the quickstart does/ && $1 == "|" && $2 ~ /^(pos_mass|recall|top1)$/ { print "quickstart\t" $2 "\t" $6 }
	sec ~ /GPU check/ && $1 == "|" && $2 ~ /^(unmix_mass|random_mass|cos_mean)$/ { print "unmix-quickstart\t" $2 "\t" $6 }
' README.md >"$out/cpu-figures.tsv"
if ! grep -q '^quickstart	pos_mass	0\.[0-9]' "$out/cpu-figures.tsv" || ! grep -q '^unmix-quickstart	unmix_mass	0\.[0-9]' "$out/cpu-figures.tsv"; then
	echo "gpu-bundle: README.md's CPU figures not found (got: $(tr '\n' ' ' <"$out/cpu-figures.tsv"))" >&2
	exit 1
fi

{
	echo "built: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
	echo "go: $(go version)"
	echo "target: $GOOS/$GOARCH CGO_ENABLED=$CGO_ENABLED ${flags[*]}"
} >"$out/MANIFEST"

bytes=$(du -sb "$out" | cut -f1)
if [ "$bytes" -gt "$max_bytes" ]; then
	echo "gpu-bundle: $out holds $bytes bytes, over the 64 MiB ($max_bytes bytes) a device run carries" >&2
	exit 1
fi
echo "gpu-bundle: $out ready, $((bytes >> 20)) MiB ($bytes bytes); run $out/run.sh [REPORT_DIR] on the GPU machine"
