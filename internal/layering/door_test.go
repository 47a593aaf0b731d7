package layering

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the directory of go.mod, two levels above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(b), "module "+Module+"\n") {
		t.Fatalf("%s is not the root of %s: %v", root, Module, err)
	}
	return root
}

// doorHit is one call of DoorCalls found in a file.
type doorHit struct {
	file, call string // relative path; import path + "." + function
	line       int
}

// inMemoryReaders are the readers a bufio scanner or reader may wrap outside the door.
var inMemoryReaders = map[string]bool{
	"bytes.NewReader": true, "bytes.NewBuffer": true, "bytes.NewBufferString": true, "strings.NewReader": true,
	"os.Stdin": true,
}

// doorHits parses one Go file and returns its uses of DoorCalls (rel names it in the hits).
func doorHits(fset *token.FileSet, path, rel string) ([]doorHit, error) {
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	local := map[string]string{} // local name -> import path, for the packages of DoorCalls
	var hits []doorHit
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if _, watched := DoorCalls[p]; !watched {
			continue
		}
		name := p[strings.LastIndexByte(p, '/')+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "." {
			// Its calls would not name the package: refuse the import itself.
			hits = append(hits, doorHit{rel, p + ".(dot import)", fset.Position(imp.Pos()).Line})
			continue
		}
		local[name] = p
	}
	// selectorName splits an expression pkg.Name into its identifiers ("", "" for any other).
	selectorName := func(e ast.Expr) (string, string) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", ""
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return "", ""
		}
		return id.Name, sel.Sel.Name
	}
	allowedArg := map[*ast.SelectorExpr]bool{} // bufio constructors over in-memory readers
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		if pkg, _ := selectorName(call.Fun); local[pkg] != "bufio" {
			return true
		}
		arg := call.Args[0]
		if c, ok := arg.(*ast.CallExpr); ok {
			arg = c.Fun
		}
		if p, n := selectorName(arg); p != "" && inMemoryReaders[p+"."+n] {
			allowedArg[call.Fun.(*ast.SelectorExpr)] = true
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, fn := selectorName(sel)
		p, ok := local[pkg]
		if !ok || !slices.Contains(DoorCalls[p], fn) || allowedArg[sel] {
			return true
		}
		hits = append(hits, doorHit{rel, p + "." + fn, fset.Position(sel.Pos()).Line})
		return true
	})
	return hits, nil
}

// walkGo calls fn on every non-test Go file under root (relative path), skipping testdata,
// vendored and hidden directories.
func walkGo(t *testing.T, root string, fn func(path, rel string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		fn(path, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every file is opened, read and written through the door: no non-test file outside it calls the
// standard library's opens, whole-file reads and writes, copies or scanners over a file itself,
// except the listed exceptions, each with its reason; and every exception is still needed.
func TestFilesGoThroughTheDoor(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	allowed := map[[2]string]string{}
	for _, e := range DoorExceptions {
		if e.Reason == "" {
			t.Errorf("door exception %s %s has no reason", e.File, e.Call)
		}
		allowed[[2]string{e.File, e.Call}] = e.Reason
	}
	used := map[[2]string]bool{}
	files, inDoor := 0, 0
	walkGo(t, root, func(path, rel string) {
		files++
		hits, err := doorHits(fset, path, rel)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return
		}
		if rel == Door || strings.HasPrefix(rel, Door+"/") {
			inDoor += len(hits)
			return
		}
		for _, h := range hits {
			key := [2]string{h.file, h.call}
			if _, ok := allowed[key]; ok {
				used[key] = true
				continue
			}
			t.Errorf("%s:%d: %s outside %s: open, read and write files through the door (safefile.Read, Lines, "+
				"OpenRead with a Kind; WriteFileAtomic, CreateAtomic, BeginDir), or add an exception with its reason to DoorExceptions",
				h.file, h.line, h.call, Door)
		}
	})
	for _, e := range DoorExceptions {
		if !used[[2]string{e.File, e.Call}] {
			t.Errorf("door exception %s %s (%s) matches no call: remove it", e.File, e.Call, e.Reason)
		}
	}
	// The walker must see the tree, and the door's own opens: a test that sees nothing passes
	// vacuously.
	if files < 100 || inDoor == 0 {
		t.Fatalf("walked %d files, %d calls inside %s: the walk did not see the module", files, inDoor, Door)
	}
	t.Logf("%d files, %d calls inside %s, %d exceptions", files, inDoor, Door, len(DoorExceptions))
}

// The checker finds each forbidden call, through an alias and as a function value, and lets a
// scanner over memory pass.
func TestDoorHitsFindsCalls(t *testing.T) {
	src := `package p

import (
	"bufio"
	"bytes"
	xos "os"
	"io"
	"archive/zip"
)

func f(w io.Writer, b []byte) {
	xos.ReadFile("a")
	open := xos.Open
	_ = open
	io.Copy(w, nil)
	zip.OpenReader("z")
	bufio.NewScanner(bytes.NewReader(b))
	bufio.NewScanner(nil)
	var sc bufio.Scanner
	_ = sc
	fmt := 0
	_ = fmt
}
`
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	hits, err := doorHits(token.NewFileSet(), path, "p.go")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hits {
		got = append(got, fmt.Sprintf("%d %s", h.line, h.call))
	}
	want := []string{"12 os.ReadFile", "13 os.Open", "15 io.Copy", "16 archive/zip.OpenReader", "18 bufio.NewScanner"}
	if !slices.Equal(got, want) {
		t.Fatalf("hits %q, want %q", got, want)
	}
}
