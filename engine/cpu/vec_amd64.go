//go:build amd64

package cpu

// The eight-lane loops of vec_amd64.s: each covers the first n&^7 elements, bit for bit as its
// Go loop (see the file's header), and is called only when hasAVX2.

//go:noescape
func swigluForwardAVX2(y, gate, u *float32, n int)

//go:noescape
func swigluBackwardAVX2(dg, du, dy, gate, u, e *float32, n int, accGate, accUp bool)

//go:noescape
func adamwAVX2(p, grad, m, v *float32, n int, k *adamwConsts)

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func scaleAVX2(x *float32, n int, s float32)

//go:noescape
func softmaxGradAVX2(dp, p *float32, n int, d, scale float32)

//go:noescape
func scaledProductAVX2(y, x, w *float32, n int, s float32)

//go:noescape
func rmsNormGradAVX2(dx, dy, x, w *float32, n int, inv, dot float32)

//go:noescape
func accScaledProductAVX2(acc, a, b *float32, n int, s float32)
