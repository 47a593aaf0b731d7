package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// fakeGraphs is graphDriver without a device: it remembers what it was asked to do.
type fakeGraphs struct {
	calls      []string   // "issue", "capture", "launch N", "destroy N", "fence", "wait", in order
	issued     [][]uint64 // the words of each list issued eagerly
	captured   [][]uint64
	captureErr error // when set, every capture fails with it
	next       uintptr
	host       [][]byte // keeps allocHost's memory alive
	fenced     bool
}

func (f *fakeGraphs) issue(l *cmdList) error {
	f.calls = append(f.calls, "issue")
	f.issued = append(f.issued, slices.Clone(l.words))
	return nil
}

func (f *fakeGraphs) capture(l *cmdList) (uintptr, error) {
	f.calls = append(f.calls, "capture")
	if f.captureErr != nil {
		return 0, f.captureErr
	}
	f.captured = append(f.captured, slices.Clone(l.words))
	f.next++
	return f.next, nil
}

func (f *fakeGraphs) launchGraph(exec uintptr) error {
	f.calls = append(f.calls, fmt.Sprintf("launch %d", exec))
	return nil
}

func (f *fakeGraphs) destroyGraph(exec uintptr) {
	f.calls = append(f.calls, fmt.Sprintf("destroy %d", exec))
}

func (f *fakeGraphs) fence() error {
	f.calls = append(f.calls, "fence")
	f.fenced = true
	return nil
}

func (f *fakeGraphs) waitFence() error {
	if f.fenced {
		f.calls = append(f.calls, "wait")
	}
	return nil
}

func (f *fakeGraphs) allocHost(n int) (unsafe.Pointer, error) {
	b := make([]byte, n+stageAlign)
	f.host = append(f.host, b)
	p := unsafe.Pointer(&b[0])
	return unsafe.Add(p, (stageAlign-int(uintptr(p)%stageAlign))%stageAlign), nil
}

func (f *fakeGraphs) freeHost(unsafe.Pointer) {}

// last returns the last n calls.
func (f *fakeGraphs) last(n int) []string { return f.calls[max(0, len(f.calls)-n):] }

// fakeStep describes one step's device work; each field changes one recorded word.
type fakeStep struct {
	kernel    uintptr
	grid      uint32
	ptr       DevicePtr
	scale     float32
	alpha     float32
	gemmC     uint64
	uploadDst DevicePtr
	upload    []float32
	memsetV   uint32
	extra     bool // one more launch at the end
}

func baseStep() fakeStep {
	return fakeStep{kernel: 0x100, grid: 8, ptr: 0x7000, scale: 0.5, alpha: 1, gemmC: 0x9000, uploadDst: 0x5000,
		upload: []float32{1, 2, 3, 4, 5}, memsetV: 0}
}

// run records s on g between start and flush, as a backend's step would.
func (s fakeStep) run(t *testing.T, g *stepGraphs) {
	t.Helper()
	if !g.start() {
		t.Fatal("start refused")
	}
	if err := g.recordUpload(s.uploadDst, s.upload); err != nil {
		t.Fatal(err)
	}
	g.recordMemset(0x6000, s.memsetV, 64)
	vals := make([]uint64, 3)
	if err := packArgs(vals, []any{s.ptr, s.scale, int64(40)}); err != nil {
		t.Fatal(err)
	}
	g.recordLaunch("k", s.kernel, Dim3{X: s.grid}, Dim3{X: 256}, 0, vals)
	var w [gemmArgs]uint64
	for i := range w {
		w[i] = uint64(i + 1)
	}
	w[16] = s.gemmC
	w[gemmAlpha] = uint64(*(*uint32)(unsafe.Pointer(&s.alpha)))
	g.recordGemm(0x200, &w)
	if s.extra {
		g.recordLaunch("k2", 0x101, Dim3{X: 1}, Dim3{X: 32}, 0, vals[:1])
	}
	if err := g.flush(); err != nil {
		t.Fatal(err)
	}
}

// TestGraphWarmUpCaptureReplay: a step is issued eagerly the first time its list is seen,
// captured and launched the second time, and replayed from then on; a replayed step's upload
// sits at the captured staging address with the new step's data (the graph copies from there).
func TestGraphWarmUpCaptureReplay(t *testing.T) {
	f := &fakeGraphs{}
	var log bytes.Buffer
	g := newStepGraphs(GraphsOn, f, &log)
	s := baseStep()
	s.run(t, g)
	if st := g.Stats(); st.Eager != 1 || st.Captured != 0 || len(f.issued) != 1 || st.DriverCalls != 4 {
		t.Fatalf("first step: %+v, calls %v", st, f.calls)
	}
	first := f.issued[0]
	s.upload = []float32{6, 7, 8, 9, 10}
	s.run(t, g)
	if got := f.last(3); !slices.Equal(got, []string{"capture", "launch 1", "fence"}) || !slices.Equal(f.captured[0], first) {
		t.Fatalf("second step: calls %v", f.calls)
	}
	for i, want := range [][]float32{{11, 12, 13, 14, 15}, {16, 17, 18, 19, 20}} {
		s.upload = want
		s.run(t, g)
		if got := f.last(2); !slices.Equal(got, []string{"launch 1", "fence"}) {
			t.Fatalf("step %d: calls %v", 3+i, f.calls)
		}
		if !slices.Equal(g.list.words, first) {
			t.Fatalf("step %d: the list changed with the upload's data", 3+i)
		}
		staged := unsafe.Slice((*float32)(g.list.host[0]), len(want))
		if !slices.Equal(staged, want) {
			t.Fatalf("step %d: staging holds %v, want the step's upload %v", 3+i, staged, want)
		}
	}
	st := g.Stats()
	if st.Steps != 4 || st.Eager != 1 || st.Captured != 1 || st.Replayed != 2 || st.Fallbacks != 0 || st.Graphs != 1 ||
		st.Commands != 16 || st.DriverCalls != 4+1+2 || st.Mode != "on" {
		t.Fatalf("stats %+v", st)
	}
	// Every step after the first waits for the previous one's copies before writing staging.
	if n := strings.Count(strings.Join(f.calls, ","), "wait"); n != 3 {
		t.Fatalf("%d waits for the fence, want 3: %v", n, f.calls)
	}
	if log.Len() != 0 {
		t.Fatalf("logged %q on the happy path", log.String())
	}
	g.close()
	if got := f.last(1); !slices.Equal(got, []string{"destroy 1"}) {
		t.Fatalf("close: %v", f.calls)
	}
}

// TestGraphKeyedByEveryArgument: a step that differs from a captured one in any recorded word
// (kernel, grid, a pointer, a scalar, GEMM alpha or output, upload destination or size, memset
// value, one command more) never launches the captured graph; the captured one still replays.
func TestGraphKeyedByEveryArgument(t *testing.T) {
	f := &fakeGraphs{}
	g := newStepGraphs(GraphsOn, f, nil)
	base := baseStep()
	base.run(t, g)
	base.run(t, g) // captured as graph 1
	variants := map[string]func(*fakeStep){
		"kernel":      func(s *fakeStep) { s.kernel++ },
		"grid":        func(s *fakeStep) { s.grid++ },
		"pointer":     func(s *fakeStep) { s.ptr += 4 },
		"scalar":      func(s *fakeStep) { s.scale = 0.25 },
		"alpha":       func(s *fakeStep) { s.alpha = -1 },
		"gemm output": func(s *fakeStep) { s.gemmC += 256 },
		"upload dst":  func(s *fakeStep) { s.uploadDst += 4 },
		"upload size": func(s *fakeStep) { s.upload = s.upload[:4] },
		"memset":      func(s *fakeStep) { s.memsetV = 1 },
		"extra":       func(s *fakeStep) { s.extra = true },
	}
	for name, change := range variants {
		s := baseStep()
		change(&s)
		before := len(f.issued)
		s.run(t, g)
		if len(f.issued) != before+1 || slices.Contains(f.last(2), "launch 1") {
			t.Fatalf("%s changed: the step was not issued eagerly (calls %v)", name, f.last(4))
		}
		base.run(t, g)
		if got := f.last(2); !slices.Equal(got, []string{"launch 1", "fence"}) {
			t.Fatalf("after the %s variant the base step did not replay: %v", name, f.last(4))
		}
	}
	if st := g.Stats(); st.Replayed != int64(len(variants)) || st.Captured != 1 {
		t.Fatalf("stats %+v", st)
	}
	// A variant seen a second time is captured as a graph of its own, never served by graph 1.
	s := baseStep()
	s.ptr += 4
	s.run(t, g)
	if got := f.last(3); !slices.Equal(got, []string{"capture", "launch 2", "fence"}) {
		t.Fatalf("a variant's second sighting: %v", f.last(4))
	}
}

// TestGraphCaptureFailureFallsBack: a failed capture runs the same step eagerly (nothing is
// skipped), is logged once, is not retried for that list, and three in a row turn graphs off.
func TestGraphCaptureFailureFallsBack(t *testing.T) {
	f := &fakeGraphs{captureErr: errors.New("cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")}
	var log bytes.Buffer
	g := newStepGraphs(GraphsOn, f, &log)
	s := baseStep()
	s.run(t, g)
	s.run(t, g)
	if got := f.last(3); !slices.Equal(got, []string{"capture", "issue", "fence"}) || !slices.Equal(f.issued[1], f.issued[0]) {
		t.Fatalf("failed capture: calls %v", f.calls)
	}
	s.run(t, g)
	if got := f.last(2); !slices.Equal(got, []string{"issue", "fence"}) {
		t.Fatalf("a list whose capture failed was captured again: %v", f.last(4))
	}
	if n := strings.Count(log.String(), "capture failed"); n != 1 {
		t.Fatalf("logged %d capture failures, want 1: %q", n, log.String())
	}
	for i := range 2 { // two more failing lists: three in a row
		v := baseStep()
		v.grid = uint32(100 + i)
		v.run(t, g)
		v.run(t, g)
	}
	st := g.Stats()
	if st.Mode != "off" || st.Fallbacks != 3 || !strings.Contains(st.Off, "3 captures in a row failed") || !strings.Contains(log.String(), "off: ") {
		t.Fatalf("after three failures: %+v, log %q", st, log.String())
	}
	if g.start() {
		t.Fatal("recording started with graphs off")
	}
	if st.Eager != 7 || st.Steps != 7 || st.Captured != 0 {
		t.Fatalf("every step must have run eagerly: %+v", st)
	}
}

// TestGraphRecordModeNeverCaptures: mode record issues every step command by command.
func TestGraphRecordModeNeverCaptures(t *testing.T) {
	f := &fakeGraphs{}
	g := newStepGraphs(GraphsRecord, f, nil)
	for range 4 {
		baseStep().run(t, g)
	}
	if len(f.captured) != 0 || len(f.issued) != 4 || g.Stats().Eager != 4 {
		t.Fatalf("record mode: calls %v", f.calls)
	}
}

// TestGraphCacheEvictsLeastRecentlyUsed: past maxGraphs the least recently launched graph is
// freed, and its list is captured again instead of launching a freed graph.
func TestGraphCacheEvictsLeastRecentlyUsed(t *testing.T) {
	f := &fakeGraphs{}
	g := newStepGraphs(GraphsOn, f, nil)
	step := func(i int) fakeStep { s := baseStep(); s.grid = uint32(1 + i); return s }
	for i := range maxGraphs {
		step(i).run(t, g)
		step(i).run(t, g)
	}
	step(0).run(t, g) // graph 1 replayed: now graph 2 is the least recently used
	step(maxGraphs).run(t, g)
	step(maxGraphs).run(t, g)
	if !slices.Contains(f.calls, "destroy 2") || slices.Contains(f.calls, "destroy 1") || g.Stats().Graphs != maxGraphs {
		t.Fatalf("eviction: %v", f.last(6))
	}
	// An evicted list seen again is captured anew (graph 2 is gone, so it cannot be launched).
	step(1).run(t, g)
	if got := f.last(4); !slices.Equal(got, []string{"capture", "destroy 3", fmt.Sprintf("launch %d", f.next), "fence"}) || f.next != maxGraphs+2 {
		t.Fatalf("an evicted list: %v", f.last(4))
	}
}

// TestStagingAddresses: a step whose uploads have the sizes of an earlier one gets the same
// staging addresses; an upload larger than a chunk gets a chunk of its own; takes are aligned.
func TestStagingAddresses(t *testing.T) {
	f := &fakeGraphs{}
	var s staging
	take := func(n int) uintptr {
		p, err := s.take(f, n)
		if err != nil {
			t.Fatal(err)
		}
		if uintptr(p)%stageAlign != 0 {
			t.Fatalf("take(%d) at %#x: not %d-aligned", n, uintptr(p), stageAlign)
		}
		return uintptr(p)
	}
	sizes := []int{4, 1000, pinnedChunkBytes - 512, 3 * pinnedChunkBytes, 8}
	var first []uintptr
	for _, n := range sizes {
		first = append(first, take(n))
	}
	// 4 and 1000 bytes share chunk 0, the next take does not fit there (chunk 1), the large one
	// gets a chunk of its size (2), and the last does not fit in that full chunk (3).
	if len(s.chunks) != 4 || s.chunks[2].n != 3*pinnedChunkBytes || first[1]-first[0] != stageAlign {
		t.Fatalf("chunks %d (%v)", len(s.chunks), s.chunks)
	}
	s.reset()
	for i, n := range sizes {
		if p := take(n); p != first[i] {
			t.Fatalf("take %d (%d bytes) moved from %#x to %#x", i, n, first[i], p)
		}
	}
	if len(s.chunks) != 4 {
		t.Fatalf("a repeated step allocated: %d chunks", len(s.chunks))
	}
}

// TestParseGraphMode: GELOATTACK_CUDA_GRAPHS's values.
func TestParseGraphMode(t *testing.T) {
	for in, want := range map[string]GraphMode{"": GraphsOff, "0": GraphsOff, "off": GraphsOff, "1": GraphsOn, "ON": GraphsOn, "record": GraphsRecord} {
		if got, err := ParseGraphMode(in); err != nil || got != want {
			t.Errorf("ParseGraphMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseGraphMode("yes"); err == nil || !strings.Contains(err.Error(), graphsEnv) {
		t.Errorf("ParseGraphMode(yes): %v", err)
	}
}
