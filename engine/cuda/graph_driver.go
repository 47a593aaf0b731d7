package cuda

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// graphSyms are the driver's graph entry points (CUDA 11.4+; cuda.h's cuStreamBeginCapture
// is the _v2 symbol since CUDA 10.1, cuGraphInstantiate the WithFlags one since CUDA 12).
// They are optional: a driver without one loads as before and graphs stay off, saying which.
type graphSyms struct {
	beginCapture func(s uintptr, mode int32) int32
	endCapture   func(s uintptr, graph *uintptr) int32
	isCapturing  func(s uintptr, status *int32) int32
	instantiate  func(exec *uintptr, graph uintptr, flags uint64) int32
	launch       func(exec uintptr, s uintptr) int32
	execDestroy  func(exec uintptr) int32
	graphDestroy func(graph uintptr) int32
	missing      []string // symbols not found
}

// CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: a call this thread makes that is not
// safe during capture (an allocation, a synchronisation) fails instead of running, so a capture
// never hides one.
const captureModeThreadLocal = 1

// bindGraphSyms binds the graph entry points that lib has.
func bindGraphSyms(lib *library) graphSyms {
	var g graphSyms
	for name, f := range map[string]any{
		"cuStreamBeginCapture_v2":     &g.beginCapture,
		"cuStreamEndCapture":          &g.endCapture,
		"cuStreamIsCapturing":         &g.isCapturing,
		"cuGraphInstantiateWithFlags": &g.instantiate,
		"cuGraphLaunch":               &g.launch,
		"cuGraphExecDestroy":          &g.execDestroy,
		"cuGraphDestroy":              &g.graphDestroy,
	} {
		if err := lib.bind(name, f); err != nil {
			g.missing = append(g.missing, name)
		}
	}
	return g
}

// graphsUnavailable says why this driver cannot capture graphs ("" when it can).
func (d *Driver) graphsUnavailable() string {
	if len(d.graph.missing) == 0 {
		return ""
	}
	m := slices.Sorted(slices.Values(d.graph.missing))
	return fmt.Sprintf("the driver %s lacks %s", d.Path, strings.Join(m, ", "))
}

// graphWorkspaceBytes is the cuBLAS workspace a graph-mode backend sets for its handle: cuBLAS's
// recommendation for Hopper (4 MiB for older GPUs; more does no harm). Set for the eager and the
// captured steps alike, so that cuBLAS sees one workspace and picks the same kernels in both.
const graphWorkspaceBytes = 32 << 20

// deviceGraphs is graphDriver on a Device.
type deviceGraphs struct {
	d       *Device
	ev      uintptr // the fence's event
	fenced  bool
	gemmBuf [gemmArgs]uintptr
}

var _ graphDriver = (*deviceGraphs)(nil)

// issue queues l's commands on the stream.
func (g *deviceGraphs) issue(l *cmdList) error {
	d := g.d
	return l.each(func(i int, kind cmdKind, fn uintptr, args []uint64) error {
		switch kind {
		case cmdLaunch:
			n := copy(d.argVals[:], args[7:])
			for k := range n {
				d.argPtrs[k] = unsafe.Pointer(&d.argVals[k])
			}
			r, _, _ := purego.SyscallN(d.Drv.launchKernel, fn, uintptr(args[0]), uintptr(args[1]), uintptr(args[2]),
				uintptr(args[3]), uintptr(args[4]), uintptr(args[5]), uintptr(args[6]), d.stream,
				uintptr(unsafe.Pointer(&d.argPtrs[0])), 0)
			return d.Drv.Check("cuLaunchKernel("+l.names[i]+")", int32(r))
		case cmdGemm:
			for k, a := range args {
				g.gemmBuf[k] = uintptr(a)
			}
			d.alpha = math.Float32frombits(uint32(args[gemmAlpha]))
			d.beta = math.Float32frombits(uint32(args[gemmBeta]))
			g.gemmBuf[gemmAlpha] = uintptr(unsafe.Pointer(&d.alpha))
			g.gemmBuf[gemmBeta] = uintptr(unsafe.Pointer(&d.beta))
			r, _, _ := purego.SyscallN(fn, g.gemmBuf[:]...)
			return cublasCheck("cublasGemmStridedBatchedEx", int32(r))
		case cmdMemset:
			return d.Drv.Check("cuMemsetD32Async", d.Drv.cuMemsetD32A(DevicePtr(args[0]), uint32(args[1]), args[2], d.stream))
		case cmdUpload:
			return d.Drv.Check("cuMemcpyHtoDAsync", d.Drv.cuMemcpyHtoDA(DevicePtr(args[0]), l.host[args[3]], args[2], d.stream))
		}
		return fmt.Errorf("recorded command %d of unknown kind %d", i, kind)
	})
}

// capture records l into a graph under stream capture and instantiates it. Whatever fails, the
// capture is ended before it returns, so the stream is usable for the eager fallback.
func (g *deviceGraphs) capture(l *cmdList) (uintptr, error) {
	d, s := g.d, &g.d.Drv.graph
	if err := d.Drv.Check("cuStreamBeginCapture", s.beginCapture(d.stream, captureModeThreadLocal)); err != nil {
		return 0, err
	}
	ierr := g.issue(l)
	var graph uintptr
	eerr := d.Drv.Check("cuStreamEndCapture", s.endCapture(d.stream, &graph))
	var status int32
	if err := d.Drv.Check("cuStreamIsCapturing", s.isCapturing(d.stream, &status)); err != nil || status != 0 {
		// A stream stuck in capture would fail every later call: say so loudly.
		return 0, fmt.Errorf("the stream is still capturing after cuStreamEndCapture (status %d, %v)", status, err)
	}
	if ierr != nil || eerr != nil {
		if graph != 0 {
			s.graphDestroy(graph)
		}
		return 0, errors.Join(ierr, eerr)
	}
	var exec uintptr
	err := d.Drv.Check("cuGraphInstantiateWithFlags", s.instantiate(&exec, graph, 0))
	s.graphDestroy(graph) // the executable keeps what it needs
	if err != nil {
		return 0, err
	}
	return exec, nil
}

// launchGraph launches an executable graph on the stream.
func (g *deviceGraphs) launchGraph(exec uintptr) error {
	return g.d.Drv.Check("cuGraphLaunch", g.d.Drv.graph.launch(exec, g.d.stream))
}

// destroyGraph frees an executable graph.
func (g *deviceGraphs) destroyGraph(exec uintptr) { g.d.Drv.graph.execDestroy(exec) }

// fence records the fence event on the stream.
func (g *deviceGraphs) fence() error {
	d := g.d
	if g.ev == 0 {
		if err := d.Drv.Check("cuEventCreate", d.Drv.cuEventCreate(&g.ev, 2)); err != nil { // CU_EVENT_DISABLE_TIMING
			g.ev = 0
			return err
		}
	}
	g.fenced = true
	return d.Drv.Check("cuEventRecord", d.Drv.cuEventRecord(g.ev, d.stream))
}

// waitFence waits for the last fence.
func (g *deviceGraphs) waitFence() error {
	if !g.fenced {
		return nil
	}
	return g.d.Drv.Check("cuEventSynchronize", g.d.Drv.cuEventSynchronize(g.ev))
}

// allocHost returns page-locked host memory.
func (g *deviceGraphs) allocHost(bytes int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := g.d.Drv.Check("cuMemAllocHost", g.d.Drv.cuMemAllocHost(&p, uint64(bytes))); err != nil {
		return nil, err
	}
	return p, nil
}

// freeHost releases memory from allocHost.
func (g *deviceGraphs) freeHost(p unsafe.Pointer) { g.d.Drv.cuMemFreeHost(p) }

// destroyFence frees the fence's event (at Close).
func (g *deviceGraphs) destroyFence() {
	if g.ev != 0 {
		g.d.Drv.cuEventSynchronize(g.ev)
		g.d.Drv.cuEventDestroy(g.ev)
		g.ev, g.fenced = 0, false
	}
}
