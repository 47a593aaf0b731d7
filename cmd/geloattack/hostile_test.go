// The hostile-input suite (issue 15) runs the geloattack binary on inputs a careless or malicious
// user could hand it and checks that every one is refused cleanly:
//
//   - run configs: empty or comment-only files, binary garbage, YAML syntax errors, unknown and
//     duplicate keys, wrong types, NaN, Inf, negative, zero and huge values for the numeric fields,
//     and sizes that would need more memory than any machine has;
//   - command lines: no arguments, unknown commands and flags, flags with bad or non-positive
//     values, missing files, a directory where a file is expected;
//   - stores: tokens.arrow and texts.arrow truncated at every section boundary of the Arrow IPC
//     file (magic, schema message, record batch metadata and body, end-of-stream marker, footer,
//     footer length, trailing magic), corrupted meta.json, flipped bytes and NaN values;
//   - checkpoints: truncated at every section boundary of the safetensors layout (header length,
//     JSON header, data), flipped low-order data bytes, NaN weights and bit flips at seeded random
//     offsets, through eval -ckpt and train -resume;
//   - sweep files and sweep directories: bad axes, empty and 10^10-cell grids, unknown fields,
//     non-string keys, report on a directory that holds no sweep;
//   - inputs that never end or expand without bound: /dev/zero as a config or base_config, YAML
//     alias bombs;
//   - two trainings started at once in one run directory.
//
// Each case runs the binary (built once, with go build) in a fresh directory, with a 20 s timeout,
// a 4 GB address-space limit and a 1 GiB file-size limit, at most two at a time, and asserts a
// non-zero exit status, an error message naming the file and the key, flag or field at fault, no
// panic or stack trace, no raw control bytes, and that no file that existed before the command was
// changed or removed. A failing case says why in the first line of its report.
//
//	go test ./cmd/geloattack -run TestHostileInputs -v
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// hostileTimeout bounds every command: a refusal is expected within a second or two, so a
	// command still running after this is a failure (it started the work it should have refused).
	hostileTimeout = 20 * time.Second
	// hostileMemory caps each command's address space, so that a case that allocates without
	// bound fails instead of exhausting the machine.
	hostileMemory = 4_000_000_000
	// hostileFileSize caps the size of each file a command writes, so that a case that writes
	// without bound fails instead of filling the disk.
	hostileFileSize = 1 << 30
	// hostileParallel is how many commands run at once.
	hostileParallel = 2
)

// Names of the inputs a case works on, relative to its directory (the command's working
// directory). They are distinctive so that an output naming them is easy to recognise.
const (
	hostileCfg       = "hostile.yaml"
	hostileSweepFile = "hostile-sweep.yaml"
	victimStore      = "victim-store"
	victimRun        = "victim-run"
	victimCkpt       = "ckpt-6.safetensors" // the latest checkpoint of the fixture run
	victimPrevCkpt   = "ckpt-3.safetensors" // the one before it
)

// hostileBaseConfig trains in well under a second: 60 synthetic texts of width 16 and a one-layer
// h8 model. Every leaf is on its own line so that cfgWith can edit it.
const hostileBaseConfig = `name: tiny
seed: 7
store:
  synth:
    texts: 60
    min_tokens: 8
    max_tokens: 16
    d: 16
    e: 8
sampler:
  positives: [2, 3]
  tokens_per_text: 4
  shield_frac: 0.25
model:
  task: retrieval
  hidden: 8
  layers: 1
  heads: 2
  mlp_hidden: 16
train:
  steps: 6
  batch_size: 4
  warmup_steps: 1
  log_every: 2
  eval_every: 3
  eval_batches: 1
  ckpt_every: 3
  keep_ckpts: 2
  workers: 1
  prefetch: 1
eval:
  batches: 1
`

// hostileCase is one row of the table.
type hostileCase struct {
	name string
	// args is the command line after the binary's name, run in the case's directory.
	args []string
	// setup writes the inputs into dir before the command runs; every file it leaves there must
	// be unchanged afterwards.
	setup func(t *testing.T, fx *hostileFixture, dir string)
	// want are what the output (stdout and stderr) must contain: substrings, alternatives
	// separated by "|", or a regular expression after "re:".
	want []string
	// strict also forbids \r in the output (only \n and \t may appear as control bytes).
	strict bool
	// exec replaces the single run of args (two commands at once, say); it returns the result
	// the common checks apply to.
	exec func(t *testing.T, fx *hostileFixture, dir string) hostileResult
	// recovers allows exit status 0 when check accepts the output: a command may recover from
	// the input (resume from an older checkpoint) provided it says what it skipped and why.
	// Files may then change.
	recovers bool
	// check adds case-specific problems.
	check func(fx *hostileFixture, dir string, r hostileResult) []string
}

// hostileResult is what one command did.
type hostileResult struct {
	code     int // exit status; -1 when killed by a signal
	out      string
	timedOut bool
	signal   string
	elapsed  time.Duration
	pid      int
	// problems are found by a case's exec, reported before the common checks'.
	problems []string
}

// hostileFixture holds the artifacts every case copies from: the binary, a small float32 store
// and a finished six-step run with checkpoints at steps 3 and 6.
type hostileFixture struct {
	bin   string
	env   []string // added to the binary's environment
	store string   // a store directory
	run   string   // a run directory
}

var hostileSlots = make(chan struct{}, hostileParallel)

// TestHostileInputs runs the hostile-input table.
func TestHostileInputs(t *testing.T) {
	start := time.Now()
	fx := buildFixture(t)
	cases := hostileCases()
	if len(cases) < 60 {
		t.Fatalf("only %d cases; the suite needs at least 60", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("duplicate case name %q", c.name)
		}
		seen[c.name] = true
	}
	t.Run("case", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				runHostileCase(t, fx, c)
			})
		}
	})
	t.Logf("%d cases in %s", len(cases), time.Since(start).Round(100*time.Millisecond))
}

func runHostileCase(t *testing.T, fx *hostileFixture, c hostileCase) {
	dir := t.TempDir()
	if c.setup != nil {
		c.setup(t, fx, dir)
	}
	before := hashTree(t, dir)
	var r hostileResult
	if c.exec != nil {
		r = c.exec(t, fx, dir)
	} else {
		r = fx.cmd(dir, c.args...)
	}
	problems := r.problems
	var extra []string
	if c.check != nil {
		extra = c.check(fx, dir, r)
	}
	switch {
	case r.timedOut:
		problems = append(problems, fmt.Sprintf("still running after %s: killed (the input was not refused up front)", hostileTimeout))
	case r.signal != "":
		problems = append(problems, fmt.Sprintf("killed by %s after %s", r.signal, r.elapsed.Round(time.Millisecond)))
	case r.code == 0 && !(c.recovers && len(extra) == 0):
		problems = append(problems, "exit status 0: the input was accepted")
	}
	if m := panicMarker.FindString(r.out); m != "" {
		problems = append(problems, fmt.Sprintf("the output holds %q (a crash, not a refusal)", m))
	}
	msg := errorLines(r.out)
	for _, w := range c.want {
		if !outputHas(msg, w) {
			problems = append(problems, fmt.Sprintf("the output does not name %q", w))
		}
	}
	if b, ok := controlByte(r.out, c.strict); ok {
		problems = append(problems, fmt.Sprintf("the output holds the raw control byte %#02x", b))
	}
	problems = append(problems, extra...)
	if !(c.recovers && r.code == 0) {
		problems = append(problems, changedFiles(dir, before)...)
	}
	t.Logf("exit %d after %s: %s", r.code, r.elapsed.Round(time.Millisecond), outTail(strings.TrimSpace(r.out), 400))
	if len(problems) > 0 {
		t.Errorf("%s\ncommand: geloattack %s (exit %d, %s)\nall problems:\n  %s\noutput (tail):\n%s",
			problems[0], strings.Join(c.args, " "), r.code, r.elapsed.Round(time.Millisecond),
			strings.Join(problems, "\n  "), outTail(r.out, 1500))
	}
}

var panicMarker = regexp.MustCompile(`panic:|goroutine \d+|runtime error|fatal error|\[signal `)

// errorLines are the lines of out that report the error ("geloattack CMD: ...") or the usage,
// which is what must name the file and key: a progress line naming the file does not count.
// Without such lines (a command that was killed or succeeded) it is all of out.
func errorLines(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "geloattack") || strings.HasPrefix(l, "usage:") {
			b.WriteString(l + "\n")
		}
	}
	if b.Len() == 0 {
		return out
	}
	return b.String()
}

// outputHas reports whether out satisfies one want entry.
func outputHas(out, want string) bool {
	if re, ok := strings.CutPrefix(want, "re:"); ok {
		return regexp.MustCompile(re).MatchString(out)
	}
	for _, alt := range strings.Split(want, "|") {
		if strings.Contains(out, alt) {
			return true
		}
	}
	return false
}

// controlByte finds a control byte other than \n and \t (and \r, the progress lines', unless
// strict) or a DEL.
func controlByte(out string, strict bool) (byte, bool) {
	for i := 0; i < len(out); i++ {
		b := out[i]
		if b == '\n' || b == '\t' || (b == '\r' && !strict) {
			continue
		}
		if b < 0x20 || b == 0x7f {
			return b, true
		}
	}
	return 0, false
}

func outTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// hashTree hashes every regular file under dir by its path relative to dir.
func hashTree(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changedFiles lists the files of before that are gone from dir or hold other content now.
// Only those files are read again: what the command wrote beside them may be large.
func changedFiles(dir string, before map[string][32]byte) []string {
	var out []string
	for p, h := range before {
		b, err := os.ReadFile(filepath.Join(dir, p))
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("the existing file %s was removed or cannot be read: %v", p, err))
		case sha256.Sum256(b) != h:
			out = append(out, fmt.Sprintf("the existing file %s was changed", p))
		}
	}
	sort.Strings(out)
	return out
}

// buildFixture builds the binary, a store and a short run once for all cases.
func buildFixture(t *testing.T) *hostileFixture {
	t.Helper()
	root := t.TempDir()
	fx := &hostileFixture{bin: filepath.Join(root, "geloattack"), store: filepath.Join(root, "store"), run: filepath.Join(root, "run")}
	if goTool, err := exec.LookPath("go"); err == nil {
		if out, err := exec.Command(goTool, "build", "-o", fx.bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	} else {
		// No go tool: the test binary runs main() itself (see TestMain).
		fx.bin, fx.env = os.Args[0], []string{"GELOATTACK_TEST_MAIN=1"}
	}
	if r := fx.cmd(root, "store", "synth", "-out", fx.store, "-texts", "40", "-min-tokens", "4", "-max-tokens", "8",
		"-d", "16", "-e", "8", "-dtype", "float32"); r.code != 0 {
		t.Fatalf("hostileFixture store: exit %d\n%s", r.code, r.out)
	}
	cfg := filepath.Join(root, "tiny.yaml")
	hWriteFile(t, cfg, []byte(hostileBaseConfig))
	if r := fx.cmd(root, "train", "-config", cfg, "-out", fx.run, "-device", "cpu"); r.code != 0 {
		t.Fatalf("hostileFixture run: exit %d\n%s", r.code, r.out)
	}
	for _, f := range []string{victimCkpt, victimPrevCkpt, "latest", "metrics.jsonl"} {
		if _, err := os.Stat(filepath.Join(fx.run, f)); err != nil {
			t.Fatalf("hostileFixture run: %v", err)
		}
	}
	return fx
}

// start prepares the binary with args in dir under the address-space and file-size limits.
func (fx *hostileFixture) start(ctx context.Context, dir string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if p, err := exec.LookPath("prlimit"); err == nil {
		limits := []string{fmt.Sprintf("--as=%d", hostileMemory), fmt.Sprintf("--fsize=%d", hostileFileSize), fx.bin}
		cmd = exec.CommandContext(ctx, p, append(limits, args...)...)
	} else {
		script := fmt.Sprintf(`ulimit -v %d && ulimit -f %d && exec "$0" "$@"`, hostileMemory/1024, hostileFileSize/1024)
		cmd = exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, fx.bin}, args...)...)
	}
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "OPENBLAS_NUM_THREADS=1"), fx.env...)
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// cmd runs the binary with args in dir, one of hostileParallel at a time.
func (fx *hostileFixture) cmd(dir string, args ...string) hostileResult {
	hostileSlots <- struct{}{}
	defer func() { <-hostileSlots }()
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	cmd := fx.start(ctx, dir, args...)
	var out cappedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Start()
	if err != nil {
		return hostileResult{code: -1, out: err.Error()}
	}
	err = cmd.Wait()
	return runResult(ctx, cmd, err, out.String(), time.Since(t0))
}

func runResult(ctx context.Context, cmd *exec.Cmd, err error, out string, elapsed time.Duration) hostileResult {
	r := hostileResult{out: out, elapsed: elapsed, timedOut: ctx.Err() != nil, pid: cmd.Process.Pid}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(interface{ Signaled() bool }); ok && ws.Signaled() && !r.timedOut {
			r.signal = ee.String()
		}
	default:
		r.code = -1
		r.out += "\n" + err.Error()
	}
	return r
}

// cappedBuffer keeps the first 1 MiB written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 1<<20 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ---- inputs -------------------------------------------------------------------------------

func hWriteFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func hReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cfgWith is hostileBaseConfig with the leaves at the given dotted paths set to the given YAML texts
// (pairs of path, value); a leaf the file lacks is added under its section.
func cfgWith(kv ...string) string {
	lines := strings.Split(strings.TrimSuffix(hostileBaseConfig, "\n"), "\n")
	for i := 0; i+1 < len(kv); i += 2 {
		lines = setLeaf(lines, kv[i], kv[i+1])
	}
	return strings.Join(lines, "\n") + "\n"
}

// yamlPath is the dotted path of each line of a block YAML file indented by two spaces.
func yamlPaths(lines []string) []string {
	var stack []string
	out := make([]string, len(lines))
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		depth := (len(l) - len(trimmed)) / 2
		key, _, _ := strings.Cut(trimmed, ":")
		if depth < len(stack) {
			stack = stack[:depth]
		}
		stack = append(stack, key)
		out[i] = strings.Join(stack, ".")
	}
	return out
}

func setLeaf(lines []string, path, value string) []string {
	paths := yamlPaths(lines)
	for i, p := range paths {
		if p == path {
			indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " "))]
			key := path[strings.LastIndexByte(path, '.')+1:]
			lines[i] = indent + key + ": " + value
			return lines
		}
	}
	parent, key := "", path
	if j := strings.LastIndexByte(path, '.'); j >= 0 {
		parent, key = path[:j], path[j+1:]
	}
	depth := strings.Count(path, ".")
	leaf := strings.Repeat("  ", depth) + key + ": " + value
	if parent == "" {
		return append(lines, leaf)
	}
	for i, p := range paths {
		if p == parent {
			return append(lines[:i+1], append([]string{leaf}, lines[i+1:]...)...)
		}
	}
	// The section is missing too: add it, then the leaf.
	lines = setLeaf(lines, parent, "")
	lines[len(lines)-1] = strings.TrimSuffix(lines[len(lines)-1], " ")
	return append(lines, leaf)
}

// withConfig writes src as the case's run config.
func withConfig(src string) func(t *testing.T, fx *hostileFixture, dir string) {
	return func(t *testing.T, fx *hostileFixture, dir string) {
		hWriteFile(t, filepath.Join(dir, hostileCfg), []byte(src))
	}
}

// withSweep writes src as the case's sweep file.
func withSweep(src string) func(t *testing.T, fx *hostileFixture, dir string) {
	return func(t *testing.T, fx *hostileFixture, dir string) {
		hWriteFile(t, filepath.Join(dir, hostileSweepFile), []byte(src))
	}
}

// hostileSweep is a sweep file on hostileBaseConfig with the given axes/cells text appended.
func hostileSweep(rest string) string {
	var b strings.Builder
	b.WriteString("name: hostile\nbase:\n")
	for _, l := range strings.Split(strings.TrimSuffix(hostileBaseConfig, "\n"), "\n") {
		if strings.HasPrefix(l, "name:") {
			continue
		}
		b.WriteString("  " + l + "\n")
	}
	b.WriteString(rest)
	return b.String()
}

func hCopyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// withStore copies the hostileFixture store to victimStore and applies edit to it.
func withStore(edit func(t *testing.T, dir string)) func(t *testing.T, fx *hostileFixture, dir string) {
	return func(t *testing.T, fx *hostileFixture, dir string) {
		s := filepath.Join(dir, victimStore)
		hCopyDir(t, fx.store, s)
		if edit != nil {
			edit(t, s)
		}
	}
}

// withRun copies the hostileFixture run to victimRun and applies edit to it.
func withRun(edit func(t *testing.T, run string)) func(t *testing.T, fx *hostileFixture, dir string) {
	return func(t *testing.T, fx *hostileFixture, dir string) {
		r := filepath.Join(dir, victimRun)
		hCopyDir(t, fx.run, r)
		if edit != nil {
			edit(t, r)
		}
	}
}

// setups runs several setups in order.
func setups(fns ...func(t *testing.T, fx *hostileFixture, dir string)) func(t *testing.T, fx *hostileFixture, dir string) {
	return func(t *testing.T, fx *hostileFixture, dir string) {
		for _, f := range fns {
			f(t, fx, dir)
		}
	}
}

// editIn rewrites one file of a directory.
func editIn(name string, fn func(t *testing.T, b []byte) []byte) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, name)
		hWriteFile(t, p, fn(t, hReadFile(t, p)))
	}
}

// ---- Arrow IPC sections -------------------------------------------------------------------

// arrowSections are the offsets where the sections of an Arrow IPC file end, by name: the
// places a file can be cut between two of its parts (and a few inside a part).
func arrowSections(t *testing.T, b []byte) map[string]int {
	t.Helper()
	le32 := func(o int) int { return int(int32(binary.LittleEndian.Uint32(b[o:]))) }
	s := map[string]int{"empty": 0, "inside leading magic": 3, "leading magic": 6, "magic padding": 8}
	o := 8
	for i := 0; ; i++ {
		if le32(o) != -1 {
			t.Fatalf("arrow: no continuation marker at %d", o)
		}
		metaLen := le32(o + 4)
		if metaLen == 0 { // end-of-stream marker
			s["end-of-stream marker"] = o + 8
			break
		}
		body := int(messageBodyLength(t, b[o+8:o+8+metaLen]))
		name := "schema message"
		if i > 0 {
			name = fmt.Sprintf("batch %d", i-1)
		}
		s[name+" continuation"] = o + 4
		s[name+" length"] = o + 8
		s[name+" metadata"] = o + 8 + metaLen
		if body > 0 {
			s[name+" half body"] = o + 8 + metaLen + body/2
			s[name+" body"] = o + 8 + metaLen + body
		}
		o += 8 + metaLen + body
	}
	footerLen := le32(len(b) - 10)
	s["half footer"] = len(b) - 10 - footerLen/2
	s["footer"] = len(b) - 10
	s["footer length"] = len(b) - 6
	s["inside trailing magic"] = len(b) - 3
	return s
}

// fbField is the position of field i of the flatbuffer table at tab, or false when absent.
func fbField(b []byte, tab, i int) (int, bool) {
	vt := tab - int(int32(binary.LittleEndian.Uint32(b[tab:])))
	vtLen := int(binary.LittleEndian.Uint16(b[vt:]))
	slot := 4 + 2*i
	if slot+2 > vtLen {
		return 0, false
	}
	off := int(binary.LittleEndian.Uint16(b[vt+slot:]))
	return tab + off, off != 0
}

// messageBodyLength reads Message.bodyLength (field 3) of a flatbuffer Message.
func messageBodyLength(t *testing.T, msg []byte) int64 {
	t.Helper()
	root := int(binary.LittleEndian.Uint32(msg))
	p, ok := fbField(msg, root, 3)
	if !ok {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(msg[p:]))
}

// lastBuffer is the absolute offset and length of the last buffer of the first record batch
// (the embedding values: the last column of setups store files).
func lastBuffer(t *testing.T, b []byte) (int, int) {
	t.Helper()
	le32 := func(o int) int { return int(int32(binary.LittleEndian.Uint32(b[o:]))) }
	o := 8
	o += 8 + le32(o+4) // the schema message has no body
	metaLen := le32(o + 4)
	msg := b[o+8 : o+8+metaLen]
	root := int(binary.LittleEndian.Uint32(msg))
	hp, ok := fbField(msg, root, 2) // Message.header
	if !ok {
		t.Fatal("arrow: record batch without header")
	}
	rb := hp + int(binary.LittleEndian.Uint32(msg[hp:]))
	bp, ok := fbField(msg, rb, 2) // RecordBatch.buffers
	if !ok {
		t.Fatal("arrow: record batch without buffers")
	}
	vec := bp + int(binary.LittleEndian.Uint32(msg[bp:]))
	n := int(binary.LittleEndian.Uint32(msg[vec:]))
	last := msg[vec+4+16*(n-1):]
	off, length := int(binary.LittleEndian.Uint64(last)), int(binary.LittleEndian.Uint64(last[8:]))
	return o + 8 + metaLen + off, length
}

// truncateAt cuts a store file at one of its named sections.
func truncateAt(file, section string) func(t *testing.T, dir string) {
	return editIn(file, func(t *testing.T, b []byte) []byte {
		at, ok := arrowSections(t, b)[section]
		if !ok {
			t.Fatalf("%s has no section %q", file, section)
		}
		if at >= len(b) {
			t.Fatalf("%s: section %q ends the file", file, section)
		}
		return b[:at]
	})
}

// storeEmbedding edits the first float32 embedding value of a store file's first batch.
func storeEmbedding(file string, fn func(v []byte)) func(t *testing.T, dir string) {
	return editIn(file, func(t *testing.T, b []byte) []byte {
		off, n := lastBuffer(t, b)
		if n < 16 {
			t.Fatalf("%s: embedding buffer of %d bytes", file, n)
		}
		fn(b[off : off+n])
		return b
	})
}

// flipLowBytes flips the lowest mantissa bit of the first four float32 values: a change no
// format check can see, only a checksum.
func flipLowBytes(v []byte) {
	for i := 0; i < 4; i++ {
		v[4*i] ^= 1
	}
}

func putNaN(v []byte) { binary.LittleEndian.PutUint32(v, math.Float32bits(float32(math.NaN()))) }

// flipRandomBits flips one bit at each of n offsets drawn with seed.
func flipRandomBits(seed uint64, n int) func(t *testing.T, b []byte) []byte {
	return func(t *testing.T, b []byte) []byte {
		r := rand.New(rand.NewPCG(seed, 15))
		for i := 0; i < n; i++ {
			b[r.IntN(len(b))] ^= 1 << r.IntN(8)
		}
		return b
	}
}

// editMeta applies fn to the decoded meta.json and writes it back.
func editMeta(fn func(m map[string]any)) func(t *testing.T, dir string) {
	return editIn("meta.json", func(t *testing.T, b []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		fn(m)
		out, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
}

// ---- safetensors sections -----------------------------------------------------------------

// ckptLayout is the header length and the data range of the first weight (not an optimizer
// moment, sorted by name) of a checkpoint.
func ckptLayout(t *testing.T, b []byte) (headerLen, weightOff, weightLen int) {
	t.Helper()
	headerLen = int(binary.LittleEndian.Uint64(b))
	var h map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+headerLen], &h); err != nil {
		t.Fatalf("checkpoint header: %v", err)
	}
	names := make([]string, 0, len(h))
	for n := range h {
		if n != "__metadata__" && !strings.HasPrefix(n, "adam.") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		var e struct {
			DataOffsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(h[n], &e); err != nil {
			t.Fatal(err)
		}
		if e.DataOffsets[1]-e.DataOffsets[0] >= 16 {
			return headerLen, 8 + headerLen + e.DataOffsets[0], e.DataOffsets[1] - e.DataOffsets[0]
		}
	}
	t.Fatal("checkpoint: no weight of 4 values or more")
	return
}

// ckptSections are the places a checkpoint can be cut.
func ckptSections(t *testing.T, b []byte) map[string]int {
	n, _, _ := ckptLayout(t, b)
	return map[string]int{
		"empty":              0,
		"half header length": 4,
		"header length":      8,
		"half header":        8 + n/2,
		"header":             8 + n,
		"half data":          8 + n + (len(b)-8-n)/2,
		"last byte":          len(b) - 1,
	}
}

// ckptEdit rewrites a checkpoint of the copied run.
func ckptEdit(name string, fn func(t *testing.T, b []byte) []byte) func(t *testing.T, run string) {
	return editIn(name, fn)
}

func ckptTruncate(section string) func(t *testing.T, b []byte) []byte {
	return func(t *testing.T, b []byte) []byte { return b[:ckptSections(t, b)[section]] }
}

func ckptWeight(fn func(v []byte)) func(t *testing.T, b []byte) []byte {
	return func(t *testing.T, b []byte) []byte {
		_, off, n := ckptLayout(t, b)
		fn(b[off : off+n])
		return b
	}
}

// ---- the table ----------------------------------------------------------------------------

// trainCfg is `train -config hostile.yaml -out victim-run -device cpu`.
var trainCfg = []string{"train", "-config", hostileCfg, "-out", victimRun, "-device", "cpu"}

// hugeWant is what a value that asks for more memory than a machine has must be refused with: the
// file, and the key or a pre-flight estimate.
func hugeWant(key string) []string { return []string{hostileCfg, key + "|GiB"} }

// trainWith is trainCfg followed by more flags.
func trainWith(flags ...string) []string { return slices.Concat(trainCfg, flags) }

func hostileCases() []hostileCase {
	var cases []hostileCase
	add := func(c ...hostileCase) { cases = append(cases, c...) }
	sweepArgs := []string{"sweep", "-config", hostileSweepFile, "-out", "victim-sweep", "-device", "cpu"}

	// Issue case 1: two trainings into one run directory at once.
	add(hostileCase{name: "concurrent train in one run directory", setup: withConfig(cfgWith("train.steps", strconv.Itoa(concurrentSteps), "train.ckpt_every", "50",
		"train.log_every", "10", "train.eval_every", "1000")), exec: trainTwiceAtOnce, want: []string{"pid"}})

	// Issue case 2: sizes without an upper bound.
	add(
		hostileCase{name: "model.hidden 10000000", setup: withConfig(cfgWith("model.hidden", "10000000")), args: trainCfg, want: hugeWant("model.hidden")},
		hostileCase{name: "model.hidden 100000", setup: withConfig(cfgWith("model.hidden", "100000")), args: trainCfg, want: hugeWant("model.hidden")},
		hostileCase{name: "train.batch_size 1000000000", setup: withConfig(cfgWith("train.batch_size", "1000000000")), args: trainCfg, want: hugeWant("train.batch_size")},
		hostileCase{name: "store.synth.texts 1000000000", setup: withConfig(cfgWith("store.synth.texts", "1000000000")), args: trainCfg, want: hugeWant("store.synth.texts")},
		hostileCase{name: "model.mlp_hidden 100000000", setup: withConfig(cfgWith("model.mlp_hidden", "100000000")), args: trainCfg, want: hugeWant("model.mlp_hidden")},
		hostileCase{name: "model.layers 1000000", setup: withConfig(cfgWith("model.layers", "1000000")), args: trainCfg, want: hugeWant("model.layers")},
		hostileCase{name: "sampler.tokens_per_text 1000000000", setup: withConfig(cfgWith("sampler.tokens_per_text", "1000000000")), args: trainCfg, want: hugeWant("sampler.tokens_per_text")},
		hostileCase{name: "sampler.shield_rows 1000000000", setup: withConfig(cfgWith("sampler.shield_rows", "1000000000")), args: trainCfg, want: hugeWant("sampler.shield_rows")},
		hostileCase{name: "store.synth.max_tokens 1000000000", setup: withConfig(cfgWith("store.synth.max_tokens", "1000000000")), args: trainCfg, want: hugeWant("store.synth.max_tokens")},
	)

	// Issue case 3: empty configs and zero or negative values that fell back to defaults.
	add(
		hostileCase{name: "empty config file", setup: withConfig(""), args: trainCfg, want: []string{hostileCfg, "empty"}},
		hostileCase{name: "comment-only config file", setup: withConfig("# nothing here\n# at all\n"), args: trainCfg, want: []string{hostileCfg, "empty"}},
		hostileCase{name: "store.synth.texts 0", setup: withConfig(cfgWith("store.synth.texts", "0")), args: trainCfg, want: []string{hostileCfg, "store.synth.texts"}},
		hostileCase{name: "store.synth.d 0", setup: withConfig(cfgWith("store.synth.d", "0")), args: trainCfg, want: []string{hostileCfg, "store.synth.d"}},
		hostileCase{name: "train -steps -3", setup: withConfig(hostileBaseConfig), args: trainWith("-steps", "-3"), want: []string{"-steps"}},
		hostileCase{name: "train -workers -1", setup: withConfig(hostileBaseConfig), args: trainWith("-workers", "-1"), want: []string{"-workers"}},
		hostileCase{name: "eval -batches -1", setup: withRun(nil), args: []string{"eval", "-batches", "-1", "-device", "cpu", victimRun}, want: []string{"-batches"}},
		hostileCase{name: "eval -batch-size -1", setup: withRun(nil), args: []string{"eval", "-batch-size", "-1", "-device", "cpu", victimRun}, want: []string{"-batch-size"}},
		hostileCase{name: "store synth -texts 0", args: []string{"store", "synth", "-out", victimStore, "-texts", "0", "-d", "16", "-e", "8"}, want: []string{"texts"}},
		hostileCase{name: "store synth -d 0", args: []string{"store", "synth", "-out", victimStore, "-texts", "40", "-d", "0", "-e", "8"}, want: []string{`re:(^|[^a-z])d\b`}},
		hostileCase{name: "store synth -e 0", args: []string{"store", "synth", "-out", victimStore, "-texts", "40", "-d", "16", "-e", "0"}, want: []string{`re:(^|[^a-z])e\b`}},
		hostileCase{name: "store synth -texts -5", args: []string{"store", "synth", "-out", victimStore, "-texts", "-5", "-d", "16", "-e", "8"}, want: []string{"texts"}},
		hostileCase{name: "store synth -min-tokens 0", args: []string{"store", "synth", "-out", victimStore, "-texts", "40", "-d", "16", "-e", "8", "-min-tokens", "0"}, want: []string{"min-tokens|min_tokens|tokens per text"}},
	)

	// Issue case 4: integrity of checkpoints and stores.
	add(
		hostileCase{name: "eval -ckpt with flipped low-order data bytes", setup: withRun(ckptEdit(victimCkpt, ckptWeight(flipLowBytes))),
			args: []string{"eval", "-device", "cpu", "-ckpt", filepath.Join(victimRun, victimCkpt)}, want: []string{victimCkpt}},
		hostileCase{name: "train -resume with flipped low-order data bytes", setup: withRun(ckptEdit(victimCkpt, ckptWeight(flipLowBytes))),
			args: []string{"train", "-resume", "-out", victimRun, "-steps", "8", "-device", "cpu"}, want: []string{victimCkpt},
			recovers: true, check: resumeFallback},
		hostileCase{name: "eval -ckpt with a NaN weight", setup: withRun(ckptEdit(victimCkpt, ckptWeight(putNaN))),
			args: []string{"eval", "-device", "cpu", "-ckpt", filepath.Join(victimRun, victimCkpt)}, want: []string{victimCkpt, "NaN"}},
		hostileCase{name: "train -resume with a NaN weight", setup: withRun(ckptEdit(victimCkpt, ckptWeight(putNaN))),
			args: []string{"train", "-resume", "-out", victimRun, "-steps", "8", "-device", "cpu"}, want: []string{victimCkpt, "NaN"},
			recovers: true, check: resumeFallback},
		hostileCase{name: "store validate with flipped low-order embedding bytes", setup: withStore(storeEmbedding("tokens.arrow", flipLowBytes)),
			args: []string{"store", "validate", "-store", victimStore}, want: []string{victimStore, "tokens.arrow"}},
		hostileCase{name: "store validate with flipped low-order text embedding bytes", setup: withStore(storeEmbedding("texts.arrow", flipLowBytes)),
			args: []string{"store", "validate", "-store", victimStore}, want: []string{victimStore, "texts.arrow"}},
		hostileCase{name: "store validate with a NaN row", setup: withStore(storeEmbedding("tokens.arrow", putNaN)),
			args: []string{"store", "validate", "-store", victimStore}, want: []string{victimStore, "tokens.arrow", "NaN"}},
		hostileCase{name: "store validate with a NaN text embedding", setup: withStore(storeEmbedding("texts.arrow", putNaN)),
			args: []string{"store", "validate", "-store", victimStore}, want: []string{victimStore, "texts.arrow", "NaN"}},
		hostileCase{name: "train on a store with a NaN row", setup: setups(withStore(storeEmbedding("tokens.arrow", putNaN)),
			withConfig(cfgWith("store.path", victimStore))), args: trainCfg, want: []string{victimStore, "tokens.arrow", "NaN"}},
		hostileCase{name: "train on a store with flipped low-order bytes", setup: setups(withStore(storeEmbedding("tokens.arrow", flipLowBytes)),
			withConfig(cfgWith("store.path", victimStore))), args: trainCfg, want: []string{victimStore, "tokens.arrow"}},
	)
	for seed := uint64(1); seed <= 4; seed++ {
		add(hostileCase{name: fmt.Sprintf("eval -ckpt with 3 random bit flips (seed %d)", seed),
			setup: withRun(ckptEdit(victimCkpt, flipRandomBits(seed, 3))),
			args:  []string{"eval", "-device", "cpu", "-ckpt", filepath.Join(victimRun, victimCkpt)}, want: []string{victimCkpt}})
	}
	for seed := uint64(1); seed <= 3; seed++ {
		add(hostileCase{name: fmt.Sprintf("store validate with 3 random bit flips in tokens.arrow (seed %d)", seed),
			setup: withStore(editIn("tokens.arrow", flipRandomBits(seed, 3))),
			args:  []string{"store", "validate", "-store", victimStore}, want: []string{victimStore, "tokens.arrow"}})
	}

	// Checkpoints cut at every boundary of the safetensors layout, through eval and resume.
	for _, s := range []string{"empty", "half header length", "header length", "half header", "header", "half data", "last byte"} {
		add(hostileCase{name: "eval -ckpt truncated at " + s, setup: withRun(ckptEdit(victimCkpt, ckptTruncate(s))),
			args: []string{"eval", "-device", "cpu", "-ckpt", filepath.Join(victimRun, victimCkpt)}, want: []string{victimCkpt}})
	}
	for _, s := range []string{"header length", "half data"} {
		add(hostileCase{name: "train -resume with the latest checkpoint truncated at " + s, setup: withRun(ckptEdit(victimCkpt, ckptTruncate(s))),
			args: []string{"train", "-resume", "-out", victimRun, "-steps", "8", "-device", "cpu"}, want: []string{victimCkpt},
			recovers: true, check: resumeFallback})
	}

	// Stores cut at every section boundary of their Arrow IPC files.
	for _, file := range []string{"tokens.arrow", "texts.arrow"} {
		for _, s := range []string{"empty", "inside leading magic", "leading magic", "magic padding", "schema message continuation",
			"schema message length", "schema message metadata", "batch 0 continuation", "batch 0 length", "batch 0 metadata",
			"batch 0 half body", "batch 0 body", "end-of-stream marker", "half footer", "footer", "footer length", "inside trailing magic"} {
			add(hostileCase{name: fmt.Sprintf("store validate with %s truncated at %s", file, s), setup: withStore(truncateAt(file, s)),
				args: []string{"store", "validate", "-store", victimStore}, want: []string{victimStore, file}})
		}
	}

	// Corrupt meta.json.
	metaCase := func(name string, edit func(t *testing.T, dir string), want ...string) hostileCase {
		return hostileCase{name: "store validate with meta.json " + name, setup: withStore(edit),
			args: []string{"store", "validate", "-store", victimStore}, want: append([]string{victimStore, "meta.json"}, want...)}
	}
	// A width or dtype in meta.json that disagrees with the Arrow schemas may be reported against
	// either file.
	mismatch := func(c hostileCase) hostileCase {
		c.want[1] = "meta.json|tokens.arrow|texts.arrow"
		return c
	}
	add(
		metaCase("truncated", editIn("meta.json", func(t *testing.T, b []byte) []byte { return b[:len(b)/2] })),
		metaCase("empty", editIn("meta.json", func(t *testing.T, b []byte) []byte { return nil })),
		metaCase("of binary garbage", editIn("meta.json", func(t *testing.T, b []byte) []byte { return []byte("\x00\x1b[2J\xff\xfe\x07") })),
		metaCase("missing", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "meta.json")) }),
		mismatch(metaCase("with a wrong d", editMeta(func(m map[string]any) { m["d"] = 17 }), `re:\bd\b|embedding`)),
		mismatch(metaCase("with a wrong e", editMeta(func(m map[string]any) { m["e"] = 9 }), `re:\be\b|embedding`)),
		metaCase("with d 0", editMeta(func(m map[string]any) { m["d"] = 0 }), `re:\bd\b`),
		metaCase("with d 2^40", editMeta(func(m map[string]any) { m["d"] = 1 << 40 }), `re:\bd\b`),
		metaCase("with num_texts off by one", editMeta(func(m map[string]any) { m["num_texts"] = m["num_texts"].(float64) + 1 }), "num_texts"),
		metaCase("with num_tokens off by one", editMeta(func(m map[string]any) { m["num_tokens"] = m["num_tokens"].(float64) - 1 }), "num_tokens"),
		metaCase("with negative num_tokens", editMeta(func(m map[string]any) { m["num_tokens"] = -5 }), "num_tokens"),
		metaCase("with dtype float64", editMeta(func(m map[string]any) { m["dtype"] = "float64" }), "dtype"),
		mismatch(metaCase("with dtype float16", editMeta(func(m map[string]any) { m["dtype"] = "float16" }), "dtype|float16")),
		metaCase("with format_version 2", editMeta(func(m map[string]any) { m["format_version"] = 2 }), "format_version"),
		metaCase("with an unknown field", editMeta(func(m map[string]any) { m["checksum_typo"] = 1 }), "checksum_typo"),
		metaCase("with a string d", editMeta(func(m map[string]any) { m["d"] = "16" }), `re:\bd\b`),
	)

	// Issue case 5: no arguments.
	add(hostileCase{name: "no arguments", args: []string{}, want: []string{"usage"}, check: noRunsDir})
	add(hostileCase{name: "unknown command", args: []string{"frobnicate"}, want: []string{"frobnicate", "usage"},
		check: wantExit(2)})

	// Issue case 6: binary garbage.
	add(
		hostileCase{name: "binary garbage config", setup: withConfig("\x00\x01\x1b[2J\x1b]0;pwned\x07\xff\xfe\x9b31m\x7f garbage"),
			args: trainCfg, want: []string{hostileCfg}, strict: true},
		hostileCase{name: "escape bytes in a config key", setup: withConfig(hostileBaseConfig + "\x1b[31mevil\x1b[0m: 1\n"),
			args: trainCfg, want: []string{hostileCfg}, strict: true},
		hostileCase{name: "escape bytes in a config value", setup: withConfig(cfgWith("name", "\"\\e[31mred\"")),
			args: trainCfg, want: []string{hostileCfg, "name"}, strict: true},
		hostileCase{name: "binary garbage sweep file", setup: withSweep("\x00\x1b[2J\xff\xfe\x07garbage"),
			args: []string{"sweep", "-config", hostileSweepFile, "-out", "victim-sweep", "-device", "cpu"}, want: []string{hostileSweepFile}, strict: true},
		hostileCase{name: "binary garbage checkpoint", setup: func(t *testing.T, fx *hostileFixture, dir string) {
			hWriteFile(t, filepath.Join(dir, victimCkpt), []byte("\x10\x00\x00\x00\x00\x00\x00\x00\x1b[2J\x07\xff\xfe\x00\x00\x00\x00\x00"))
		}, args: []string{"eval", "-device", "cpu", "-ckpt", victimCkpt}, want: []string{victimCkpt}, strict: true},
	)

	// YAML and value errors in run configs: each must name the file and the key.
	cfgCase := func(name, src string, want ...string) hostileCase {
		return hostileCase{name: "config " + name, setup: withConfig(src), args: trainCfg, want: append([]string{hostileCfg}, want...)}
	}
	add(
		cfgCase("syntax error: unclosed flow sequence", cfgWith("sampler.positives", "[2, 3")),
		cfgCase("syntax error: tab indentation", strings.Replace(hostileBaseConfig, "  hidden: 8", "\thidden: 8", 1)),
		cfgCase("syntax error: bad indentation", strings.Replace(hostileBaseConfig, "  hidden: 8", "     hidden: 8", 1)),
		cfgCase("not a mapping", "- a\n- b\n"),
		cfgCase("a scalar", "just a string\n"),
		cfgCase("two documents", hostileBaseConfig+"---\nname: second\n"),
		cfgCase("unknown top-level key", hostileBaseConfig+"modle:\n  hidden: 8\n", "modle"),
		cfgCase("unknown nested key", cfgWith("train.stpes", "6"), "stpes"),
		cfgCase("duplicate key", hostileBaseConfig+"seed: 8\n", "seed"),
		cfgCase("train.steps a word", cfgWith("train.steps", "ten"), "train.steps"),
		cfgCase("train.steps a fraction", cfgWith("train.steps", "2.5"), "train.steps"),
		cfgCase("train.steps 0", cfgWith("train.steps", "0"), "train.steps"),
		cfgCase("train.steps -5", cfgWith("train.steps", "-5"), "train.steps"),
		cfgCase("train.steps overflowing int64", cfgWith("train.steps", "99999999999999999999"), "train.steps"),
		cfgCase("train.steps null", cfgWith("train.steps", "null"), "train.steps"),
		cfgCase("train.lr NaN", cfgWith("train.lr", ".nan"), "train.lr"),
		cfgCase("train.lr Inf", cfgWith("train.lr", ".inf"), "train.lr"),
		cfgCase("train.lr negative", cfgWith("train.lr", "-0.001"), "train.lr"),
		cfgCase("train.lr a list", cfgWith("train.lr", "[1, 2]"), "train.lr"),
		cfgCase("train.beta1 1", cfgWith("train.beta1", "1"), "train.beta1"),
		cfgCase("train.grad_clip negative", cfgWith("train.grad_clip", "-1"), "train.grad_clip"),
		cfgCase("train.batch_size 0", cfgWith("train.batch_size", "0"), "train.batch_size"),
		cfgCase("train.keep_ckpts 0", cfgWith("train.keep_ckpts", "0"), "train.keep_ckpts"),
		cfgCase("model.layers 0", cfgWith("model.layers", "0"), "model.layers"),
		cfgCase("model.heads 0", cfgWith("model.heads", "0"), "model.heads"),
		cfgCase("model.hidden not divisible by heads", cfgWith("model.heads", "3"), "model.heads|model.hidden"),
		cfgCase("model.hidden negative", cfgWith("model.hidden", "-8"), "model.hidden"),
		cfgCase("model.task unknown", cfgWith("model.task", "classify"), "model.task"),
		cfgCase("model.temperature 0", cfgWith("model.temperature", "0"), "model.temperature"),
		cfgCase("model.eps NaN", cfgWith("model.eps", ".nan"), "model.eps"),
		cfgCase("sampler.shield_frac above 1", cfgWith("sampler.shield_frac", "1.5"), "sampler.shield_frac"),
		cfgCase("sampler.shield_scale negative", cfgWith("sampler.shield_scale", "-1"), "sampler.shield_scale"),
		cfgCase("sampler.mix_cond kappa below 1", cfgWith("sampler.mix", "non_orthogonal", "sampler.mix_cond", "0.5"), "sampler.mix_cond"),
		cfgCase("sampler.obs_rows 0", cfgWith("sampler.obs_rows", "0"), "sampler.obs_rows"),
		cfgCase("sampler.obs_rows above 1", cfgWith("sampler.obs_rows", "1.5"), "sampler.obs_rows"),
		cfgCase("sampler.val_frac 1", cfgWith("sampler.val_frac", "1"), "sampler.val_frac"),
		cfgCase("sampler.shield_kind unknown", cfgWith("sampler.shield_kind", "laplace"), "sampler.shield_kind"),
		cfgCase("sampler.positives min above max", cfgWith("sampler.positives", "[3, 2]"), "sampler.positives"),
		cfgCase("sampler.positives 0", cfgWith("sampler.positives", "0"), "sampler.positives"),
		cfgCase("sampler.positives more than the texts", cfgWith("sampler.positives", "100"), "sampler.positives|store.synth.texts"),
		cfgCase("sampler.student_t_df 2", cfgWith("sampler.shield_kind", "student_t", "sampler.student_t_df", "2"), "sampler.student_t_df"),
		cfgCase("eval.tau 0", cfgWith("eval.tau", "0"), "eval.tau"),
		cfgCase("eval.pool_k 1", cfgWith("eval.pool_k", "1"), "eval.pool_k"),
		cfgCase("loss.extra_negatives negative", cfgWith("loss.extra_negatives", "-1"), "loss.extra_negatives"),
		cfgCase("store.synth.d 1", cfgWith("store.synth.d", "1"), "store.synth.d"),
		cfgCase("store.synth.min_tokens above max_tokens", cfgWith("store.synth.min_tokens", "20"), "store.synth.min_tokens|store.synth.max_tokens|store.synth"),
		hostileCase{name: "config store.path missing", setup: withConfig(cfgWith("store.path", "no-such-store")), args: trainCfg, want: []string{"no-such-store"}},
		cfgCase("device gpu", cfgWith("device", "gpu"), "device"),
		cfgCase("precision fp8", cfgWith("precision", "fp8"), "precision"),
		cfgCase("name with a slash", cfgWith("name", "../evil"), "name"),
		cfgCase("seed negative", cfgWith("seed", "-1"), "seed"),
		cfgCase("numeric key", hostileBaseConfig+"0: 1\n", `re:\b0\b`),
		cfgCase("boolean key", hostileBaseConfig+"true: 1\n", "true"),
		cfgCase("null key", hostileBaseConfig+"null: 1\n", "null|~"),
		cfgCase("numeric key in a section", cfgWith("train.8", "1"), `re:\b8\b`),
	)

	// Inputs that expand or never end.
	add(
		hostileCase{name: "config YAML alias bomb in sampler.positives", setup: withConfig(cfgWith("sampler.positives", aliasBomb())), args: trainCfg,
			want: []string{hostileCfg, "sampler.positives"}},
		hostileCase{name: "config YAML alias bomb in name", setup: withConfig(cfgWith("name", aliasBomb())), args: trainCfg, want: []string{hostileCfg, "name"}},
		hostileCase{name: "train -config /dev/zero", args: []string{"train", "-config", "/dev/zero", "-out", victimRun, "-device", "cpu"}, want: []string{"/dev/zero"}},
		hostileCase{name: "sweep base_config /dev/zero", setup: withSweep("base_config: /dev/zero\naxes:\n  seed: [1, 2]\n"),
			args: sweepArgs, want: []string{hostileSweepFile, "/dev/zero|base_config"}},
		hostileCase{name: "sweep grid of 10^10 cells", setup: withSweep(hostileSweep(hugeGrid())), args: sweepArgs, want: []string{hostileSweepFile, "axes|cells"}},
		hostileCase{name: "sweep YAML alias bomb in an axis", setup: withSweep(hostileSweep("axes:\n  seed: " + aliasBomb() + "\n")),
			args: sweepArgs, want: []string{hostileSweepFile, "seed"}},
	)

	// Command lines.
	add(
		hostileCase{name: "train -device gpu", setup: withConfig(hostileBaseConfig), args: []string{"train", "-config", hostileCfg, "-out", victimRun, "-device", "gpu"}, want: []string{"-device", "gpu"}},
		hostileCase{name: "train -precision fp8", setup: withConfig(hostileBaseConfig), args: trainWith("-precision", "fp8"), want: []string{"-precision", "fp8"}},
		hostileCase{name: "train unknown flag", setup: withConfig(hostileBaseConfig), args: trainWith("-nosuchflag"), want: []string{"nosuchflag"}},
		hostileCase{name: "train -steps a word", setup: withConfig(hostileBaseConfig), args: trainWith("-steps", "abc"), want: []string{"-steps"}},
		hostileCase{name: "train positional argument", setup: withConfig(hostileBaseConfig), args: trainWith("stray-arg"), want: []string{"stray-arg"}},
		hostileCase{name: "train -config missing file", args: trainCfg, want: []string{hostileCfg}},
		hostileCase{name: "train -config a directory", setup: func(t *testing.T, fx *hostileFixture, dir string) {
			if err := os.Mkdir(filepath.Join(dir, hostileCfg), 0o755); err != nil {
				t.Fatal(err)
			}
		}, args: trainCfg, want: []string{hostileCfg}},
		hostileCase{name: "train -resume into an empty directory", setup: func(t *testing.T, fx *hostileFixture, dir string) {
			if err := os.Mkdir(filepath.Join(dir, victimRun), 0o755); err != nil {
				t.Fatal(err)
			}
		}, args: []string{"train", "-resume", "-out", victimRun, "-device", "cpu"}, want: []string{victimRun}},
		hostileCase{name: "train over a finished run without -resume", setup: setups(withConfig(hostileBaseConfig), withRun(nil)), args: trainCfg, want: []string{victimRun}},
		hostileCase{name: "eval an empty directory", setup: func(t *testing.T, fx *hostileFixture, dir string) {
			if err := os.Mkdir(filepath.Join(dir, victimRun), 0o755); err != nil {
				t.Fatal(err)
			}
		}, args: []string{"eval", "-device", "cpu", victimRun}, want: []string{victimRun}},
		hostileCase{name: "eval a missing directory", args: []string{"eval", "-device", "cpu", victimRun}, want: []string{victimRun}},
		hostileCase{name: "eval without arguments", args: []string{"eval"}, want: []string{"usage"}},
		hostileCase{name: "eval -ckpt missing file", args: []string{"eval", "-device", "cpu", "-ckpt", victimCkpt}, want: []string{victimCkpt}},
		hostileCase{name: "eval -ckpt a config file", setup: withConfig(hostileBaseConfig), args: []string{"eval", "-device", "cpu", "-ckpt", hostileCfg}, want: []string{hostileCfg}},
		hostileCase{name: "eval with latest naming a missing file", setup: withRun(editIn("latest", func(t *testing.T, b []byte) []byte {
			return []byte("ckpt-999.safetensors\n")
		})), args: []string{"eval", "-device", "cpu", victimRun}, want: []string{victimRun, "ckpt-999.safetensors|latest"}},
		hostileCase{name: "eval with latest escaping the run directory", setup: withRun(editIn("latest", func(t *testing.T, b []byte) []byte {
			return []byte("../../../etc/passwd\n")
		})), args: []string{"eval", "-device", "cpu", victimRun}, want: []string{victimRun, "latest"}},
		hostileCase{name: "eval -device gpu", setup: withRun(nil), args: []string{"eval", "-device", "gpu", victimRun}, want: []string{"-device"}},
		hostileCase{name: "store without subcommand", args: []string{"store"}, want: []string{"usage"}},
		hostileCase{name: "store unknown subcommand", args: []string{"store", "frobnicate"}, want: []string{"frobnicate"}},
		hostileCase{name: "store synth without -out", args: []string{"store", "synth", "-texts", "40", "-d", "16", "-e", "8"}, want: []string{"-out"}},
		hostileCase{name: "store synth over an existing store", setup: withStore(nil),
			args: []string{"store", "synth", "-out", victimStore, "-texts", "40", "-d", "16", "-e", "8"}, want: []string{victimStore}},
		hostileCase{name: "store synth -dtype float64", args: []string{"store", "synth", "-out", victimStore, "-texts", "40", "-d", "16", "-e", "8", "-dtype", "float64"}, want: []string{"dtype", "float64"}},
		hostileCase{name: "store synth -texts 1000000000", args: []string{"store", "synth", "-out", victimStore, "-texts", "1000000000", "-d", "4096", "-e", "8"}, want: []string{"-texts|GiB"}},
		hostileCase{name: "store validate without -store", args: []string{"store", "validate"}, want: []string{"-store"}},
		hostileCase{name: "store validate a missing directory", args: []string{"store", "validate", "-store", victimStore}, want: []string{victimStore}},
		hostileCase{name: "store info on a directory that is no store", setup: func(t *testing.T, fx *hostileFixture, dir string) {
			hWriteFile(t, filepath.Join(dir, victimStore, "notes.txt"), []byte("not a store\n"))
		}, args: []string{"store", "info", "-store", victimStore}, want: []string{victimStore, "meta.json"}},
		hostileCase{name: "store info on a file", setup: withConfig(hostileBaseConfig), args: []string{"store", "info", "-store", hostileCfg}, want: []string{hostileCfg}},
		hostileCase{name: "store info -format xml", setup: withStore(nil), args: []string{"store", "info", "-store", victimStore, "-format", "xml"}, want: []string{"-format", "xml"}},
		hostileCase{name: "store info -sample -5", setup: withStore(nil), args: []string{"store", "info", "-store", victimStore, "-sample", "-5"}, want: []string{"sample"}},
		hostileCase{name: "store info -val-frac 2", setup: withStore(nil), args: []string{"store", "info", "-store", victimStore, "-val-frac", "2"}, want: []string{"-val-frac|val fraction|val_frac"}},
		hostileCase{name: "store import from a missing directory", args: []string{"store", "import", "-in", "no-such-npz", "-out", victimStore}, want: []string{"no-such-npz"}},
		hostileCase{name: "baseline unknown attack", setup: withConfig(hostileBaseConfig), args: []string{"baseline", "-config", hostileCfg, "-attack", "pca"}, want: []string{"pca"}},
		hostileCase{name: "baseline -split test", setup: withConfig(hostileBaseConfig), args: []string{"baseline", "-config", hostileCfg, "-split", "test"}, want: []string{"-split"}},
		hostileCase{name: "baseline -obs-rows 2", setup: withConfig(hostileBaseConfig), args: []string{"baseline", "-config", hostileCfg, "-obs-rows", "2"}, want: []string{"obs_rows|-obs-rows"}},
		hostileCase{name: "baseline -examples -4", setup: withConfig(hostileBaseConfig), args: []string{"baseline", "-config", hostileCfg, "-examples", "-4"}, want: []string{"examples"}},
		hostileCase{name: "baseline -anchors 0", setup: withConfig(hostileBaseConfig), args: []string{"baseline", "-config", hostileCfg, "-attack", "anchor", "-anchors", "0"}, want: []string{"-anchors"}},
		hostileCase{name: "bench -device gpu", args: []string{"bench", "-device", "gpu"}, want: []string{"-device"}},
		hostileCase{name: "bench -what nonsense", args: []string{"bench", "-what", "nonsense", "-device", "cpu"}, want: []string{"-what|nonsense"}},
		hostileCase{name: "bench -steps 0", args: []string{"bench", "-steps", "0", "-device", "cpu"}, want: []string{"-steps"}},
	)

	// Sweep files and sweep directories.
	sweepCase := func(name, src string, want ...string) hostileCase {
		return hostileCase{name: "sweep " + name, setup: withSweep(src), args: sweepArgs, want: append([]string{hostileSweepFile}, want...)}
	}
	add(
		sweepCase("empty file", ""),
		sweepCase("unknown axis field", hostileSweep("axes:\n  sampler.nope: [1, 2]\n"), "sampler.nope"),
		sweepCase("unknown top-level key", hostileSweep("axis:\n  sampler.shield_scale: [1, 2]\n"), "axis"),
		sweepCase("empty grid", hostileSweep("axes: {}\n"), "axes"),
		sweepCase("empty axis", hostileSweep("axes:\n  sampler.shield_scale: []\n"), "sampler.shield_scale"),
		sweepCase("invalid axis value", hostileSweep("axes:\n  sampler.shield_scale: [1, -1]\n"), "sampler.shield_scale"),
		sweepCase("axis value of the wrong type", hostileSweep("axes:\n  train.steps: [six]\n"), "train.steps"),
		sweepCase("duplicate axis", hostileSweep("axes:\n  sampler.shield_scale: [1]\n  sampler.shield_scale: [2]\n"), "sampler.shield_scale"),
		sweepCase("cells not a list", hostileSweep("cells: {sampler.shield_scale: 1}\n"), "cells"),
		sweepCase("no base", "axes:\n  sampler.shield_scale: [1, 2]\n", "base"),
		sweepCase("missing base_config", "base_config: no-such-base.yaml\naxes:\n  sampler.shield_scale: [1, 2]\n", "no-such-base.yaml"),
		sweepCase("base with an invalid value", strings.Replace(hostileSweep("axes:\n  sampler.shield_scale: [1]\n"), "steps: 6", "steps: -6", 1), "train.steps"),
		// Found by sweep.FuzzParse: a base with a non-string key passed validation and crashed the
		// YAML encoder; a control byte in a cell value was echoed raw in the error.
		sweepCase("base with a numeric key", "base:\n  0: 1\naxes:\n  seed: [1]\n", `re:\b0\b|base`),
		sweepCase("base with a boolean key", "base:\n  true: 1\naxes:\n  seed: [1]\n", "true|base"),
		hostileCase{name: "sweep control byte in a cell value", setup: withSweep("base:\ncells:\n- sampler: \x1f0\n"), args: sweepArgs,
			want: []string{hostileSweepFile}, strict: true},
		sweepCase("two cells with the same settings", hostileSweep("axes:\n  seed: [1, 2, 1]\n"), "seed"),
		hostileCase{name: "sweep -shard 5/2", setup: withSweep(hostileSweep("axes:\n  sampler.shield_scale: [1, 2]\n")),
			args: slices.Concat(sweepArgs, []string{"-shard", "5/2"}), want: []string{"-shard"}},
		hostileCase{name: "sweep without -config", args: []string{"sweep", "-device", "cpu"}, want: []string{"-config"}},
		hostileCase{name: "sweep -workers -1", setup: withSweep(hostileSweep("axes:\n  sampler.shield_scale: [1, 2]\n")),
			args: slices.Concat(sweepArgs, []string{"-workers", "-1"}), want: []string{"-workers"}},
		hostileCase{name: "report on a directory that holds no sweep", setup: func(t *testing.T, fx *hostileFixture, dir string) {
			hWriteFile(t, filepath.Join(dir, "not-a-sweep", "notes.txt"), []byte("hello\n"))
		}, args: []string{"report", "not-a-sweep"}, want: []string{"not-a-sweep"}},
		hostileCase{name: "report on a run directory", setup: withRun(nil), args: []string{"report", victimRun}, want: []string{victimRun}},
		hostileCase{name: "report on a missing directory", args: []string{"report", "no-such-sweep"}, want: []string{"no-such-sweep"}},
		hostileCase{name: "report with two missing directories", args: []string{"report", "a", "b"}, want: []string{"a"}},
		hostileCase{name: "report -q with two directories", args: []string{"report", "-q", "a", "b"}, want: []string{"-q and -paper apply to one directory"}},
	)
	add(decoderHostileCases()...)
	return cases
}

// concurrentSteps makes the trainings of the concurrency case last a few seconds, so that they
// overlap even on a loaded machine.
const concurrentSteps = 3000

// aliasBomb is a YAML "billion laughs" as one flow sequence: nine nested levels of anchors, each a
// list of ten aliases of the one before, 10^8 strings in its last element once expanded.
func aliasBomb() string {
	levels := []string{"&a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"}
	for c := 'b'; c <= 'i'; c++ {
		p := "*" + string(c-1)
		levels = append(levels, fmt.Sprintf("&%c [%s]", c, strings.Join([]string{p, p, p, p, p, p, p, p, p, p}, ", ")))
	}
	return "[" + strings.Join(levels, ", ") + "]"
}

// hugeGrid is ten axes of ten valid values each: 10^10 cells.
func hugeGrid() string {
	var b strings.Builder
	b.WriteString("axes:\n")
	for _, path := range []string{"seed", "sampler.seed", "store.synth.seed", "store.synth.model_seed", "train.steps",
		"train.log_every", "train.eval_every", "train.ckpt_every", "train.keep_ckpts", "train.prefetch"} {
		vals := make([]string, 10)
		for i := range vals {
			vals[i] = strconv.Itoa(i + 1)
		}
		fmt.Fprintf(&b, "  %s: [%s]\n", path, strings.Join(vals, ", "))
	}
	return b.String()
}

// trainTwiceAtOnce starts two trainings of hostile.yaml into victim-run together. One must be
// refused, naming the pid of the other, which must finish with every metric line written once.
func trainTwiceAtOnce(t *testing.T, fx *hostileFixture, dir string) hostileResult {
	// Both hold a slot: they must run at the same time.
	for i := 0; i < hostileParallel; i++ {
		hostileSlots <- struct{}{}
	}
	defer func() {
		for i := 0; i < hostileParallel; i++ {
			<-hostileSlots
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	var outs [2]cappedBuffer
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = fx.start(ctx, dir, trainCfg...)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
	}
	t0 := time.Now()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	var rs [2]hostileResult
	var wg sync.WaitGroup
	for i := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmds[i].Wait()
			rs[i] = runResult(ctx, cmds[i], err, outs[i].String(), time.Since(t0))
		}()
	}
	wg.Wait()
	var problems []string
	refused, ok := -1, -1
	switch {
	case rs[0].code != 0 && rs[1].code == 0:
		refused, ok = 0, 1
	case rs[1].code != 0 && rs[0].code == 0:
		refused, ok = 1, 0
	case rs[0].code == 0:
		problems = append(problems, "setups trainings succeeded: neither was refused")
	default:
		problems = append(problems, fmt.Sprintf("setups trainings failed (exit %d and %d)", rs[0].code, rs[1].code))
	}
	if refused >= 0 {
		if pid := strconv.Itoa(rs[ok].pid); !strings.Contains(rs[refused].out, pid) {
			problems = append(problems, fmt.Sprintf("the refusal does not name the lock holder's pid %s", pid))
		}
	}
	if metrics, err := os.ReadFile(filepath.Join(dir, victimRun, "metrics.jsonl")); err != nil {
		problems = append(problems, fmt.Sprintf("metrics.jsonl: %v", err))
	} else if dup := duplicateLine(metrics); dup != "" {
		problems = append(problems, fmt.Sprintf("metrics.jsonl holds a line twice: %s", outTail(dup, 120)))
	} else if !bytes.Contains(metrics, []byte(fmt.Sprintf(`"step":%d`, concurrentSteps))) {
		problems = append(problems, fmt.Sprintf("metrics.jsonl does not reach step %d", concurrentSteps))
	}
	r := rs[0]
	if refused >= 0 {
		r = rs[refused]
	} else {
		r.code = max(r.code, 1) // reported above; keep the common checks from repeating it
	}
	r.out = fmt.Sprintf("[first, pid %d, exit %d]\n%s\n[second, pid %d, exit %d]\n%s",
		rs[0].pid, rs[0].code, rs[0].out, rs[1].pid, rs[1].code, rs[1].out)
	r.problems = problems
	return r
}

func duplicateLine(b []byte) string {
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if seen[l] {
			return l
		}
		seen[l] = true
	}
	return ""
}

// resumeFallback accepts a resume that succeeded only when it said which checkpoint it skipped
// and why, and went on from the one before it.
func resumeFallback(fx *hostileFixture, dir string, r hostileResult) []string {
	if r.code != 0 {
		return nil
	}
	var problems []string
	if !strings.Contains(r.out, victimCkpt) || !regexp.MustCompile(`(?i)skip`).MatchString(r.out) {
		problems = append(problems, fmt.Sprintf("resumed without saying that it skipped %s and why", victimCkpt))
	}
	if !strings.Contains(r.out, victimPrevCkpt) && !strings.Contains(r.out, "step 3") {
		problems = append(problems, fmt.Sprintf("does not say that it resumed from %s", victimPrevCkpt))
	}
	return problems
}

// noRunsDir checks that a bare `geloattack` started no training.
func noRunsDir(fx *hostileFixture, dir string, r hostileResult) []string {
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		return []string{"a training run started: runs/ was created"}
	}
	return nil
}

func wantExit(want int) func(fx *hostileFixture, dir string, r hostileResult) []string {
	return func(fx *hostileFixture, dir string, r hostileResult) []string {
		if r.code != want {
			return []string{fmt.Sprintf("exit status %d, want %d", r.code, want)}
		}
		return nil
	}
}
