//go:build nocudaptx

package cuda

// PTXEmbedded reports whether kernels were embedded (the default; the nocudaptx
// tag leaves them out).
const PTXEmbedded = false

// embeddedPTX returns no modules: built with nocudaptx only the driver and
// cuBLAS are available (GELOATTACK_CUDA_PTX=dir can still load kernels).
func embeddedPTX() map[string][]byte { return nil }
