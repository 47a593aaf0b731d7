package cuda

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unsafe"
)

// CUDA graphs for training steps (docs/gpu.md, list item 3). Between BeginStep and the step's
// first host read (the loss download) or EndStep, every stream operation the backend would
// queue (kernel launches, cuBLAS GEMMs, memsets, uploads) is recorded instead, with its exact
// arguments, into a command list; uploads copy their data into page-locked staging memory at
// once. At the end the list is issued: eagerly, command by command, the first time it is seen
// (warm-up: the arena and scratch buffers are sized, cuBLAS has chosen its kernels); captured into
// a graph the second time; and from then on replayed with one cuGraphLaunch when an identical
// list comes again. A graph is keyed by the whole list, so a changed shape, buffer address,
// scalar argument or staging address never replays a stale graph: it is a different list, issued
// eagerly. Recording costs host time per call too (the tape still runs), but far less than a
// driver call: the saving is the 4-13 us each launch and cuBLAS call costs the host.

// GraphMode says whether training steps are recorded and run as CUDA graphs.
type GraphMode int

const (
	// GraphsFromEnv (the zero value) takes the mode from GELOATTACK_CUDA_GRAPHS (off when unset).
	GraphsFromEnv GraphMode = iota
	// GraphsOff queues every call on the stream at once.
	GraphsOff
	// GraphsRecord records each step and issues it command by command at its end: everything of
	// GraphsOn but the capture (the eager reference the GPU tests compare graphs with).
	GraphsRecord
	// GraphsOn records each step, captures a list seen before into a graph and replays it.
	GraphsOn
)

// graphsEnv is the environment variable that asks for graphs: 1|on, record, 0|off.
const graphsEnv = "GELOATTACK_CUDA_GRAPHS"

// String is "off", "record" or "on".
func (m GraphMode) String() string {
	switch m {
	case GraphsRecord:
		return "record"
	case GraphsOn:
		return "on"
	}
	return "off"
}

// ParseGraphMode reads a GELOATTACK_CUDA_GRAPHS value: "", 0 or off; record; 1 or on.
func ParseGraphMode(s string) (GraphMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "0", "off":
		return GraphsOff, nil
	case "record":
		return GraphsRecord, nil
	case "1", "on":
		return GraphsOn, nil
	}
	return GraphsOff, fmt.Errorf("%s=%q: want 1 (on), record or 0 (off)", graphsEnv, s)
}

// graphModeFromEnv is GELOATTACK_CUDA_GRAPHS's mode.
func graphModeFromEnv() (GraphMode, error) { return ParseGraphMode(os.Getenv(graphsEnv)) }

// cmdKind is the kind of one recorded stream operation.
type cmdKind uint32

const (
	cmdLaunch cmdKind = iota + 1 // args: grid x y z, block x y z, shared bytes, then the kernel's argument slots
	cmdGemm                      // args: cublasGemmStridedBatchedEx's 23 arguments, alpha and beta by value
	cmdMemset                    // args: dst, 32-bit value, count
	cmdUpload                    // args: dst, staging address, bytes, index into cmdList.host
)

// Positions of alpha and beta among a recorded GEMM's arguments (passed by address to cuBLAS).
const (
	gemmArgs  = 23
	gemmAlpha = 6
	gemmBeta  = 15
)

// cmdList is one step's recorded commands. words holds, per command, a header (kind << 32 |
// number of arguments), the function (kernel handle or cuBLAS entry point; 0 for copies and
// memsets) and the arguments: two lists are the same step exactly when their words are equal.
type cmdList struct {
	words []uint64
	names []string         // each command's kernel or call name, for messages (not compared)
	host  []unsafe.Pointer // each upload's staging memory (its address is in words too)
	hash  uint64           // FNV-1a over words
	n     int              // commands
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// reset empties the list, keeping its capacity.
func (l *cmdList) reset() {
	l.words, l.names, l.host = l.words[:0], l.names[:0], l.host[:0]
	l.hash, l.n = fnvOffset, 0
}

// word appends one word.
func (l *cmdList) word(w uint64) {
	l.words = append(l.words, w)
	l.hash = (l.hash ^ w) * fnvPrime
}

// head starts a command of nargs arguments.
func (l *cmdList) head(kind cmdKind, name string, fn uintptr, nargs int) {
	l.word(uint64(kind)<<32 | uint64(uint32(nargs)))
	l.word(uint64(fn))
	l.names = append(l.names, name)
	l.n++
}

// each calls f for every command in order; it stops at f's first error.
func (l *cmdList) each(f func(i int, kind cmdKind, fn uintptr, args []uint64) error) error {
	for i, w := 0, 0; w < len(l.words); i++ {
		h := l.words[w]
		n := int(uint32(h))
		if err := f(i, cmdKind(h>>32), uintptr(l.words[w+1]), l.words[w+2:w+2+n]); err != nil {
			return err
		}
		w += 2 + n
	}
	return nil
}

// graphDriver is what the step graphs need from the device: issue a list's commands on the
// stream (eagerly, or under capture into an executable graph), launch and free graphs, order the
// host's writes into staging memory after the stream's reads of it, and page-locked memory.
// deviceGraphs is the real one; the tests use a fake.
type graphDriver interface {
	// issue queues every command of l in order.
	issue(l *cmdList) error
	// capture records l's commands into a graph and instantiates it; the stream is not
	// capturing when it returns, and nothing of l has run.
	capture(l *cmdList) (exec uintptr, err error)
	launchGraph(exec uintptr) error
	destroyGraph(exec uintptr)
	// fence marks the stream's current end; waitFence waits until the stream has passed it.
	fence() error
	waitFence() error
	allocHost(bytes int) (unsafe.Pointer, error)
	freeHost(p unsafe.Pointer)
}

// Bounds of the graph cache: executable graphs held (least recently used freed first), lists
// remembered as seen once, and capture failures in a row before graphs turn off.
const (
	maxGraphs       = 32
	maxSeen         = 256
	maxCaptureFails = 3
)

// graphEntry is one executable graph and the list it was captured from.
type graphEntry struct {
	words []uint64
	hash  uint64
	exec  uintptr
	used  int64 // the step that last launched it
}

// GraphStats says what the step graphs did (Backend.GraphStats).
type GraphStats struct {
	// Mode is the mode in force: "off", "record" or "on".
	Mode string
	// Off says why graphs were turned off after being asked for ("" otherwise).
	Off string
	// Steps counts recorded steps; Eager those issued command by command (first sightings,
	// lists whose capture failed, mode record), Captured those captured into a new graph and
	// launched, Replayed those launched from a cached graph.
	Steps, Eager, Captured, Replayed int64
	// Fallbacks counts captures that failed (their steps ran eagerly).
	Fallbacks int64
	// Commands counts the commands recorded; DriverCalls the driver calls made for them (a
	// replayed step makes one).
	Commands, DriverCalls int64
	// Graphs is the number of executable graphs held now.
	Graphs int
	// Reasons lists each distinct reason for a fallback or for turning graphs off, in order.
	Reasons []string
}

// String is a one-line summary.
func (s GraphStats) String() string {
	out := fmt.Sprintf("cuda graphs %s: %d steps recorded: %d replayed, %d captured, %d eager, %d capture fallbacks; %d commands, %d driver calls; %d graphs held",
		s.Mode, s.Steps, s.Replayed, s.Captured, s.Eager, s.Fallbacks, s.Commands, s.DriverCalls, s.Graphs)
	if s.Off != "" {
		out += "; off: " + s.Off
	}
	return out
}

// stepGraphs records steps and keeps their graphs (see the comment at the top of this file).
type stepGraphs struct {
	mode   GraphMode
	drv    graphDriver
	log    io.Writer // one line per new reason; nil: silent
	active bool      // recording a step
	list   cmdList
	stage  staging
	// seen counts eager issues of each list hash (the warm-up before a capture).
	seen map[uint64]int
	// cache holds the executable graphs; bad the lists whose capture failed, with why.
	cache      []*graphEntry
	bad        map[uint64]string
	failStreak int
	stats      GraphStats
	off        string
}

// newStepGraphs returns graphs in mode over drv, logging to log (nil: silent).
func newStepGraphs(mode GraphMode, drv graphDriver, log io.Writer) *stepGraphs {
	g := &stepGraphs{mode: mode, drv: drv, log: log, seen: map[uint64]int{}, bad: map[uint64]string{}}
	g.list.reset()
	return g
}

// note records and logs a reason once.
func (g *stepGraphs) note(why string) {
	if slices.Contains(g.stats.Reasons, why) {
		return
	}
	g.stats.Reasons = append(g.stats.Reasons, why)
	if g.log != nil {
		fmt.Fprintf(g.log, "cuda graphs: %s\n", why)
	}
}

// turnOff stops recording for good (steps run as without graphs from the next one on).
func (g *stepGraphs) turnOff(why string) {
	if g.mode == GraphsOff {
		return
	}
	g.mode, g.off = GraphsOff, why
	g.note("off: " + why)
}

// start begins recording a step; false when graphs are off. A step already being recorded goes on.
func (g *stepGraphs) start() bool {
	if g.mode == GraphsOff {
		return false
	}
	if !g.active {
		g.active = true
		g.list.reset()
		g.stage.reset()
	}
	return true
}

// discard drops the step being recorded without issuing it (the backend already failed).
func (g *stepGraphs) discard() { g.active = false }

// recordLaunch records a kernel launch whose arguments are packed in args.
func (g *stepGraphs) recordLaunch(name string, fn uintptr, grid, block Dim3, shared uint32, args []uint64) {
	l := &g.list
	l.head(cmdLaunch, name, fn, 7+len(args))
	for _, v := range []uint32{one(grid.X), one(grid.Y), one(grid.Z), one(block.X), one(block.Y), one(block.Z), shared} {
		l.word(uint64(v))
	}
	for _, a := range args {
		l.word(a)
	}
}

// recordGemm records a cublasGemmStridedBatchedEx call (alpha and beta by value).
func (g *stepGraphs) recordGemm(fn uintptr, args *[gemmArgs]uint64) {
	g.list.head(cmdGemm, "cublasGemmStridedBatchedEx", fn, gemmArgs)
	for _, a := range args {
		g.list.word(a)
	}
}

// recordMemset records setting n 32-bit words at dst to v.
func (g *stepGraphs) recordMemset(dst DevicePtr, v uint32, n int) {
	g.list.head(cmdMemset, "cuMemsetD32Async", 0, 3)
	g.list.word(uint64(dst))
	g.list.word(uint64(v))
	g.list.word(uint64(n))
}

// recordUpload copies src into staging memory now and records its copy to dst. An error (no
// page-locked memory) records nothing: the caller flushes and uploads eagerly.
func (g *stepGraphs) recordUpload(dst DevicePtr, src []float32) error {
	bytes := len(src) * 4
	p, err := g.stage.take(g.drv, bytes)
	if err != nil {
		g.turnOff(fmt.Sprintf("no page-locked staging memory for a step's uploads: %v", err))
		return err
	}
	parallelCopy(unsafe.Slice((*float32)(p), len(src)), src, 8)
	l := &g.list
	l.head(cmdUpload, "cuMemcpyHtoDAsync", 0, 4)
	l.word(uint64(dst))
	l.word(uint64(uintptr(p)))
	l.word(uint64(bytes))
	l.word(uint64(len(l.host)))
	l.host = append(l.host, p)
	return nil
}

// flush ends the step being recorded and runs it: a cached graph of the same list is launched;
// a list issued eagerly before is captured and launched; anything else is issued command by
// command. A failed capture issues the list eagerly (never a partial or stale step).
func (g *stepGraphs) flush() error {
	if !g.active {
		return nil
	}
	g.active = false
	l := &g.list
	if l.n == 0 {
		return nil
	}
	g.stats.Steps++
	g.stats.Commands += int64(l.n)
	defer g.fenceAfter()
	if e := g.lookup(l); e != nil {
		e.used = g.stats.Steps
		g.stats.Replayed++
		g.stats.DriverCalls++
		return g.drv.launchGraph(e.exec)
	}
	if g.mode == GraphsOn && g.seen[l.hash] > 0 && g.bad[l.hash] == "" {
		exec, err := g.drv.capture(l)
		if err == nil {
			g.failStreak = 0
			g.keep(&graphEntry{words: slices.Clone(l.words), hash: l.hash, exec: exec, used: g.stats.Steps})
			g.stats.Captured++
			g.stats.DriverCalls++
			return g.drv.launchGraph(exec)
		}
		g.stats.Fallbacks++
		why := fmt.Sprintf("capture failed, the step ran eagerly: %v", err)
		g.bad[l.hash] = why
		g.note(why)
		if g.failStreak++; g.failStreak >= maxCaptureFails {
			g.turnOff(fmt.Sprintf("%d captures in a row failed", g.failStreak))
		}
	}
	if len(g.seen) >= maxSeen {
		clear(g.seen)
	}
	g.seen[l.hash]++
	g.stats.Eager++
	g.stats.DriverCalls += int64(l.n)
	return g.drv.issue(l)
}

// fenceAfter marks the end of a flushed step, so that the next step's staging writes wait for
// its copies.
func (g *stepGraphs) fenceAfter() {
	if err := g.drv.fence(); err != nil {
		g.turnOff(fmt.Sprintf("cannot order staging writes after the stream: %v", err))
	}
}

// lookup returns the cached graph of a list equal to l, or nil.
func (g *stepGraphs) lookup(l *cmdList) *graphEntry {
	for _, e := range g.cache {
		if e.hash == l.hash && slices.Equal(e.words, l.words) {
			return e
		}
	}
	return nil
}

// keep adds e to the cache, freeing the least recently used graph when it is full.
func (g *stepGraphs) keep(e *graphEntry) {
	if len(g.cache) >= maxGraphs {
		lru := 0
		for i, c := range g.cache {
			if c.used < g.cache[lru].used {
				lru = i
			}
		}
		g.drv.destroyGraph(g.cache[lru].exec)
		g.cache = slices.Delete(g.cache, lru, lru+1)
	}
	g.cache = append(g.cache, e)
}

// Stats returns the counts so far.
func (g *stepGraphs) Stats() GraphStats {
	s := g.stats
	s.Mode, s.Off, s.Graphs = g.mode.String(), g.off, len(g.cache)
	s.Reasons = slices.Clone(s.Reasons)
	return s
}

// close frees every graph and the staging memory (after the stream has finished with them).
func (g *stepGraphs) close() {
	for _, e := range g.cache {
		g.drv.destroyGraph(e.exec)
	}
	g.cache = nil
	g.stage.free(g.drv)
	g.active = false
}

// staging is page-locked host memory for recorded uploads, in chunks kept until Close (graphs
// read their uploads from it). Each step takes from the start again, so a step whose uploads
// have the same sizes as an earlier one gets the same addresses, and its list can match.
type staging struct {
	chunks []pinnedChunk
	cur    int // chunk being filled
	used   int // bytes used in chunks[cur]
	waited bool
}

type pinnedChunk struct {
	p unsafe.Pointer
	n int
}

// Staging chunks hold at least pinnedChunkBytes; takes are stageAlign-aligned.
const (
	pinnedChunkBytes = 32 << 20
	stageAlign       = 256
)

// reset starts a step.
func (s *staging) reset() { s.cur, s.used, s.waited = 0, 0, false }

// take returns n bytes of staging memory, waiting first (once a step) for the stream to finish
// reading what the previous step put there.
func (s *staging) take(drv graphDriver, n int) (unsafe.Pointer, error) {
	if !s.waited {
		if err := drv.waitFence(); err != nil {
			return nil, err
		}
		s.waited = true
	}
	n = (max(n, 1) + stageAlign - 1) / stageAlign * stageAlign
	for s.cur < len(s.chunks) {
		c := s.chunks[s.cur]
		if s.used+n <= c.n {
			p := unsafe.Add(c.p, s.used)
			s.used += n
			return p, nil
		}
		s.cur++
		s.used = 0
	}
	size := max(n, pinnedChunkBytes)
	p, err := drv.allocHost(size)
	if err != nil {
		return nil, fmt.Errorf("page-locked %d MiB: %w", size>>20, err)
	}
	s.chunks = append(s.chunks, pinnedChunk{p: p, n: size})
	s.cur, s.used = len(s.chunks)-1, n
	return p, nil
}

// free releases every chunk.
func (s *staging) free(drv graphDriver) {
	for _, c := range s.chunks {
		drv.freeHost(c.p)
	}
	s.chunks = nil
	s.reset()
}
