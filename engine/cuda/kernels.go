package cuda

import (
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"unsafe"

	"github.com/ebitengine/purego"
)

// entryRE finds kernel entry points in PTX text.
var entryRE = regexp.MustCompile(`(?m)^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// PTXEntries returns the names of the kernels a PTX module defines, sorted.
func PTXEntries(ptx []byte) []string {
	var out []string
	for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
		out = append(out, string(m[1]))
	}
	sort.Strings(out)
	return out
}

// loadKernels loads each PTX module (file name -> text) and looks up every
// entry point it defines.
func (d *Device) loadKernels(ptx map[string][]byte) error {
	names := make([]string, 0, len(ptx))
	for n := range ptx {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, file := range names {
		img := append(append([]byte(nil), ptx[file]...), 0) // NUL-terminated
		var mod uintptr
		res := d.Drv.cuModuleLoadData(&mod, unsafe.Pointer(&img[0]))
		runtime.KeepAlive(img)
		if err := d.Drv.Check("cuModuleLoadData("+file+")", res); err != nil {
			return err
		}
		d.mods = append(d.mods, mod)
		for _, k := range PTXEntries(ptx[file]) {
			cname := append([]byte(k), 0)
			var f uintptr
			if err := d.Drv.Check("cuModuleGetFunction("+k+")", d.Drv.cuModuleGetFunction(&f, mod, &cname[0])); err != nil {
				return err
			}
			d.funcs[k] = f
		}
	}
	return nil
}

// Kernels returns the names of the loaded kernels, sorted.
func (d *Device) Kernels() []string {
	out := make([]string, 0, len(d.funcs))
	for k := range d.funcs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Dim3 is a CUDA grid or block size; zero fields count as 1.
type Dim3 struct{ X, Y, Z uint32 }

func one(v uint32) uint32 { return max(v, 1) }

// Launch queues kernel name on the device's stream. Each argument must be a
// DevicePtr, int32, uint32, int64, float32 or float64, in the order and
// types of the kernel's C parameters (a mismatch is not detected by the
// driver).
func (d *Device) Launch(name string, grid, block Dim3, shared uint32, args ...any) error {
	f, ok := d.funcs[name]
	if !ok {
		return fmt.Errorf("cuda: kernel %s not loaded (rebuild the PTX with scripts/build-ptx.sh)", name)
	}
	if len(args) > len(d.argVals) {
		return fmt.Errorf("cuda: kernel %s: %d arguments, at most %d", name, len(args), len(d.argVals))
	}
	if err := packArgs(d.argVals[:len(args)], args); err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", name, err)
	}
	if d.rec != nil { // a step being recorded (graph.go)
		d.rec.recordLaunch(name, f, grid, block, shared, d.argVals[:len(args)])
		return nil
	}
	for i := range args {
		d.argPtrs[i] = unsafe.Pointer(&d.argVals[i])
	}
	r, _, _ := purego.SyscallN(d.Drv.launchKernel, f, uintptr(one(grid.X)), uintptr(one(grid.Y)), uintptr(one(grid.Z)),
		uintptr(one(block.X)), uintptr(one(block.Y)), uintptr(one(block.Z)), uintptr(shared), d.stream,
		uintptr(unsafe.Pointer(&d.argPtrs[0])), 0)
	return d.Drv.Check("cuLaunchKernel("+name+")", int32(r))
}

// packArgs stores each kernel argument in its own 8-byte slot of vals, the
// value in the low bytes (the driver copies each parameter's size from its
// slot; all supported targets are little-endian).
func packArgs(vals []uint64, args []any) error {
	for i, a := range args {
		switch v := a.(type) {
		case DevicePtr:
			vals[i] = uint64(v)
		case int32:
			vals[i] = uint64(uint32(v))
		case uint32:
			vals[i] = uint64(v)
		case int64:
			vals[i] = uint64(v)
		case float32:
			vals[i] = uint64(*(*uint32)(unsafe.Pointer(&v)))
		case float64:
			vals[i] = *(*uint64)(unsafe.Pointer(&v))
		default:
			return fmt.Errorf("argument %d has unsupported type %T", i, a)
		}
	}
	return nil
}
