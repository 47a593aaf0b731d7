package sweep

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/config"
)

// reserved are the run-config fields a sweep sets itself and so cannot vary: every cell is named
// after its settings, and its directory is chosen by the sweep.
var reserved = map[string]string{
	"name":    "the sweep names every cell after its settings",
	"out_dir": "the sweep puts every cell in its own directory under -out",
}

// checkPath reports whether path names a field of the run config, by its dotted YAML keys.
func checkPath(path string) error {
	if why, ok := reserved[path]; ok {
		return fmt.Errorf("%q cannot be an axis: %s", path, why)
	}
	t := reflect.TypeOf(config.Run{})
	parts := strings.Split(path, ".")
	for i, p := range parts {
		if t.Kind() != reflect.Struct {
			return fmt.Errorf("%q: %s is a value, not a section with a key %q", path, strings.Join(parts[:i], "."), p)
		}
		f, ok := fieldByTag(t, p)
		if !ok {
			where := "the run config"
			if i > 0 {
				where = strings.Join(parts[:i], ".")
			}
			return fmt.Errorf("%q: %s has no key %q (known: %s)", path, where, p, strings.Join(tags(t), ", "))
		}
		t = f.Type
	}
	return nil
}

// fieldByTag finds the struct field whose YAML name is tag.
func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if yamlName(f) == tag {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// tags lists the YAML names of a struct's fields, sorted.
func tags(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if n := yamlName(t.Field(i)); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	n, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if n == "-" {
		return ""
	}
	return n
}

// Field is one leaf of a run config (see config.Field).
type Field = config.Field

// Fields lists every leaf of cfg in declaration order (see config.Fields).
func Fields(cfg config.Run) []Field { return config.Fields(cfg) }
