package cuda

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a CUdeviceptr: an address in device memory.
type DevicePtr uint64

// CUresult values the package names itself (the driver's cuGetErrorName is
// used when the library is loaded).
var cuResultNames = map[int32]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	218: "CUDA_ERROR_INVALID_PTX",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	802: "CUDA_ERROR_SYSTEM_NOT_READY",
	803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	999: "CUDA_ERROR_UNKNOWN",
}

// DriverError is a failed driver call.
type DriverError struct {
	Call string // e.g. "cuInit"
	Code int32  // the CUresult
	Name string // e.g. "CUDA_ERROR_NO_DEVICE"
	Desc string // the driver's description, when it gave one
}

// Error is e.g. "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
func (e *DriverError) Error() string {
	s := fmt.Sprintf("%s: %s", e.Call, e.Name)
	if e.Desc != "" {
		s += " (" + e.Desc + ")"
	}
	return s
}

// Driver holds the bound entry points of libcuda. Every call returns a
// CUresult; Check turns one into an error.
type Driver struct {
	// Path is the file the driver was loaded from.
	Path string
	lib  *library

	cuInit               func(flags uint32) int32
	cuDriverGetVersion   func(v *int32) int32
	cuGetErrorName       func(res int32, s **byte) int32
	cuGetErrorString     func(res int32, s **byte) int32
	cuDeviceGetCount     func(n *int32) int32
	cuDeviceGet          func(dev *int32, ordinal int32) int32
	cuDeviceGetName      func(name *byte, n int32, dev int32) int32
	cuDeviceTotalMem     func(bytes *uint64, dev int32) int32
	cuDeviceGetAttribute func(v *int32, attr int32, dev int32) int32

	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSynchronize          func() int32

	cuMemAlloc     func(p *DevicePtr, bytes uint64) int32
	cuMemFree      func(p DevicePtr) int32
	cuMemsetD32A   func(dst DevicePtr, v uint32, n uint64, s uintptr) int32
	cuMemcpyHtoDA  func(dst DevicePtr, src unsafe.Pointer, bytes uint64, s uintptr) int32
	cuMemcpyDtoHA  func(dst unsafe.Pointer, src DevicePtr, bytes uint64, s uintptr) int32
	cuMemGetInfo   func(free, total *uint64) int32
	cuMemAllocHost func(p *unsafe.Pointer, bytes uint64) int32
	cuMemFreeHost  func(p unsafe.Pointer) int32
	cuStreamSync   func(s uintptr) int32
	cuStreamCreate func(s *uintptr, flags uint32) int32

	cuEventCreate      func(e *uintptr, flags uint32) int32
	cuEventRecord      func(e uintptr, s uintptr) int32
	cuEventSynchronize func(e uintptr) int32
	cuEventElapsedTime func(ms *float32, start, end uintptr) int32
	cuEventDestroy     func(e uintptr) int32

	cuModuleLoadData    func(m *uintptr, image unsafe.Pointer) int32
	cuModuleGetFunction func(f *uintptr, m uintptr, name *byte) int32
	cuModuleUnload      func(m uintptr) int32

	// The calls made per kernel, called through purego.SyscallN:
	// RegisterFunc's reflection costs microseconds and allocates per call.
	launchKernel, ctxSetCurrent uintptr

	// graph holds the optional CUDA graph entry points (graph_driver.go).
	graph graphSyms
}

// driverSymbols maps the C symbols (the _v2 names that cuda.h's macros
// select) to the Driver's fields.
func (d *Driver) driverSymbols() map[string]any {
	return map[string]any{
		"cuInit":                       &d.cuInit,
		"cuDriverGetVersion":           &d.cuDriverGetVersion,
		"cuGetErrorName":               &d.cuGetErrorName,
		"cuGetErrorString":             &d.cuGetErrorString,
		"cuDeviceGetCount":             &d.cuDeviceGetCount,
		"cuDeviceGet":                  &d.cuDeviceGet,
		"cuDeviceGetName":              &d.cuDeviceGetName,
		"cuDeviceTotalMem_v2":          &d.cuDeviceTotalMem,
		"cuDeviceGetAttribute":         &d.cuDeviceGetAttribute,
		"cuDevicePrimaryCtxRetain":     &d.cuDevicePrimaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2": &d.cuDevicePrimaryCtxRelease,
		"cuCtxSynchronize":             &d.cuCtxSynchronize,
		"cuMemAlloc_v2":                &d.cuMemAlloc,
		"cuMemFree_v2":                 &d.cuMemFree,
		"cuMemsetD32Async":             &d.cuMemsetD32A,
		"cuMemcpyHtoDAsync_v2":         &d.cuMemcpyHtoDA,
		"cuMemcpyDtoHAsync_v2":         &d.cuMemcpyDtoHA,
		"cuMemGetInfo_v2":              &d.cuMemGetInfo,
		"cuMemAllocHost_v2":            &d.cuMemAllocHost,
		"cuMemFreeHost":                &d.cuMemFreeHost,
		"cuStreamCreate":               &d.cuStreamCreate,
		"cuStreamSynchronize":          &d.cuStreamSync,
		"cuEventCreate":                &d.cuEventCreate,
		"cuEventRecord":                &d.cuEventRecord,
		"cuEventSynchronize":           &d.cuEventSynchronize,
		"cuEventElapsedTime_v2":        &d.cuEventElapsedTime,
		"cuEventDestroy_v2":            &d.cuEventDestroy,
		"cuModuleLoadData":             &d.cuModuleLoadData,
		"cuModuleGetFunction":          &d.cuModuleGetFunction,
		"cuModuleUnload":               &d.cuModuleUnload,
	}
}

// loadDriver opens the first of paths that exports cuInit and binds every
// entry point.
func loadDriver(paths []string) (*Driver, error) {
	lib, err := openFirst(paths, "cuInit")
	if err != nil {
		return nil, err
	}
	d := &Driver{Path: lib.path, lib: lib}
	if err := lib.bindAll(d.driverSymbols()); err != nil {
		lib.close()
		return nil, err
	}
	if d.launchKernel, err = lib.sym("cuLaunchKernel"); err == nil {
		d.ctxSetCurrent, err = lib.sym("cuCtxSetCurrent")
	}
	if err != nil {
		lib.close()
		return nil, err
	}
	d.graph = bindGraphSyms(lib)
	return d, nil
}

// Check returns nil for CUDA_SUCCESS, else a *DriverError naming call and
// the result (by the driver's cuGetErrorName/String when bound).
func (d *Driver) Check(call string, res int32) error {
	if res == 0 {
		return nil
	}
	e := &DriverError{Call: call, Code: res, Name: resultName(res)}
	if d != nil && d.cuGetErrorName != nil {
		var p *byte
		if d.cuGetErrorName(res, &p) == 0 && p != nil {
			e.Name = goString(p)
		}
		p = nil
		if d.cuGetErrorString(res, &p) == 0 && p != nil {
			e.Desc = goString(p)
		}
	}
	return e
}

// resultName names a CUresult from the package's table.
func resultName(res int32) string {
	if n, ok := cuResultNames[res]; ok {
		return n
	}
	return fmt.Sprintf("CUresult %d", res)
}

// goString copies a NUL-terminated C string (at most 4096 bytes).
func goString(p *byte) string {
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// Version returns the driver's CUDA version, e.g. 12080 for 12.8.
func (d *Driver) Version() (int, error) {
	var v int32
	err := d.Check("cuDriverGetVersion", d.cuDriverGetVersion(&v))
	return int(v), err
}
