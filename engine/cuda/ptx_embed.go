//go:build !nocudaptx

package cuda

import (
	"embed"
	"path"
)

// PTXEmbedded reports whether kernels were embedded (the cudaptx tag).
const PTXEmbedded = true

// ptxFiles holds ptx/*.ptx, written by scripts/build-ptx.sh. Build with
// -tags cudaptx only once those files exist (go:embed fails otherwise).
//
//go:embed ptx/*.ptx
var ptxFiles embed.FS

// embeddedPTX returns the embedded modules by file name.
func embeddedPTX() map[string][]byte {
	out := map[string][]byte{}
	ents, _ := ptxFiles.ReadDir("ptx")
	for _, e := range ents {
		b, err := ptxFiles.ReadFile(path.Join("ptx", e.Name()))
		if err == nil {
			out[e.Name()] = b
		}
	}
	return out
}
