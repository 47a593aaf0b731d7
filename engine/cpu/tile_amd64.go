//go:build amd64

package cpu

// tile6x16AVX2 is tileGemm's register block (tile_amd64.s): six rows of C by nblk blocks of 16
// columns, each element one FMA chain in p order from zero, scaled by alpha, then added to C
// (acc) or stored.
//
//go:noescape
func tile6x16AVX2(c *float32, ldc int, a *float32, ars, aps int, b *float32, ldb, k, nblk int, alpha float32, acc bool)
