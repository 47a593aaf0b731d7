package cuda

import (
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"unsafe"
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
// DevicePtr, int32, uint32, int64 or float32, in the order and types of the
// kernel's C parameters (a mismatch is not detected by the driver).
func (d *Device) Launch(name string, grid, block Dim3, shared uint32, args ...any) error {
	f, ok := d.funcs[name]
	if !ok {
		return fmt.Errorf("cuda: kernel %s not loaded (build with -tags cudaptx after scripts/build-ptx.sh)", name)
	}
	vals, err := packArgs(args)
	if err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", name, err)
	}
	params := make([]unsafe.Pointer, len(vals)+1)
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(vals) > 0 {
		pin.Pin(&vals[0])
	}
	for i := range vals {
		params[i] = unsafe.Pointer(&vals[i])
	}
	pin.Pin(&params[0])
	res := d.Drv.cuLaunchKernel(f, one(grid.X), one(grid.Y), one(grid.Z), one(block.X), one(block.Y), one(block.Z),
		shared, d.stream, unsafe.Pointer(&params[0]), nil)
	return d.Drv.Check("cuLaunchKernel("+name+")", res)
}

// packArgs stores each kernel argument in its own 8-byte slot, the value in
// the low bytes (the driver copies each parameter's size from its slot;
// all supported targets are little-endian).
func packArgs(args []any) ([]uint64, error) {
	vals := make([]uint64, len(args))
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
		default:
			return nil, fmt.Errorf("argument %d has unsupported type %T", i, a)
		}
	}
	return vals, nil
}
