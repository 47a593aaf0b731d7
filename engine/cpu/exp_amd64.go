//go:build amd64

package cpu

import xcpu "golang.org/x/sys/cpu"

// hasAVX2 says expAffine and the vec loops may use their AVX2/FMA kernels
// (decided once from the CPU's features; only tests change it, to compare
// against the Go loops).
var hasAVX2 = xcpu.X86.HasAVX2 && xcpu.X86.HasFMA

// expAffineAVX2 computes dst[i] = exp(a*src[i] + b) eight elements at a
// time for as many whole blocks of 8 of the n elements as it can, stopping
// before a block with a lane above expf's fast range or NaN (lanes below it
// give 0). It returns how many elements it did and their sum.
//
//go:noescape
func expAffineAVX2(dst, src *float32, n int, a, b float32) (done int, sum float32)
