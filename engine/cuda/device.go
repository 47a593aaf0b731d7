package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// ErrNoDevice is matched (errors.Is) by every error Open returns.
var ErrNoDevice = errors.New("no CUDA device")

// NoDeviceError says why Open found no usable device.
type NoDeviceError struct {
	Why   string   // e.g. "libcuda.so.1 not found", "cuInit: CUDA_ERROR_NO_DEVICE"
	Tried []string // library paths tried, when a library was not found
	Dirs  []string // folders searched for them
	Err   error    // the underlying error, if any
}

// Error is "no CUDA device: <why>", followed for a missing library by the
// paths tried and the folders searched.
func (e *NoDeviceError) Error() string {
	s := "no CUDA device: " + e.Why
	if len(e.Tried) > 0 {
		s += "; tried " + strings.Join(e.Tried, ", ")
	}
	if len(e.Tried) > 0 {
		if len(e.Dirs) == 0 {
			s += "; searched no folders (none of the usual ones exist)"
		} else {
			s += "; searched " + strings.Join(e.Dirs, ":")
		}
	}
	return s
}

// Is reports whether target is ErrNoDevice.
func (e *NoDeviceError) Is(target error) bool { return target == ErrNoDevice }

// Unwrap returns the underlying error.
func (e *NoDeviceError) Unwrap() error { return e.Err }

// Options configure Open; the zero value opens device 0 with the libraries
// found in SearchDirs.
type Options struct {
	// Ordinal is the device index (CUDA_VISIBLE_DEVICES applies first).
	Ordinal int
	// Dirs replaces SearchDirs() when not nil.
	Dirs []string
	// DriverPaths, CublasPaths replace the candidate lists when not nil
	// (tests use them to point at files that are not the libraries).
	DriverPaths, CublasPaths []string
}

// Device is one opened GPU: the driver, its primary context made current,
// one stream, a cuBLAS handle bound to that stream, and the kernels of the
// embedded PTX (none when built with the nocudaptx tag).
//
// The driver's current context is per OS thread: callers that use a Device
// from several goroutines must call MakeCurrent on the thread they run on
// (or lock one goroutine to its thread), as the engine's backend will.
type Device struct {
	// Drv is the loaded driver library.
	Drv *Driver
	// Blas is the loaded cuBLAS library.
	Blas   *Cublas
	dev    int32
	ctx    uintptr
	stream uintptr
	handle uintptr
	name   string
	mem    uint64
	cc     [2]int
	mods   []uintptr
	funcs  map[string]uintptr
	// ptxFrom says where the modules came from: "the embedded PTX" or
	// "GELOATTACK_CUDA_PTX=dir".
	ptxFrom string

	// argVals and argPtrs hold one launch's kernel arguments (the driver
	// reads them during cuLaunchKernel). A Device is used by one goroutine
	// at a time, and these heap arrays do not move.
	argVals [32]uint64
	argPtrs [32]unsafe.Pointer
	// alpha, beta are the GEMM scalars, passed by address.
	alpha, beta float32
	// rec, while a training step is being recorded (graph.go), takes the stream operations
	// instead of the driver; whatever must wait for the device flushes it first.
	rec *stepGraphs
}

// Open loads libcuda and cuBLAS, initialises the driver and prepares device
// opts.Ordinal. Every error it returns is a *NoDeviceError ("no CUDA device:
// ...") and nothing is left loaded or allocated after a failure.
func Open(opts Options) (_ *Device, err error) {
	// The context made current below must stay current for the rest of
	// Open (module loading): keep this goroutine on its thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dirs := opts.Dirs
	if dirs == nil {
		dirs = SearchDirs()
	}
	dp := opts.DriverPaths
	if dp == nil {
		dp = Candidates(DriverNames, dirs)
	}
	drv, derr := loadDriver(dp)
	if derr != nil {
		return nil, &NoDeviceError{Why: "CUDA driver library not loaded: " + derr.Error(), Tried: dp, Dirs: dirs, Err: derr}
	}
	d := &Device{Drv: drv, dev: -1, funcs: map[string]uintptr{}}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	fail := func(e error) error {
		return &NoDeviceError{Why: e.Error(), Err: e}
	}
	if e := drv.Check("cuInit", drv.cuInit(0)); e != nil {
		return nil, fail(e)
	}
	var n int32
	if e := drv.Check("cuDeviceGetCount", drv.cuDeviceGetCount(&n)); e != nil {
		return nil, fail(e)
	}
	if opts.Ordinal < 0 || opts.Ordinal >= int(n) {
		return nil, &NoDeviceError{Why: fmt.Sprintf("device %d requested, %d present", opts.Ordinal, n)}
	}
	var dev int32
	if e := drv.Check("cuDeviceGet", drv.cuDeviceGet(&dev, int32(opts.Ordinal))); e != nil {
		return nil, fail(e)
	}
	var ctx uintptr
	if e := drv.Check("cuDevicePrimaryCtxRetain", drv.cuDevicePrimaryCtxRetain(&ctx, dev)); e != nil {
		return nil, fail(e)
	}
	d.dev, d.ctx = dev, ctx
	if e := d.MakeCurrent(); e != nil {
		return nil, fail(e)
	}
	buf := make([]byte, 256)
	if e := drv.Check("cuDeviceGetName", drv.cuDeviceGetName(&buf[0], int32(len(buf)), dev)); e != nil {
		return nil, fail(e)
	}
	d.name = goString(&buf[0])
	if e := drv.Check("cuDeviceTotalMem", drv.cuDeviceTotalMem(&d.mem, dev)); e != nil {
		return nil, fail(e)
	}
	for i, attr := range []int32{75, 76} { // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR
		var v int32
		if e := drv.Check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(&v, attr, dev)); e != nil {
			return nil, fail(e)
		}
		d.cc[i] = int(v)
	}
	if e := drv.Check("cuStreamCreate", drv.cuStreamCreate(&d.stream, 1)); e != nil { // CU_STREAM_NON_BLOCKING
		return nil, fail(e)
	}

	cp := opts.CublasPaths
	if cp == nil {
		cp = Candidates(CublasNames, dirs)
	}
	blas, berr := loadCublas(Candidates(CublasLtNames, dirs), cp)
	if berr != nil {
		return nil, &NoDeviceError{Why: "cuBLAS not loaded: " + berr.Error(), Tried: cp, Dirs: dirs, Err: berr}
	}
	d.Blas = blas
	if e := cublasCheck("cublasCreate_v2", blas.cublasCreate(&d.handle)); e != nil {
		return nil, fail(e)
	}
	if e := cublasCheck("cublasSetStream_v2", blas.cublasSetStream(d.handle, d.stream)); e != nil {
		return nil, fail(e)
	}
	ptx := embeddedPTX()
	d.ptxFrom = "the embedded PTX"
	if dir := os.Getenv("GELOATTACK_CUDA_PTX"); dir != "" {
		if ptx, err = readPTXDir(dir); err != nil {
			return nil, fail(err)
		}
		d.ptxFrom = "GELOATTACK_CUDA_PTX=" + dir
	}
	if e := d.loadKernels(ptx); e != nil {
		return nil, fail(e)
	}
	return d, nil
}

// MakeCurrent makes the device's context current on the calling OS thread.
func (d *Device) MakeCurrent() error {
	r, _, _ := purego.SyscallN(d.Drv.ctxSetCurrent, d.ctx)
	return d.Drv.Check("cuCtxSetCurrent", int32(r))
}

// Name describes the device and the files loaded, e.g.
// "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB; driver 12.8 /usr/lib/x86_64-linux-gnu/libcuda.so.1; cuBLAS 130000 libcublas.so.13)".
func (d *Device) Name() string {
	ver, _ := d.Drv.Version()
	s := fmt.Sprintf("cuda:%d %s (sm_%d%d, %.1f GiB; driver %d.%d %s", d.dev, d.name, d.cc[0], d.cc[1],
		float64(d.mem)/(1<<30), ver/1000, ver%1000/10, d.Drv.Path)
	if d.Blas != nil {
		var bv int32
		if d.handle != 0 {
			d.Blas.cublasGetVersion(d.handle, &bv)
		}
		s += fmt.Sprintf("; cuBLAS %d %s", bv, d.Blas.Path)
		if d.Blas.LtPath != "" {
			s += ", " + d.Blas.LtPath
		}
	}
	if d.ptxFrom != "" && d.ptxFrom != "the embedded PTX" {
		return s + fmt.Sprintf("; %d kernels from %s)", len(d.funcs), d.ptxFrom)
	}
	return s + fmt.Sprintf("; %d kernels)", len(d.funcs))
}

// Libraries returns the paths of the shared objects loaded.
func (d *Device) Libraries() []string {
	out := []string{d.Drv.Path}
	if d.Blas != nil {
		if d.Blas.LtPath != "" {
			out = append(out, d.Blas.LtPath)
		}
		out = append(out, d.Blas.Path)
	}
	return out
}

// TotalMem is the device memory in bytes.
func (d *Device) TotalMem() uint64 { return d.mem }

// ComputeCapability returns (major, minor), e.g. (9, 0) for an H100.
func (d *Device) ComputeCapability() (int, int) { return d.cc[0], d.cc[1] }

// Close releases the cuBLAS handle, modules and primary context and unloads
// the libraries. Memory from Alloc must be freed first.
func (d *Device) Close() {
	if d == nil || d.Drv == nil {
		return
	}
	if d.Blas != nil {
		if d.handle != 0 {
			d.Blas.cublasDestroy(d.handle)
			d.handle = 0
		}
		d.Blas.close()
		d.Blas = nil
	}
	for _, m := range d.mods {
		d.Drv.cuModuleUnload(m)
	}
	d.mods, d.funcs = nil, nil
	if d.ctx != 0 {
		d.Drv.cuDevicePrimaryCtxRelease(d.dev)
		d.ctx = 0
	}
	d.Drv.lib.close()
	d.Drv = nil
}

// Alloc returns n float32 elements of zeroed device memory.
func (d *Device) Alloc(n int) (DevicePtr, error) {
	var p DevicePtr
	if n == 0 {
		return 0, nil
	}
	if err := d.Drv.Check("cuMemAlloc", d.Drv.cuMemAlloc(&p, uint64(n)*4)); err != nil {
		return 0, err
	}
	if err := d.Fill(p, n, 0); err != nil {
		d.Free(p)
		return 0, err
	}
	return p, nil
}

// Free releases memory from Alloc.
func (d *Device) Free(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	if err := d.flushRecorded(); err != nil {
		return err
	}
	return d.Drv.Check("cuMemFree", d.Drv.cuMemFree(p))
}

// Fill sets n float32 elements at p to v, queued on the device's stream.
func (d *Device) Fill(p DevicePtr, n int, v float32) error {
	if n == 0 {
		return nil
	}
	if d.rec != nil {
		d.rec.recordMemset(p, *(*uint32)(unsafe.Pointer(&v)), n)
		return nil
	}
	return d.Drv.Check("cuMemsetD32Async", d.Drv.cuMemsetD32A(p, *(*uint32)(unsafe.Pointer(&v)), uint64(n), d.stream))
}

// Upload copies src to the device at p, queued on the device's stream after
// the work before it. src may be reused when Upload returns: from pageable
// memory the driver stages the data before returning.
func (d *Device) Upload(p DevicePtr, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	if d.deferringUploads() {
		if d.rec.recordUpload(p, src) == nil {
			return nil
		}
		// No staging memory (graphs are now off): run what was recorded, then upload as usual.
		if err := d.flushRecorded(); err != nil {
			return err
		}
	}
	err := d.Drv.Check("cuMemcpyHtoDAsync", d.Drv.cuMemcpyHtoDA(p, unsafe.Pointer(&src[0]), uint64(len(src))*4, d.stream))
	runtime.KeepAlive(src)
	return err
}

// Download copies len(dst) elements at p to dst once the stream's work
// before it is done, and waits for the copy.
func (d *Device) Download(dst []float32, p DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.downloadBytes(unsafe.Pointer(&dst[0]), p, uint64(len(dst))*4)
}

// downloadBytes copies n bytes at p to dst in stream order and waits.
func (d *Device) downloadBytes(dst unsafe.Pointer, p DevicePtr, n uint64) error {
	if err := d.flushRecorded(); err != nil {
		return err
	}
	if err := d.Drv.Check("cuMemcpyDtoHAsync", d.Drv.cuMemcpyDtoHA(dst, p, n, d.stream)); err != nil {
		return err
	}
	return d.Sync()
}

// Sync waits for the device's stream.
func (d *Device) Sync() error {
	if err := d.flushRecorded(); err != nil {
		return err
	}
	return d.Drv.Check("cuStreamSynchronize", d.Drv.cuStreamSync(d.stream))
}

// readPTXDir reads every .ptx file of dir (GELOATTACK_CUDA_PTX: kernels
// rebuilt on the GPU machine, tried without rebuilding the binary).
func readPTXDir(dir string) (map[string][]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.ptx"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("GELOATTACK_CUDA_PTX=%s: no .ptx files (%v)", dir, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := safefile.Read(f, safefile.PTX)
		if err != nil {
			return nil, fmt.Errorf("GELOATTACK_CUDA_PTX: %w", err)
		}
		out[filepath.Base(f)] = b
	}
	return out, nil
}
