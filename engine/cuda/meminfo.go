package cuda

import "fmt"

// MemInfo reports the device memory free and in total (cuMemGetInfo), for the resource pre-flight
// that refuses a run which cannot fit before it allocates anything large.
func (b *Backend) MemInfo() (free, total int64, err error) {
	if !b.begin() {
		return 0, 0, b.Err()
	}
	defer b.end()
	var f, t uint64
	if r := b.dev.Drv.cuMemGetInfo(&f, &t); r != 0 {
		return 0, 0, fmt.Errorf("cuMemGetInfo: CUDA error %d", r)
	}
	return int64(f), int64(t), nil
}
