//go:build amd64

package cpu

import xcpu "golang.org/x/sys/cpu"

// tile6x16AVX2 is tileGemm's register block (tile_amd64.s): six rows of C by nblk blocks of 16
// columns, each element one FMA chain in p order from zero, scaled by alpha, then added to C
// (acc) or stored.
//
//go:noescape
func tile6x16AVX2(c *float32, ldc int, a *float32, ars, aps int, b *float32, ldb, k, nblk int, alpha float32, acc bool)

// hasAVX512 says tileGemm may use its sixteen-lane register block (the same bits as the
// eight-lane one; only tests change it).
var hasAVX512 = hasAVX2 && xcpu.X86.HasAVX512F

// tile6x16AVX512 is tile6x16AVX2 on sixteen-lane registers (tile512_amd64.s), with the same
// bits.
//
//go:noescape
func tile6x16AVX512(c *float32, ldc int, a *float32, ars, aps int, b *float32, ldb, k, nblk int, alpha float32, acc bool)
