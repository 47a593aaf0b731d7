package llama

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The decoder's config and weights stay a leaf, so what reads them (the loader, the CLI's checks) links no more than the
// weights: within the module, the package may import engine/blas and internal/numfmt.
func TestPackageIsALeaf(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/gelo-research/geloattack/"
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module) && path != module+"engine/blas" && path != module+"internal/numfmt" {
				t.Errorf("%s imports %s: models/llama must stay a leaf over engine/blas and internal/numfmt", f, path)
			}
		}
	}
}
