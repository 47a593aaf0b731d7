//go:build nocudaptx

package cuda

// PTXEmbedded reports whether kernels were embedded (the cudaptx tag).
const PTXEmbedded = false

// embeddedPTX returns no modules: without the cudaptx tag only the driver
// and cuBLAS are available.
func embeddedPTX() map[string][]byte { return nil }
