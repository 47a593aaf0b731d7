package engine

import "fmt"

// The arena asks its backend for chunks that double from arenaFirstChunk to
// arenaMaxChunk elements (or one tensor's size when larger): small models stay
// small, large ones need few chunks.
const (
	arenaFirstChunk = 1 << 18 // 1 MiB
	arenaMaxChunk   = 1 << 26 // 256 MiB
)

// arena hands out activation memory for one step. It grows during the first
// (largest) step by whole chunks and afterwards reuses them: reset rewinds,
// nothing is freed or allocated again while steps stay as large.
type arena struct {
	be     Backend
	chunks []Storage
	cur    int // chunk being filled
	used   int // elements used in chunks[cur]
	total  int // elements allocated in all chunks
	inUse  int // elements handed out this step
	high   int // largest inUse seen
}

// alloc returns n elements (not zeroed) as a storage and offset.
func (a *arena) alloc(n int) (Storage, int, error) {
	for a.cur < len(a.chunks) {
		c := a.chunks[a.cur]
		if a.used+n <= c.Len() {
			off := a.used
			a.used += n
			a.inUse += n
			a.high = max(a.high, a.inUse)
			return c, off, nil
		}
		a.cur++
		a.used = 0
	}
	size := max(n, min(arenaMaxChunk, arenaFirstChunk<<len(a.chunks)))
	st, err := a.be.Alloc(size)
	if err != nil {
		return nil, 0, fmt.Errorf("engine: arena: allocate %d elements (%d MiB, %d MiB already held): %w",
			size, size>>18, a.total>>18, err)
	}
	a.chunks = append(a.chunks, st)
	a.total += size
	a.cur = len(a.chunks) - 1
	a.used = n
	a.inUse += n
	a.high = max(a.high, a.inUse)
	return st, 0, nil
}

// reset makes all memory available again for the next step.
func (a *arena) reset() {
	a.cur, a.used, a.inUse = 0, 0, 0
}
