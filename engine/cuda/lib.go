package cuda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ebitengine/purego"
)

// library is one opened shared object.
type library struct {
	path   string
	handle uintptr
}

// openFirst opens the first of paths that loads and exports every symbol in
// need. It returns the errors of all tries when none does.
func openFirst(paths []string, need ...string) (*library, error) {
	var errs []string
	for _, p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", p, shortDlerror(err)))
			continue
		}
		missing := ""
		for _, s := range need {
			if _, err := purego.Dlsym(h, s); err != nil {
				missing = s
				break
			}
		}
		if missing != "" {
			purego.Dlclose(h)
			errs = append(errs, fmt.Sprintf("%s: no symbol %s", p, missing))
			continue
		}
		return &library{path: p, handle: h}, nil
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

// shortDlerror trims dlerror's text, which repeats the path.
func shortDlerror(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		return s[i+2:]
	}
	return s
}

// sym returns the address of the C function name.
func (l *library) sym(name string) (uintptr, error) {
	p, err := purego.Dlsym(l.handle, name)
	if err != nil {
		return 0, fmt.Errorf("%s: no symbol %s", l.path, name)
	}
	return p, nil
}

// bind sets *fptr (a pointer to a func variable) to the C function name.
func (l *library) bind(name string, fptr any) error {
	p, err := l.sym(name)
	if err != nil {
		return err
	}
	purego.RegisterFunc(fptr, p)
	return nil
}

// bindAll binds each name to its func pointer and returns the first error.
func (l *library) bindAll(fns map[string]any) error {
	for name, f := range fns {
		if err := l.bind(name, f); err != nil {
			return err
		}
	}
	return nil
}

// close unloads the library.
func (l *library) close() {
	if l != nil && l.handle != 0 {
		purego.Dlclose(l.handle)
		l.handle = 0
	}
}
