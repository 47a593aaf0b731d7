//go:build !amd64

package cpu

// Off amd64 hasAVX2 is false and these are never called: the Go loops do all the work.

func swigluForwardAVX2(y, gate, u *float32, n int)                                   {}
func swigluBackwardAVX2(dg, du, dy, gate, u, e *float32, n int, accGate, accUp bool) {}
func adamwAVX2(p, grad, m, v *float32, n int, k *adamwConsts)                        {}
func maxAVX2(x *float32, n int) float32                                              { return 0 }
func scaleAVX2(x *float32, n int, s float32)                                         {}
func softmaxGradAVX2(dp, p *float32, n int, d, scale float32)                        {}
func scaledProductAVX2(y, x, w *float32, n int, s float32)                           {}
func rmsNormGradAVX2(dx, dy, x, w *float32, n int, inv, dot float32)                 {}
func accScaledProductAVX2(acc, a, b *float32, n int, s float32)                      {}
