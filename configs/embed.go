// Package configs embeds the YAML configs shipped with geloattack, so that `geloattack train` with
// no arguments runs the quickstart on any machine, with no files beside the binary.
package configs

import (
	"embed"
	"fmt"
)

//go:embed *.yaml
var files embed.FS

// Quickstart is the name of the default config.
const Quickstart = "quickstart.yaml"

// Read returns the embedded config of that file name.
func Read(name string) ([]byte, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("embedded config %q: %w", name, err)
	}
	return b, nil
}
