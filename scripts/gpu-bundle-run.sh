#!/usr/bin/env bash
# run.sh [--cpu-only | --gpu] [REPORT_DIR]: the GPU bundle's one command (built by
# scripts/gpu-bundle.sh, which copies this file in as run.sh; docs/gpu.md). Needs bash, coreutils
# (timeout), grep, sed, awk, gzip and tar: no Go. Works from any directory.
#
# It checks the whole GPU path in parts, each stopped at its own time budget, the whole under 10
# minutes: (0) engine/cuda/kernels/*.cu compiled to PTX with nvcc (scripts/lib/fresh-ptx.sh), and
# every later part run with GELOATTACK_CUDA_PTX at the committed PTX with the fresh lm.ptx and every
# module not committed yet (mix.ptx), so new kernels are checked in the same run (those are copied
# to REPORT_DIR to be committed;
# without nvcc the embedded PTX is used, and the report says which); (1) the crosschecks
# (GemmStrided first, then every kernel, then the other packages' GPU tests, the decoder's on the
# GPU among them); (2) the quickstart and the unmix quickstart on -device cuda in fp32, tf32 and bf16 beside
# the CPU figures committed in README.md; (3) bench -what step,unmix,train at paper size in bf16 with
# the PyTorch twin; (4) the pre-flight's device estimate beside the measured peak; (5) the bucket
# memory test on cuda; (6) protocol bench -device cuda; (7) the decoder at real size: a full-depth
# Llama-2-7B-shaped model init (started in the background before part 0), store extract at layer 10
# (the final embedding in fp32, then -embedding stored in fp32, tf32 and bf16, tokens/s beside the
# 20,000 target) and decode of 8 and 32 blocks. Without a GPU (the CUDA backend does not
# open; or --cpu-only) it says which parts need one, skips them and runs its CPU parts: the binaries
# start and know the flags the GPU parts use, every bundled test binary passes in -test.short mode
# (its GPU tests skip), tiny CPU quickstarts, a tiny CPU bench and protocol bench, and part 7's
# commands on a tiny model on the CPU (-precision bf16 refused there).
#
# REPORT_DIR (default: $OUT when set, else ./gpu-report) receives report.md, one Markdown report with
# every figure, pass/fail/skip per check and the exact commands, logs.tar.gz, the raw logs, and on
# a GPU with nvcc lm.ptx and mix.ptx (until it is committed), the freshly compiled modules. The
# report is rewritten after every check, so a run killed from outside still leaves one. Exit status
# 0 when every check ran and none failed (checks that need a GPU are skipped, not failed, on a
# machine without one).
# GELOATTACK_BUNDLE_FORCE_GPU=1 runs the GPU parts even where no GPU opens (they then fail at once):
# a check of this script's GPU path on a machine without one. GELOATTACK_BUNDLE_BUDGET: the whole
# run's seconds (default 575). PYTHON: the interpreter with PyTorch (default python3).
# GELOATTACK_BUNDLE_DECODER_LAYERS / _HIDDEN: part 7's model cut (default: full depth and width on
# a GPU; 2 layers of 128 where GPU parts are forced without one).
set -uo pipefail

usage() {
	sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
	echo "options: --cpu-only (skip the GPU parts even where a GPU opens), --gpu (fail unless a GPU opens)"
}

mode=auto
report_arg=
for arg in "$@"; do
	case $arg in
	--cpu-only) mode=cpu ;;
	--gpu) mode=gpu ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "run.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
	*) report_arg=$arg ;;
	esac
done

BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPORT_DIR=${report_arg:-${OUT:-./gpu-report}}
mkdir -p "$REPORT_DIR" || exit 1
REPORT_DIR=$(cd "$REPORT_DIR" && pwd)
REPORT=$REPORT_DIR/report.md
WORK=$(mktemp -d "${TMPDIR:-/tmp}/geloattack-gpu-bundle.XXXXXX") || exit 1
BIN=$WORK/bin
LOGS=$WORK/logs
mkdir -p "$BIN" "$LOGS" "$WORK/runs"
trap 'rm -rf "$WORK"' EXIT
trap 'echo "run.sh: interrupted" >&2; write_report; exit 130' INT TERM

# The whole run's budget: a device command may run 10 minutes; what is left after a part's own
# budget is also capped by this deadline, so the report is always written in time.
START=$(date +%s)
TOTAL_BUDGET=${GELOATTACK_BUNDLE_BUDGET:-575}
DEADLINE=$((START + TOTAL_BUDGET))
PY=${PYTHON:-python3}
MUST_RUN=0 # 1 around the GPU checks whose tests must not all skip

# Checks, one entry per index.
C_PART=() C_NAME=() C_RESULT=() C_SECS=() C_CMD=() C_LOG=() C_NOTE=()
SECTIONS=$WORK/sections.md
: >"$SECTIONS"

# cmdline prints a command as it can be pasted, with the bundle's and the work folder's paths
# written as $BUNDLE and $BIN / $WORK (the report says what they were).
cmdline() {
	local s= a q="'\\''"
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then
			s+=" $a"
		else
			s+=" '${a//\'/$q}'"
		fi
	done
	s=${s# }
	s=${s//"$BIN"/\$BIN}
	s=${s//"$WORK"/\$WORK}
	s=${s//"$BUNDLE"/\$BUNDLE}
	printf '%s' "$s"
}

# record PART NAME RESULT SECONDS COMMAND LOG NOTE appends a check.
record() {
	C_PART+=("$1") C_NAME+=("$2") C_RESULT+=("$3") C_SECS+=("$4") C_CMD+=("$5") C_LOG+=("$6") C_NOTE+=("$7")
}

# section appends Markdown to the report's body.
section() { printf '%s\n' "$@" >>"$SECTIONS"; }

# budget_for CEILING prints the seconds a check may take: its own ceiling, capped by the deadline.
budget_for() {
	local left=$((DEADLINE - $(date +%s) - 5))
	if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

# run_check PART NAME CEILING DIR LOG CMD... runs CMD in DIR under timeout, its output in
# $LOGS/LOG, and records pass, fail or timeout. Returns the command's status.
run_check() {
	local part=$1 name=$2 ceiling=$3 dir=$4 log=$5
	shift 5
	local budget cmd t0 t1 rc result note=
	budget=$(budget_for "$ceiling")
	cmd=$(cmdline "$@")
	if [ "$budget" -lt 5 ]; then
		echo "not run: the run's ${TOTAL_BUDGET} s are spent" >"$LOGS/$log"
		record "$part" "$name" "not run" 0 "$cmd" "" "the run's ${TOTAL_BUDGET} s are spent"
		write_report
		return 125
	fi
	t0=$(date +%s.%N)
	(cd "$dir" && exec timeout -k 10 "$budget" "$@") >"$LOGS/$log" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	case $rc in
	0) result=pass ;;
	124 | 137) result=timeout note="stopped at its budget of ${budget} s" ;;
	*) result=fail note="exit status $rc" ;;
	esac
	if [ $rc -eq 0 ] && grep -q '^testing: warning: no tests to run' "$LOGS/$log"; then
		result=fail note="no test matched: the test binary lacks the tests this check names"
		rc=1
	elif grep -q -E '^--- (PASS|FAIL|SKIP): ' "$LOGS/$log"; then
		note="${note:+$note; }$(awk '/^--- PASS: /{p++} /^--- FAIL: /{f++} /^--- SKIP: /{s++} END {printf "tests: %d passed, %d failed, %d skipped", p, f, s}' "$LOGS/$log")"
		# On a GPU, a check whose tests all skipped did not check anything: the tests found no GPU
		# where the probe did, which is itself a failure.
		if [ "$MUST_RUN" = 1 ] && [ $rc -eq 0 ] && ! grep -q '^--- PASS: ' "$LOGS/$log"; then
			result=fail note="$note; every test skipped although a GPU opens"
			rc=1
		fi
	fi
	record "$part" "$name" "$result" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$cmd" "$log" "$note"
	write_report
	return $rc
}

# skip_check PART NAME WHY COMMAND records a check that was not run.
skip_check() {
	record "$1" "$2" "skip" 0 "$4" "" "$3"
}

# test_summary LOG prints, for a go test -test.v log, the counts of top-level tests and the tests
# that skipped (with the message logged just before, the skip's reason) or failed.
test_summary() {
	awk '
		/^    [^ ].*_test\.go:[0-9]+: / || /^        [^ ].*_test\.go:[0-9]+: / { msg = $0; sub(/^ +/, "", msg) }
		/^--- PASS: / { pass++ }
		/^--- FAIL: / { fail++ }
		/^--- SKIP: / { skip++ }
		/^ *--- SKIP: / { name = $3; lines = lines "- skip `" name "`: " substr(msg, 1, 200) "\n" }
		/^ *--- FAIL: / { name = $3; lines = lines "- **FAIL** `" name "`\n" }
		END {
			printf "%d passed, %d failed, %d skipped (top-level tests)\n\n", pass, fail, skip
			printf "%s", lines
		}
	' "$1"
}

# code prints its arguments as a fenced block, or nothing when they are empty.
code() {
	[ -n "$*" ] || return 0
	echo '```'
	printf '%s\n' "$@"
	echo '```'
}

# log_tail LOG N prints the last N lines of a log as a fenced block.
log_tail() {
	echo '```'
	tail -n "$2" "$LOGS/$1" | cut -c1-400
	echo '```'
}

# val_figures LOG RUN prints "metric<TAB>val" for the final table of a train run's log.
val_figures() {
	awk -F'|' '
		/^final evaluation/ { on = 1; next }
		on && NF >= 5 {
			m = $2; v = $4; gsub(/ /, "", m); gsub(/ /, "", v)
			if (m != "metric" && m !~ /^-+$/) print m "\t" v
		}
	' "$LOGS/$1"
}

# cpu_figure RUN METRIC prints README.md's committed CPU figure.
cpu_figure() {
	awk -F'\t' -v r="$1" -v m="$2" '$1 == r && $2 == m { print $3 }' "$BUNDLE/cpu-figures.tsv"
}

write_report() {
	local i pass=0 fail=0 skip=0 notrun=0 now
	now=$(date +%s)
	for i in "${!C_RESULT[@]}"; do
		case ${C_RESULT[$i]} in
		pass) pass=$((pass + 1)) ;;
		skip) skip=$((skip + 1)) ;;
		"not run") notrun=$((notrun + 1)) ;;
		*) fail=$((fail + 1)) ;;
		esac
	done
	{
		echo "# geloattack GPU bundle report"
		echo
		echo "- when: $(date -u -d "@$START" '+%Y-%m-%d %H:%M:%S UTC'), $((now - START)) s so far (budget ${TOTAL_BUDGET} s)"
		echo "- host: $(uname -n), $(uname -m), $(nproc 2>/dev/null || echo '?') cores"
		echo "- mode: $MODE_LINE"
		echo "- PTX: $PTX_LINE"
		echo "- bundle: \`$BUNDLE\` ($(tr '\n' ';' <"$BUNDLE/MANIFEST" | sed 's/;$//; s/;/; /g'))"
		echo "- paths in commands: \$BUNDLE = \`$BUNDLE\`, \$BIN = \`$BIN\` (the unpacked binaries), \$WORK = \`$WORK\` (run folders; removed at the end)"
		echo "- raw logs: \`logs.tar.gz\` beside this report"
		echo
		echo "**Result: $pass passed, $fail failed, $skip skipped, $notrun not run.**"
		echo
		echo "## Checks"
		echo
		echo "| part | check | result | s | command | note |"
		echo "|---|---|---|---:|---|---|"
		for i in "${!C_RESULT[@]}"; do
			local res=${C_RESULT[$i]} cmd=${C_CMD[$i]//|/\\|} note=${C_NOTE[$i]//|/\\|}
			case $res in fail | timeout) res="**$res**" ;; esac
			[ -n "${C_LOG[$i]}" ] && note="${note:+$note; }log \`${C_LOG[$i]}\`"
			echo "| ${C_PART[$i]} | ${C_NAME[$i]} | $res | ${C_SECS[$i]} | \`$cmd\` | $note |"
		done
		echo
		cat "$SECTIONS"
	} >"$REPORT.tmp" && mv "$REPORT.tmp" "$REPORT"
	tar -czf "$REPORT_DIR/logs.tar.gz" -C "$WORK" logs 2>/dev/null
}

# ---------------------------------------------------------------------------------------------
# Part 0: unpack, find out whether a GPU opens.
# ---------------------------------------------------------------------------------------------
MODE_LINE="starting"
PTX_LINE="the embedded PTX (nothing compiled yet)"
t0=$(date +%s.%N)
unpack_ok=1
for f in "$BUNDLE"/bin/*.gz; do
	name=$(basename "$f" .gz)
	if ! gzip -dc "$f" >"$BIN/$name" 2>>"$LOGS/unpack.log"; then unpack_ok=0; fi
	chmod +x "$BIN/$name"
done
PKGS=() PKG_BIN=() PKG_FILTER=()
while IFS=$'\t' read -r pkg name filter; do
	PKGS+=("$pkg") PKG_BIN+=("$name") PKG_FILTER+=("$filter")
done <"$BUNDLE/packages.txt"
GA=$BIN/geloattack
record 0 "unpack the binaries ($(ls "$BIN" | wc -l) files)" "$([ $unpack_ok = 1 ] && echo pass || echo fail)" \
	"$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" "gzip -dc \$BUNDLE/bin/NAME.gz > \$BIN/NAME" "unpack.log" ""

{
	echo "## nvidia-smi"
	command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi 2>&1 || echo "no nvidia-smi on PATH"
	echo
	echo "## $PY"
	timeout 60 "$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda available:", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 || echo "no PyTorch"
} >"$LOGS/environment.log" 2>&1
TORCH_GPU=0
grep -q 'cuda available: True' "$LOGS/environment.log" && TORCH_GPU=1

# The probe opens the CUDA backend the way every command does (engine/device).
probe=(protocol bench -device cuda -n 64 -d 64 -repeats 1 -mixes orthogonal)
run_check 0 "does the CUDA backend open (device probe)" 30 "$WORK" probe.log "$GA" "${probe[@]}"
probe_rc=$?
GPU_WHY=$(grep -o 'no CUDA device.*' "$LOGS/probe.log" | head -1 | cut -c1-300)
if [ "${GELOATTACK_BUNDLE_FORCE_GPU:-}" = 1 ] && [ $mode != cpu ]; then
	GPU=1
	MODE_LINE="GPU parts forced by GELOATTACK_BUNDLE_FORCE_GPU=1 (checks run.sh itself; without a GPU they fail)"
elif [ $probe_rc -eq 0 ] && [ $mode != cpu ]; then
	GPU=1
	MODE_LINE="GPU: $(grep -m1 -o 'cuda:0 [^;]*' "$LOGS/probe.log" || echo 'cuda:0')"
elif [ $mode = gpu ]; then
	MODE_LINE="--gpu given but no GPU opens: ${GPU_WHY:-see probe.log}"
	write_report
	echo "run.sh: no GPU opens here (--gpu): $REPORT" >&2
	exit 1
else
	GPU=0
	if [ $mode = cpu ]; then
		MODE_LINE="CPU only (--cpu-only): the parts that need a GPU are skipped"
	else
		MODE_LINE="CPU only: no GPU opens here (${GPU_WHY:-see probe.log}); the parts that need a GPU are skipped"
	fi
	# Without a GPU the probe's refusal is the expected outcome: a pass when it names the reason.
	if [ $probe_rc -ne 0 ] && [ -n "$GPU_WHY" ]; then
		C_RESULT[${#C_RESULT[@]} - 1]=pass
		C_NOTE[${#C_NOTE[@]} - 1]="refused with the reason, as it must without a GPU"
		C_NAME[${#C_NAME[@]} - 1]="without a GPU, -device cuda refuses and says why"
	fi
fi
section "## Environment" "" "$(code "$(cut -c1-200 "$LOGS/environment.log")")" ""
write_report
NEEDS_GPU="needs a GPU (none opens here)"
[ $mode = cpu ] && NEEDS_GPU="needs a GPU (--cpu-only)"

# ---------------------------------------------------------------------------------------------
# CPU parts: the binaries start and know the flags the GPU parts use; the test binaries pass.
# ---------------------------------------------------------------------------------------------
if [ $GPU = 0 ]; then
	for spec in "bench:-what -presets -device -precision -tasks -torch -torch-script -steps" \
		"protocol bench:-device -precision -n -repeats -max-time-per-n -out" \
		"train:-config -out -steps -device -precision" \
		"decode:-model -texts -blocks -device -out -resume" \
		"store extract:-model -texts -layer -device -out -precision -embedding -max-tokens -batch -dtype" \
		"model init:-like -out -tokenizer -layers -hidden" \
		"assess:-model -device -out"; do
		cmd=${spec%%:*}
		log="help-${cmd// /-}.log"
		# shellcheck disable=SC2086 # cmd is one or two words on purpose
		if run_check 0 "geloattack $cmd -h" 20 "$WORK" "$log" "$GA" $cmd -h; then
			missing=
			for flag in ${spec#*:}; do
				grep -q -E -- "^  $flag( |$)" "$LOGS/$log" || missing="$missing $flag"
			done
			if [ -n "$missing" ]; then
				C_RESULT[${#C_RESULT[@]} - 1]=fail
				C_NOTE[${#C_NOTE[@]} - 1]="lacks the flags the GPU parts use:$missing"
			else
				C_NOTE[${#C_NOTE[@]} - 1]="has the flags the GPU parts use: ${spec#*:}"
			fi
		fi
	done
	for i in "${!PKGS[@]}"; do
		if run_check 0 "${PKG_BIN[$i]} starts (-test.list)" 20 "$BUNDLE/src/${PKGS[$i]}" "list-${PKG_BIN[$i]}.log" \
			"$BIN/${PKG_BIN[$i]}" -test.list .; then
			C_NOTE[${#C_NOTE[@]} - 1]="$(grep -c '^Test' "$LOGS/list-${PKG_BIN[$i]}.log") tests"
		fi
	done

	section "## Part 1: tests (CPU: every bundled test binary in -test.short mode; GPU tests skip)" ""
	for i in "${!PKGS[@]}"; do
		log="test-${PKG_BIN[$i]}.log"
		run_check 1 "${PKGS[$i]}: all tests, -test.short" 120 "$BUNDLE/src/${PKGS[$i]}" "$log" \
			"$BIN/${PKG_BIN[$i]}" -test.short -test.v -test.count=1 -test.timeout=115s
		section "### ${PKGS[$i]}" "" "$(test_summary "$LOGS/$log")" ""
	done
	skip_check 0 "compile engine/cuda/kernels/*.cu to PTX and test with it" "$NEEDS_GPU" \
		"bash \$BUNDLE/scripts/lib/fresh-ptx.sh \$BUNDLE/src/engine/cuda/kernels \$BUNDLE/src/engine/cuda/ptx \$WORK/ptx"
	PTX_LINE="the embedded PTX (no GPU: nothing compiled)"
	skip_check 1 "GemmStrided and every kernel against the CPU (crosscheck)" "$NEEDS_GPU" \
		"\$BIN/engine_cuda.test -test.run '^TestBackendCrossCheck' -test.v"
	skip_check 1 "CUDA graphs: bit-equality and paper step timing" "$NEEDS_GPU" \
		"\$BIN/models_settransformer.test -test.run '^TestCUDAGraphStep' -test.v"

	section "## Part 2: tiny quickstarts on the CPU" "" \
		"A few steps only: this proves the commands run; the figures are not comparable with README.md's." ""
	run_check 2 "quickstart, cpu, 20 steps" 120 "$WORK" qs-cpu.log \
		"$GA" train -device cpu -steps 20 -out "$WORK/runs/qs-cpu"
	run_check 2 "unmix quickstart, cpu, 10 steps" 120 "$WORK" uq-cpu.log \
		"$GA" train -config "$BUNDLE/configs/unmix-quickstart.yaml" -device cpu -steps 10 -out "$WORK/runs/uq-cpu"
	# Asking for CUDA graphs where no GPU opens changes nothing (the variable is read by the CUDA
	# backend only); on a GPU part 1 and part 3 check graphs.
	run_check 2 "quickstart, cpu, 5 steps, GELOATTACK_CUDA_GRAPHS=1" 60 "$WORK" qs-cpu-graphs.log \
		env GELOATTACK_CUDA_GRAPHS=1 "$GA" train -device auto -steps 5 -out "$WORK/runs/qs-cpu-graphs"
	section "| run | metric | val (few steps) | README CPU figure (full run) |" "|---|---|---:|---:|"
	for r in qs:quickstart:pos_mass uq:unmix-quickstart:unmix_mass; do
		IFS=: read -r tag run metric <<<"$r"
		v=$(val_figures "$tag-cpu.log" | awk -F'\t' -v m="$metric" '$1 == m { print $2 }')
		section "| $run | $metric | ${v:-missing} | $(cpu_figure "$run" "$metric") |"
		if [ -z "$v" ] && ! grep -q '^not run' "$LOGS/$tag-cpu.log"; then
			record 2 "$run: final val $metric in the log" fail 0 "" "$tag-cpu.log" "no final table"
		fi
	done
	section ""
	if run_check 2 "train -device cuda refuses without a GPU" 30 "$WORK" qs-cuda-refused.log \
		"$GA" train -device cuda -steps 1 -out "$WORK/runs/refused"; then
		C_RESULT[${#C_RESULT[@]} - 1]=fail
		C_NOTE[${#C_NOTE[@]} - 1]="trained on -device cuda where the probe found no GPU"
	elif grep -q 'device cuda: no CUDA device' "$LOGS/qs-cuda-refused.log"; then
		C_RESULT[${#C_RESULT[@]} - 1]=pass
		C_NOTE[${#C_NOTE[@]} - 1]="refused naming the reason, as it must"
	fi
	for p in fp32 tf32 bf16; do
		skip_check 2 "quickstart and unmix quickstart on cuda, $p" "$NEEDS_GPU" \
			"\$BIN/geloattack train -device cuda -precision $p"
	done

	section "## Part 3: bench" ""
	run_check 3 "bench step,unmix tiny on the CPU (1 step)" 120 "$WORK" bench-cpu.log \
		"$GA" bench -what step,unmix -presets tiny -device cpu -steps 1
	section "$(code "$(grep -E '^(settransformer|  step|  peak)' "$LOGS/bench-cpu.log")")" ""
	skip_check 3 "bench step,unmix,train paper bf16 with the PyTorch twin" "$NEEDS_GPU" \
		"\$BIN/geloattack bench -what step,unmix,train -presets paper -device cuda -precision bf16 -tasks retrieval,unmix -torch $PY"
	skip_check 3 "bench -what train paper bf16 without and with CUDA graphs" "$NEEDS_GPU" \
		"GELOATTACK_CUDA_GRAPHS=1 \$BIN/geloattack bench -what train -presets paper -device cuda -precision bf16 -tasks retrieval,unmix -warmup 3 -steps 10"
	skip_check 4 "pre-flight device estimate beside the measured peak" "$NEEDS_GPU (its test skipped in part 1)" \
		"\$BIN/runner.test -test.run '^TestPreflightDeviceEstimateBoundsPeakCUDA\$' -test.v"
	skip_check 5 "bucket memory test on cuda" "$NEEDS_GPU (its test skipped in part 1)" \
		"\$BIN/train.test -test.run '^TestMemoryStopsGrowingOnceEveryBucketIsSeenCUDA\$' -test.v"

	section "## Part 6: protocol bench on the CPU" ""
	run_check 6 "protocol bench, cpu, n 64,128, d 256" 60 "$WORK" protocol-cpu.log \
		"$GA" protocol bench -device cpu -n 64,128 -d 256 -repeats 1
	section "$(sed -n '/^## Parts at every n/,$p' "$LOGS/protocol-cpu.log" | sed 's/^#/##/')" ""
	skip_check 6 "protocol bench -device cuda" "$NEEDS_GPU" "\$BIN/geloattack protocol bench -device cuda"

	section "## Part 7: the decoder's commands on a tiny model on the CPU" "" \
		"Part 7's commands at 2 layers of d 128 with the bundled Llama-2 tokenizer: they run, and tf32/bf16 extraction is refused on the CPU." ""
	if [ -f "$BUNDLE/decoder/MISSING" ]; then
		skip_check 7 "the decoder's commands on the CPU" "$(cat "$BUNDLE/decoder/MISSING")" ""
	else
		tiny=$WORK/runs/tiny-llama2
		run_check 7 "model init -like llama2-7b, 2 layers, d 128" 60 "$WORK" dec-cpu-init.log \
			"$GA" model init -like llama2-7b -layers 2 -hidden 128 -out "$tiny" -tokenizer "$BUNDLE/decoder/tokenizer.json"
		run_check 7 "store extract -embedding stored on the CPU" 60 "$WORK" dec-cpu-extract.log \
			"$GA" store extract -model "$tiny" -layer 1 -device cpu -embedding stored -texts "$BUNDLE/decoder/texts.txt" -max-texts 16 -max-tokens 64 -quiet -out "$WORK/runs/tiny-store"
		if run_check 7 "store extract -precision bf16 -device cpu refuses" 30 "$WORK" dec-cpu-bf16.log \
			"$GA" store extract -model "$tiny" -layer 1 -device cpu -precision bf16 -texts "$BUNDLE/decoder/texts.txt" -max-texts 4 -quiet -out "$WORK/runs/tiny-bf16"; then
			C_RESULT[${#C_RESULT[@]} - 1]=fail
			C_NOTE[${#C_NOTE[@]} - 1]="extracted in bf16 on the CPU, which computes in fp32 only"
		elif grep -q 'the CPU computes its GEMMs in fp32 only' "$LOGS/dec-cpu-bf16.log"; then
			C_RESULT[${#C_RESULT[@]} - 1]=pass
			C_NOTE[${#C_NOTE[@]} - 1]="refused naming the reason, as it must"
		fi
		section "$(code "$(grep -h '^extract: ' "$LOGS/dec-cpu-extract.log" | cut -c1-300)")" ""
	fi
	skip_check 7 "the decoder at real size on cuda (model init, extraction at layer 10, decode 8 and 32 blocks)" "$NEEDS_GPU" \
		"\$BIN/geloattack store extract -model \$WORK/llama2-7b -layer 10 -device cuda -embedding stored -precision bf16"
	write_report
fi

# ---------------------------------------------------------------------------------------------
# GPU parts.
# ---------------------------------------------------------------------------------------------
PART45='^(TestPreflightDeviceEstimateBoundsPeakCUDA|TestMemoryStopsGrowingOnceEveryBucketIsSeenCUDA)$'
# docs/gpu.md item 3's tests run in a check of their own at the end of part 1 (paper size: tens of seconds).
GRAPHS1='^TestCUDAGraphStep'
if [ $GPU = 1 ]; then
	# Part 7's model: a full-depth Llama-2-7B-shaped random init (13 GB in bf16, about 90 s on one
	# core of an H100 machine) written in the background while parts 0-6 run, so that part 7 finds
	# it made. Forced GPU parts without a GPU make a tiny one (they fail at once anyway).
	DEC_LAYERS=${GELOATTACK_BUNDLE_DECODER_LAYERS:-0} DEC_HIDDEN=${GELOATTACK_BUNDLE_DECODER_HIDDEN:-0}
	if [ $probe_rc -ne 0 ] && [ -z "${GELOATTACK_BUNDLE_DECODER_LAYERS:-}" ]; then
		DEC_LAYERS=2 DEC_HIDDEN=128
	fi
	DEC_MODEL=$WORK/llama2-7b
	DEC_INIT=("$GA" model init -like llama2-7b -layers "$DEC_LAYERS" -hidden "$DEC_HIDDEN" -out "$DEC_MODEL" -tokenizer "$BUNDLE/decoder/tokenizer.json")
	DEC_INIT_PID=
	if [ ! -f "$BUNDLE/decoder/MISSING" ]; then
		(
			t0=$(date +%s.%N)
			cd "$WORK" && timeout -k 10 300 "${DEC_INIT[@]}" >"$LOGS/dec-init.log" 2>&1
			echo "$? $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" >"$WORK/dec-init.rc"
		) &
		DEC_INIT_PID=$!
	fi

	# Part 0: the kernels compiled here, so the tests below check the sources of this commit (a
	# kernel added since the committed PTX was built is otherwise refused on the GPU).
	section "## Part 0: PTX compiled from engine/cuda/kernels" ""
	run_check 0 "compile engine/cuda/kernels/*.cu to PTX (nvcc, sm_90)" 90 "$WORK" ptx.log \
		bash "$BUNDLE/scripts/lib/fresh-ptx.sh" "$BUNDLE/src/engine/cuda/kernels" "$BUNDLE/src/engine/cuda/ptx" "$WORK/ptx"
	case $? in
	0)
		export GELOATTACK_CUDA_PTX=$WORK/ptx/ship
		cp "$WORK/ptx/fresh/lm.ptx" "$REPORT_DIR/lm.ptx"
		# Modules with no committed PTX yet (mix.ptx: device-side mixing's rounding kernel) come
		# back too, to be committed beside lm.ptx.
		newptx=
		for f in "$WORK/ptx/ship"/*.ptx; do
			b=$(basename "$f")
			if [ ! -f "$BUNDLE/src/engine/cuda/ptx/$b" ]; then
				cp "$f" "$REPORT_DIR/$b"
				newptx="$newptx $b"
			fi
		done
		PTX_LINE="fresh: every test and command below ran with GELOATTACK_CUDA_PTX at the committed PTX with lm.ptx compiled here ($(grep -m1 '^nvcc: ' "$LOGS/ptx.log" | cut -c7-))${newptx:+ and the new modules$newptx}; that lm.ptx${newptx:+ and$newptx} are beside this report, to be committed into engine/cuda/ptx/"
		;;
	2)
		C_RESULT[${#C_RESULT[@]} - 1]=skip
		C_NOTE[${#C_NOTE[@]} - 1]="no nvcc here (set NVCC): the embedded PTX is used"
		PTX_LINE="the embedded PTX: no nvcc here, so kernels added since the committed PTX are refused and their tests fail"
		;;
	*)
		PTX_LINE="the embedded PTX: compiling failed (ptx.log)"
		;;
	esac
	section "$(code "$(grep -E '^(nvcc: |fresh |no nvcc)' "$LOGS/ptx.log")")" ""
	write_report

	# Part 1: GemmStrided first (the newest GEMM path, never run on a GPU before issue 29), then
	# every op in every precision, then the rest of engine/cuda, then the other packages.
	section "## Part 1: crosschecks" ""
	cudadir=$BUNDLE/src/engine/cuda
	MUST_RUN=1
	run_check 1 "GemmStrided against the CPU, every precision" 30 "$cudadir" cc-gemmstrided.log \
		"$BIN/engine_cuda.test" -test.run '^TestBackendCrossCheck(FP32|TF32|BF16|FusedAttention)$/^GemmStrided$' -test.v -test.timeout=28s
	section "### GemmStrided" "" "$(test_summary "$LOGS/cc-gemmstrided.log")" ""
	run_check 1 "every kernel against the CPU (fp32, tf32, bf16, fused attention)" 60 "$cudadir" cc-all.log \
		"$BIN/engine_cuda.test" -test.run '^TestBackendCrossCheck' -test.v -test.timeout=58s
	MUST_RUN=0
	section "### Every kernel" "" "$(test_summary "$LOGS/cc-all.log")" ""
	# Without the CPU-only self-tests of the crosscheck harness and the g++ syntax check (CI runs them).
	run_check 1 "engine/cuda: the other GPU tests (determinism, precision effect, uploads, ...)" 45 "$cudadir" cc-rest.log \
		"$BIN/engine_cuda.test" -test.skip '^TestBackendCrossCheck|^TestCrossCheck|^TestKernelSyntax$' -test.short -test.v -test.timeout=43s
	section "### engine/cuda, the rest" "" "$(test_summary "$LOGS/cc-rest.log")" ""
	p1_end=$(($(date +%s) + 120))
	for i in "${!PKGS[@]}"; do
		[ "${PKGS[$i]}" = engine/cuda ] && continue
		left=$((p1_end - $(date +%s)))
		[ $left -lt 10 ] && left=10
		log="gpu-${PKG_BIN[$i]}.log"
		# GELOATTACK_GPU_TIMING: models/settransformer's paper-step timing in fp32, tf32 and bf16.
		MUST_RUN=1
		run_check 1 "${PKGS[$i]}: GPU tests (-test.run '${PKG_FILTER[$i]}')" "$left" "$BUNDLE/src/${PKGS[$i]}" "$log" \
			env GELOATTACK_GPU_TIMING=1 "$BIN/${PKG_BIN[$i]}" -test.run "${PKG_FILTER[$i]}" -test.skip "$PART45|$GRAPHS1" -test.v -test.timeout=$((left - 2))s
		MUST_RUN=0
		if grep -q '^testing: warning: no tests to run' "$LOGS/$log"; then
			C_RESULT[${#C_RESULT[@]} - 1]=skip
			C_NOTE[${#C_NOTE[@]} - 1]="no GPU tests in this package yet (none matches '${PKG_FILTER[$i]}' outside parts 4 and 5)"
			write_report
		fi
		section "### ${PKGS[$i]}" "" "$(test_summary "$LOGS/$log")" ""
		timing=$(grep -E 'ms|rows/s|tokens/s|GiB' "$LOGS/$log" | grep -E '_test\.go:[0-9]+: ' | sed 's/^ *//' | head -20)
		section "$(code "$timing")" ""
		if [ "${PKGS[$i]}" = models/causallm ]; then
			# The decoder on the GPU (TestCUDADecoderMatchesCPU, TestCUDADecoderThroughput): both must
			# pass here, not skip (the package's check passes when any test passes).
			for t in TestCUDADecoderMatchesCPU TestCUDADecoderThroughput; do
				if grep -q "^--- PASS: $t " "$LOGS/$log"; then
					record 1 "the decoder on the GPU: $t" pass 0 "\$BIN/${PKG_BIN[$i]} -test.run '^$t\$' -test.v" "$log" "$PTX_LINE"
				else
					record 1 "the decoder on the GPU: $t" fail 0 "\$BIN/${PKG_BIN[$i]} -test.run '^$t\$' -test.v" "$log" \
						"$(grep -m1 -E "^--- (FAIL|SKIP): $t " "$LOGS/$log" || echo 'not run')"
				fi
			done
			dec=$(grep -E 'largest relative error|Llama-2-7B shape|extraction: |decoding: |peak device memory' "$LOGS/$log" | sed 's/^ *//' | cut -c1-300)
			section "### The decoder on the GPU (fp32)" "" "${dec:+$(code "$dec")}" \
				"Targets (issue 39, one H100): extraction of a Llama-2-7B-shaped model at layer 10 at >= 20,000 tokens/s; decoding a batch of 4 texts x 16 tokens with 8 blocks scored jointly in under 60 s." ""
		fi
	done

	# docs/gpu.md item 4: the bf16 paper step again with the bf16 weight copies turned off, beside
	# the run above (copies on when adamw16.ptx is loaded, as part 0 arranges).
	MUST_RUN=1
	run_check 1 "models/settransformer: bf16 paper step without the bf16 weight copies" 30 "$BUNDLE/src/models/settransformer" st-nocopies.log \
		env GELOATTACK_GPU_TIMING=bf16 GELOATTACK_CUDA_BF16_WEIGHTS=off "$BIN/models_settransformer.test" -test.run '^TestCUDAPaperStepTiming$' -test.v -test.timeout=28s
	MUST_RUN=0
	section "### bf16 paper step without the weight copies (GELOATTACK_CUDA_BF16_WEIGHTS=off)" "" \
		"$(code "$(grep -E 'launches|step median' "$LOGS/st-nocopies.log" | sed 's/^ *//')")" \
		"With the copies: the models/settransformer section above (its bf16 lines)." ""
	write_report

	# docs/gpu.md item 3: CUDA graphs per set-size bucket. Bit-equality of graph-replayed steps with
	# eager ones (tiny and paper, both tasks, fp32 and bf16; engine/cuda's own check,
	# TestGraphStepMatchesEagerCUDA, ran in "engine/cuda, the rest"), then the paper step's time
	# without and with graphs, calls queued and driver calls a step.
	MUST_RUN=1
	run_check 1 "models/settransformer: CUDA graphs, bit-equality and paper step timing (GELOATTACK_CUDA_GRAPHS)" 75 "$BUNDLE/src/models/settransformer" st-graphs.log \
		env GELOATTACK_GPU_TIMING=1 "$BIN/models_settransformer.test" -test.run "$GRAPHS1" -test.v -test.timeout=73s
	MUST_RUN=0
	section "### CUDA graphs per set-size bucket (docs/gpu.md item 3)" "" "$(test_summary "$LOGS/st-graphs.log")" "" \
		"$(code "$(grep -h -E 'cuda graphs|graphs (on|off|record)|step median|graphs [0-9.]+x' "$LOGS/st-graphs.log" "$LOGS/cc-rest.log" | sed 's/^ *//' | cut -c1-400 | head -40)")" \
		"Each \`cuda graphs on: ...\` line: steps recorded, replayed (one cuGraphLaunch each), captured, eager, capture fallbacks; a \`cuda graphs: ...\` line is a fallback or off reason. Target: paper retrieval <= 12 ms, unmix <= 20 ms (bf16, H100)." ""
	write_report

	# Part 2: six runs at once (each small; the GPU and 16 cores hold them), beside README's CPU figures.
	section "## Part 2: quickstarts on cuda beside README.md's CPU figures" ""
	pids=() tags=()
	budget=$(budget_for 95)
	t0=$(date +%s.%N)
	for p in fp32 tf32 bf16; do
		for q in qs uq; do
			tag=$q-$p
			args=(train -device cuda -precision "$p" -out "$WORK/runs/$tag")
			[ $q = uq ] && args+=(-config "$BUNDLE/configs/unmix-quickstart.yaml")
			(cd "$WORK" && exec timeout -k 10 "$budget" "$GA" "${args[@]}") >"$LOGS/$tag.log" 2>&1 &
			pids+=($!) tags+=("$tag")
			echo "$(cmdline "$GA" "${args[@]}")" >"$WORK/$tag.cmd"
		done
	done
	for k in "${!pids[@]}"; do
		wait "${pids[$k]}"
		rc=$?
		tag=${tags[$k]}
		case $rc in 0) res=pass note= ;; 124 | 137) res=timeout note="stopped at ${budget} s" ;; *) res=fail note="exit status $rc" ;; esac
		record 2 "$tag (run in parallel with the other five)" "$res" \
			"$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" "$(cat "$WORK/$tag.cmd")" "$tag.log" "$note"
	done
	section "| run | metric | CPU (README) | cuda fp32 | cuda tf32 | cuda bf16 |" "|---|---|---:|---:|---:|---:|"
	for r in qs:quickstart:pos_mass qs:quickstart:recall qs:quickstart:top1 \
		uq:unmix-quickstart:unmix_mass uq:unmix-quickstart:random_mass uq:unmix-quickstart:cos_mean; do
		IFS=: read -r q run metric <<<"$r"
		row="| $run | $metric | $(cpu_figure "$run" "$metric") |"
		for p in fp32 tf32 bf16; do
			v=$(val_figures "$q-$p.log" | awk -F'\t' -v m="$metric" '$1 == m { print $2 }')
			row="$row ${v:-–} |"
		done
		section "$row"
	done
	section "" "Val figures after the full run (400 steps, 300 for unmix); seed-to-seed spread on the CPU is 0.54–0.67 for the quickstart's pos_mass (engine/cuda/README.md), so a GPU figure within that range is the same within noise." ""
	section "$(code "$(grep -h -E '^  (device|memory):' "$LOGS"/qs-bf16.log "$LOGS"/uq-bf16.log)")" ""
	write_report

	# Part 3: the benchmarks at paper size in bf16, with the PyTorch twin in the same command.
	section "## Part 3: bench, paper size, bf16" ""
	bench=(bench -what step,unmix,train -presets paper -device cuda -precision bf16 -tasks retrieval,unmix)
	if [ $TORCH_GPU = 1 ]; then
		bench+=(-torch "$PY" -torch-script "$BUNDLE/bench/torch_settransformer.py")
	else
		section "PyTorch with CUDA not found ($PY; see Environment): the twin is left out." ""
	fi
	run_check 3 "bench step,unmix,train paper bf16$([ $TORCH_GPU = 1 ] && echo ' with the PyTorch twin')" 120 "$WORK" bench-paper.log "$GA" "${bench[@]}"
	section "$(code "$(grep -v '^ *$' "$LOGS/bench-paper.log" | cut -c1-300 | tail -80)")" ""
	if [ $TORCH_GPU = 1 ]; then
		run_check 3 "PyTorch twin of the step and unmix benchmarks (paper, bf16)" 30 "$WORK" torch-step.log \
			"$PY" "$BUNDLE/bench/torch_settransformer.py" --preset paper --task retrieval,unmix --steps 10 --warmup 3
		section "PyTorch eager, the same steps:" "" "$(code "$(grep -v '^ *$' "$LOGS/torch-step.log" | cut -c1-300 | tail -20)")" ""
	else
		skip_check 3 "PyTorch twin of the step and unmix benchmarks" "no PyTorch with CUDA ($PY)" "$PY bench/torch_settransformer.py"
	fi
	# docs/gpu.md item 3: the training loop end to end with CUDA graphs, beside the same command
	# without (both -warmup 3 -steps 10: graphs capture a step's list on its second sighting).
	for g in 0 1; do
		run_check 3 "bench -what train paper bf16, GELOATTACK_CUDA_GRAPHS=$g" 60 "$WORK" "bench-train-graphs$g.log" \
			env GELOATTACK_CUDA_GRAPHS=$g "$GA" bench -what train -presets paper -device cuda -precision bf16 -tasks retrieval,unmix -warmup 3 -steps 10
	done
	section "### bench -what train without and with CUDA graphs (-warmup 3 -steps 10)" "" \
		"$(code "$(for g in 0 1; do
			echo "GELOATTACK_CUDA_GRAPHS=$g:"
			grep -v -e '^ *$' -e 'cuda graphs' "$LOGS/bench-train-graphs$g.log" | cut -c1-300 | tail -14
			grep 'cuda graphs' "$LOGS/bench-train-graphs$g.log" | cut -c1-300 | head -8
		done)")" \
		"With graphs, each task's backend prints \`cuda graphs on: ...\` at its close: steps recorded, replayed, captured, eager. Real batches replay only when a step's command list repeats exactly (same set-size bucket, candidate count, buffer addresses); few replays there say that the list varies, not that results differ." ""
	section "The train rows form U = A X on the GPU (train.mix_on auto: device mixing; before 2026-11-27 the sampler's workers formed it). Host against device mixing in one run: part 1's tasks section, TestMixTimingCUDA's two lines." ""
	section "Targets (docs/gpu.md): paper retrieval step ≤ 12 ms bf16 on an H100, unmix ≤ 20 ms, end-to-end training ≥ 3× PyTorch eager." ""
	write_report

	# Part 4: the pre-flight's estimate beside the measured peak device memory.
	section "## Part 4: pre-flight estimate and measured peak device memory (paper size, bf16)" ""
	MUST_RUN=1
	run_check 4 "pre-flight device estimate bounds the measured peak" 40 "$BUNDLE/src/runner" preflight.log \
		"$BIN/runner.test" -test.run '^TestPreflightDeviceEstimateBoundsPeakCUDA$' -test.v -test.timeout=38s
	section "$(test_summary "$LOGS/preflight.log")" "" "$(code "$(grep -o 'preflight .*' "$LOGS/preflight.log")")" ""

	# Part 5: the bucket memory test on cuda.
	section "## Part 5: set-size buckets: device memory stops growing" ""
	run_check 5 "bucket memory test on cuda (fp32, bf16)" 30 "$BUNDLE/src/train" bucket.log \
		"$BIN/train.test" -test.run '^TestMemoryStopsGrowingOnceEveryBucketIsSeenCUDA$' -test.v -test.timeout=28s
	section "$(test_summary "$LOGS/bucket.log")" "" "$(code "$(grep -E 'distinct set sizes|changed from' "$LOGS/bucket.log" | sed 's/^ *//')")" ""

	MUST_RUN=0

	# Part 6: the protocol itself on the GPU.
	section "## Part 6: protocol bench -device cuda" ""
	mkdir -p "$WORK/protocol"
	run_check 6 "protocol bench -device cuda" 35 "$WORK" protocol-cuda.log \
		"$GA" protocol bench -device cuda -n 64,256,1024,4096 -repeats 3 -max-time-per-n 3s -out "$WORK/protocol"
	if [ -f "$WORK/protocol/protocol-bench.md" ]; then
		section "$(sed 's/^#/##/' "$WORK/protocol/protocol-bench.md")" ""
	else
		section "$(code "$(tail -40 "$LOGS/protocol-cuda.log" | cut -c1-300)")" ""
	fi

	# Part 7: the decoder at real size (issue 39 item 3, docs/gpu.md item 9).
	section "## Part 7: the decoder at real size (Llama-2-7B shape, random init, bf16 file)" ""
	if [ -z "$DEC_INIT_PID" ]; then
		skip_check 7 "the decoder at real size" "$(cat "$BUNDLE/decoder/MISSING")" ""
	else
		wait "$DEC_INIT_PID"
		read -r irc isecs <"$WORK/dec-init.rc" 2>/dev/null || irc=1 isecs=0
		case $irc in 0) res=pass note= ;; 124 | 137) res=timeout note="stopped at 300 s" ;; *) res=fail note="exit status $irc" ;; esac
		record 7 "model init -like llama2-7b (full depth unless cut; in the background since part 0)" "$res" "$isecs" "$(cmdline "${DEC_INIT[@]}")" dec-init.log "$note"
		write_report
		section "$(code "$(grep -h 'model init' "$LOGS/dec-init.log" | cut -c1-300)")" ""
		texts=$BUNDLE/decoder/texts.txt
		layer=10
		[ "$DEC_LAYERS" != 0 ] && [ "$DEC_LAYERS" -le 10 ] && layer=$((DEC_LAYERS - 1))
		# One line per (embedding, precision): the final embedding runs every block (the 2026-11-27
		# figure, 2,188 tokens/s, on 512 texts), the stored one blocks 0..layer only.
		section "| extraction (layer $layer, -max-tokens 128) | texts | tokens/s | target | peak device memory |" "|---|---:|---:|---:|---:|"
		rows_md=()
		for line in final:fp32:128 stored:fp32:512 stored:tf32:512 stored:bf16:512; do
			IFS=: read -r emb prec n <<<"$line"
			log=dec-extract-$emb-$prec.log
			run_check 7 "store extract -layer $layer -embedding $emb -precision $prec ($n texts)" 60 "$WORK" "$log" \
				"$GA" store extract -model "$DEC_MODEL" -layer "$layer" -device cuda -embedding "$emb" -precision "$prec" \
				-texts "$texts" -max-texts "$n" -max-tokens 128 -batch 2048 -dtype float32 -quiet -out "$WORK/runs/st-$emb-$prec"
			tps=$(grep -o '[0-9]* tokens/s' "$LOGS/$log" | tail -1)
			peak=$(grep -o 'peak device memory [0-9.]* GiB' "$LOGS/$log" | tail -1 | sed 's/peak device memory //')
			rows_md+=("| -embedding $emb -precision $prec | $n | ${tps:-–} | 20,000 tokens/s | ${peak:-–} |")
		done
		section "${rows_md[@]}" ""
		section "$(code "$(grep -h '^extract: ' "$LOGS"/dec-extract-*.log | grep -v 'progress' | cut -c1-300)")" ""
		depth=$DEC_LAYERS
		[ "$depth" = 0 ] && depth=32 # llama2-7b's num_hidden_layers
		blocks8=$(seq -s, 0 $((depth < 8 ? depth - 1 : 7)))
		run_check 7 "decode -blocks 0..7 -joint (target: batch under 60 s)" 60 "$WORK" dec-decode8.log \
			"$GA" decode -model "$DEC_MODEL" -device cuda -blocks "$blocks8" -joint -batches 1 -texts "$texts" -max-texts 200 -observe-dtype bf16 -out "$WORK/runs/dec8"
		section "### decode, 8 blocks" "" "$(code "$(grep -v -e '%|' -e '^ *$' "$LOGS/dec-decode8.log" | tail -12 | cut -c1-300)")" ""
		blocks32=$(seq -s, 0 $((depth - 1)))
		run_check 7 "decode -blocks 0..31 -joint (target: batch under 5 minutes)" 150 "$WORK" dec-decode32.log \
			"$GA" decode -model "$DEC_MODEL" -device cuda -blocks "$blocks32" -joint -batches 1 -texts "$texts" -max-texts 200 -observe-dtype bf16 -out "$WORK/runs/dec32"
		section "### decode, every block" "" "$(code "$(grep -v -e '%|' -e '^ *$' "$LOGS/dec-decode32.log" | tail -12 | cut -c1-300)")" ""
		section "Targets (issue 39, one H100): extraction at layer 10 >= 20,000 tokens/s; decode of 8 blocks jointly under 60 s, of 32 blocks under 5 minutes (the 2026-11-27 H100 run: final fp32 2,188 tokens/s; decode 11.9 s and 48.3 s a batch)." ""
		rm -rf "$DEC_MODEL" "$WORK"/runs/st-* 2>/dev/null
	fi
	write_report
fi

# Failed checks: the end of their logs.
failed=0 notrun=0
for i in "${!C_RESULT[@]}"; do
	case ${C_RESULT[$i]} in
	"not run") notrun=$((notrun + 1)) ;;
	fail | timeout)
		failed=$((failed + 1))
		if [ -n "${C_LOG[$i]}" ] && [ -f "$LOGS/${C_LOG[$i]}" ]; then
			section "## Failed: ${C_NAME[$i]} (end of \`${C_LOG[$i]}\`)" "" "$(log_tail "${C_LOG[$i]}" 40)" ""
		fi
		;;
	esac
done
write_report
echo "run.sh: $([ $GPU = 1 ] && echo GPU || echo CPU-only) run done in $(($(date +%s) - START)) s, $failed failed, $notrun not run (out of time); report $REPORT"
[ $failed -eq 0 ] && [ $notrun -eq 0 ]
