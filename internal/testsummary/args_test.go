package main

import (
	"slices"
	"testing"
)

// go test gets -json and ./... unless the caller named packages or asked for -json; -args and
// what follows stay last; -v and -short are seen in their flag spellings.
func TestPlanArgs(t *testing.T) {
	for _, c := range []struct {
		args          []string
		argv          []string
		raw, v, short bool
	}{
		{nil, []string{"test", "-json", "./..."}, false, false, false},
		{[]string{"-count=1"}, []string{"test", "-json", "-count=1", "./..."}, false, false, false},
		{[]string{"-run", "TestX", "./data/store"}, []string{"test", "-json", "-run", "TestX", "./data/store"}, false, false, false},
		{[]string{"."}, []string{"test", "-json", "."}, false, false, false},
		{[]string{"-v", "--short"}, []string{"test", "-json", "-v", "--short", "./..."}, false, true, true},
		{[]string{"-v=false", "-short=true"}, []string{"test", "-json", "-v=false", "-short=true", "./..."}, false, false, true},
		{[]string{"-json"}, []string{"test", "-json", "./..."}, true, false, false},
		{[]string{"-count=1", "-args", "-x", "./y"}, []string{"test", "-json", "-count=1", "./...", "-args", "-x", "./y"}, false, false, false},
	} {
		p := planArgs(c.args)
		if !slices.Equal(p.argv, c.argv) || p.raw != c.raw || p.verbose != c.v || p.short != c.short {
			t.Errorf("planArgs(%q) = %+v, want argv %q raw %v verbose %v short %v", c.args, p, c.argv, c.raw, c.v, c.short)
		}
	}
}
