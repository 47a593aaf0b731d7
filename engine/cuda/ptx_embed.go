//go:build !nocudaptx

package cuda

import (
	"embed"
	"path"
)

// PTXEmbedded reports whether kernels were embedded (the default; the nocudaptx
// tag leaves them out).
const PTXEmbedded = true

// ptxFiles holds ptx/*.ptx, written by scripts/build-ptx.sh and committed, so
// every default build embeds them.
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
