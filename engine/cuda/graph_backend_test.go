package cuda

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/gelo-research/geloattack/engine"
)

// stubBackend is a Backend on a Device without a GPU: kernels are fake handles, allocations fake
// addresses, and every driver call outside a recorded step is a stub that does nothing (a
// launch outside one would crash, so the tests run device work only inside steps). What the
// steps record goes to graphs' fake driver; trace lists the stub calls and the fake's, in order.
func stubBackend(t *testing.T, mode GraphMode) (*Backend, *fakeGraphs, *[]string) {
	t.Helper()
	trace := &[]string{}
	next := DevicePtr(1 << 30)
	d := &Device{funcs: map[string]uintptr{}, stream: 0x5}
	for i, k := range requiredKernels {
		d.funcs[k] = uintptr(0x1000 + i)
	}
	d.Drv = &Driver{
		cuMemAlloc: func(p *DevicePtr, bytes uint64) int32 {
			*p = next
			next += DevicePtr((bytes + 255) / 256 * 256)
			return 0
		},
		cuMemFree:     func(DevicePtr) int32 { *trace = append(*trace, "free"); return 0 },
		cuMemsetD32A:  func(DevicePtr, uint32, uint64, uintptr) int32 { return 0 },
		cuMemcpyHtoDA: func(DevicePtr, unsafe.Pointer, uint64, uintptr) int32 { *trace = append(*trace, "upload"); return 0 },
		cuMemcpyDtoHA: func(dst unsafe.Pointer, _ DevicePtr, n uint64, _ uintptr) int32 {
			clear(unsafe.Slice((*byte)(dst), n))
			*trace = append(*trace, "download")
			return 0
		},
		cuStreamSync: func(uintptr) int32 { *trace = append(*trace, "sync"); return 0 },
		cuMemGetInfo: func(free, total *uint64) int32 { return 0 },
	}
	d.Blas = &Cublas{gemmSBEx: 0x77}
	b := &Backend{dev: d, prec: PrecisionFP32, compute: cublasCompute32F}
	var err error
	if b.kernels, err = usableKernels(b.kernelTable(), func(k string) bool { _, ok := d.funcs[k]; return ok }); err != nil {
		t.Fatal(err)
	}
	f := &fakeGraphs{}
	b.graphs = newStepGraphs(mode, &tracedGraphs{fakeGraphs: f, trace: trace}, io.Discard)
	// begin makes the context current only on a thread it has not seen: claim this one.
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	b.curThread = osThread()
	return b, f, trace
}

// tracedGraphs adds the fake driver's issues, captures and launches to the stub trace.
type tracedGraphs struct {
	*fakeGraphs
	trace *[]string
}

func (g *tracedGraphs) issue(l *cmdList) error {
	*g.trace = append(*g.trace, "issue")
	return g.fakeGraphs.issue(l)
}

func (g *tracedGraphs) capture(l *cmdList) (uintptr, error) {
	*g.trace = append(*g.trace, "capture")
	return g.fakeGraphs.capture(l)
}

func (g *tracedGraphs) launchGraph(exec uintptr) error {
	*g.trace = append(*g.trace, "launch")
	return g.fakeGraphs.launchGraph(exec)
}

// stubModel is a small pre-norm transformer (stubLayers blocks of attention and a SwiGLU MLP, with
// residual adds): a training step's kinds of device work (GEMMs, fused kernels, scratch buffers,
// uploads, reductions, many gradient buffers of one size alive at once, the loss read back).
type stubModel struct {
	tp     *engine.Tape
	ps     *engine.Params
	layers []stubLayer
}

type stubLayer struct{ g1, wq, wk, wv, g2, wg, wu, wd *engine.Tensor }

const stubLayers = 3

func newStubModel(t *testing.T, be engine.Backend, d int) *stubModel {
	t.Helper()
	m := &stubModel{tp: engine.NewTape(be), ps: engine.NewParams()}
	for l := range stubLayers {
		p := func(name string, shape ...int) *engine.Tensor {
			return m.ps.Add(fmt.Sprintf("l%d.%s", l, name), shape, len(shape) > 1)
		}
		m.layers = append(m.layers, stubLayer{g1: p("g1", d), wq: p("wq", d, d), wk: p("wk", d, d), wv: p("wv", d, d),
			g2: p("g2", d), wg: p("wg", 2*d, d), wu: p("wu", 2*d, d), wd: p("wd", d, 2*d)})
	}
	if err := m.ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	return m
}

// step runs forward and backward of a (B, N, d) batch with the last row of set 0 padded and
// returns the loss (0 on the stub device, whose downloads read zeros).
func (m *stubModel) step(t *testing.T, B, N, d int, seed uint64) float32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, B*N*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	mask := make([]float32, B*N)
	for i := range mask {
		mask[i] = 1
	}
	mask[N-1] = 0
	tp := m.tp
	tp.Reset()
	h := tp.Input(x, B, N, d)
	km := tp.Input(mask, B, N)
	for _, l := range m.layers {
		a := tp.RMSNorm(h, l.g1, 1e-6)
		h = tp.Add(h, tp.Attention(tp.Linear(a, l.wq), tp.Linear(a, l.wk), tp.Linear(a, l.wv), km, 2))
		f := tp.RMSNorm(h, l.g2, 1e-6)
		h = tp.Add(h, tp.Linear(tp.SwiGLU(tp.Linear(f, l.wg), tp.Linear(f, l.wu)), l.wd))
	}
	loss := tp.SumSquares(h)
	if err := tp.Backward(loss); err != nil {
		t.Fatal(err)
	}
	return loss.Item()
}

// TestGraphStepThroughTheEngine drives the backend's BeginStep and EndStep with engine steps on
// a stub device: the tape gives the same command list for every step of one shape after the
// first (which sizes the arena, the gradient pool and the scratch buffers), so the third such
// step captures it and the fourth and fifth replay that graph; the batch's uploads go to the
// stream first, the recorded step runs at the loss download, before it reads (a barrier); a step
// of another shape runs eagerly and never launches that graph; the first shape then replays.
func TestGraphStepThroughTheEngine(t *testing.T) {
	be, f, trace := stubBackend(t, GraphsOn)
	const B, N, d = 2, 6, 8
	m := newStubModel(t, be, d)
	run := func(n int, seed uint64) {
		t.Helper()
		be.BeginStep()
		m.step(t, B, n, d, seed)
		be.EndStep()
		if be.dev.rec != nil {
			t.Fatal("a step still being recorded after EndStep")
		}
		if err := be.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		*trace = (*trace)[:0]
		run(N, uint64(i))
		// The recorded step runs before the loss is read, and nothing else reads or waits.
		// The batch's two uploads (x, mask) come first and go to the stream at once.
		want := map[int][]string{1: {"upload", "upload", "issue", "download", "sync"}, 2: {"upload", "upload", "capture", "launch", "download", "sync"},
			3: {"upload", "upload", "launch", "download", "sync"}, 4: {"upload", "upload", "launch", "download", "sync"}}[i]
		if i > 0 && !slices.Equal(*trace, want) {
			t.Fatalf("step %d: %v, want %v", i+1, *trace, want)
		}
	}
	st := be.GraphStats()
	if st.Captured != 1 || st.Replayed != 2 || st.Fallbacks != 0 {
		t.Fatalf("same shape: %s", st)
	}
	if len(f.issued) < 1 || !slices.Equal(f.issued[len(f.issued)-1], f.captured[0]) {
		t.Fatal("the captured list is not the list issued eagerly the step before")
	}
	*trace = (*trace)[:0]
	run(N-2, 9) // a smaller set size: shapes, addresses and grids change
	if slices.Contains(*trace, "launch") {
		t.Fatalf("a step of another shape launched a graph: %v", *trace)
	}
	*trace = (*trace)[:0]
	run(N, 10)
	if !slices.Equal(*trace, []string{"upload", "upload", "launch", "download", "sync"}) || be.GraphStats().Replayed != 3 {
		t.Fatalf("back to the first shape: %v, %s", *trace, be.GraphStats())
	}
}

// TestGraphBarriers: inside a recorded step, Sync and a download run what was recorded first;
// the calls after them go to the stream at once (the step's rest runs eagerly, never lost).
func TestGraphBarriers(t *testing.T) {
	be, f, trace := stubBackend(t, GraphsOn)
	tp := engine.NewTape(be)
	x := tp.Input(make([]float32, 64), 64)
	*trace = (*trace)[:0]
	be.BeginStep()
	be.Fill(x, 1)
	if len(f.calls) != 0 {
		t.Fatalf("a recorded call reached the driver: %v", f.calls)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*trace, []string{"issue", "sync"}) || be.dev.rec != nil {
		t.Fatalf("Sync inside a step: %v", *trace)
	}
	be.EndStep() // nothing left to run
	if !slices.Equal(*trace, []string{"issue", "sync"}) {
		t.Fatalf("EndStep after the barrier: %v", *trace)
	}
}

// TestGraphLeadingUploadsGoFirst: the uploads a step makes before any other call go to the
// stream at once (their DMA overlaps the recording); an upload after a recorded call is
// recorded, in order, and runs with the step.
func TestGraphLeadingUploadsGoFirst(t *testing.T) {
	be, f, trace := stubBackend(t, GraphsOn)
	tp := engine.NewTape(be)
	x := tp.Input(make([]float32, 64), 64)
	y := tp.Input(make([]float32, 64), 64)
	*trace = (*trace)[:0]
	be.BeginStep()
	be.Upload(x, make([]float32, 64))
	be.Upload(y, make([]float32, 64))
	be.Fill(x, 2)
	be.Upload(y, make([]float32, 64))
	if !slices.Equal(*trace, []string{"upload", "upload"}) {
		t.Fatalf("before the step ran: %v", *trace)
	}
	be.EndStep()
	if !slices.Equal(*trace, []string{"upload", "upload", "issue"}) || len(f.issued) != 1 {
		t.Fatalf("after EndStep: %v", *trace)
	}
	var kinds []cmdKind
	l := cmdList{words: f.issued[0]}
	_ = l.each(func(_ int, k cmdKind, _ uintptr, _ []uint64) error { kinds = append(kinds, k); return nil })
	if !slices.Equal(kinds, []cmdKind{cmdMemset, cmdUpload}) {
		t.Fatalf("recorded %v, want the memset then the upload", kinds)
	}
}

// TestGraphsOffRecordsNothing: with graphs off (or turned off) BeginStep records nothing.
func TestGraphsOffRecordsNothing(t *testing.T) {
	be, _, _ := stubBackend(t, GraphsOn)
	be.graphs.turnOff("test")
	be.BeginStep()
	if be.dev.rec != nil {
		t.Fatal("recording with graphs off")
	}
	be.EndStep()
	be.graphs = nil
	be.BeginStep()
	if be.dev.rec != nil || be.GraphStats().Mode != "off" {
		t.Fatal("recording without graphs")
	}
	if s := (GraphStats{Mode: "on", Off: "why"}).String(); !strings.Contains(s, "off: why") {
		t.Fatalf("String: %q", s)
	}
}
