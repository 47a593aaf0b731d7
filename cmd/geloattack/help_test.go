package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"
)

// Every help page of the command tree is generated and correct: it starts with the command's
// usage line, a group lists each subcommand with its summary, a leaf documents every flag on a
// line of its own ("  -name TYPE", TYPE one of the known placeholders, never a word of the usage
// text as flag.PrintDefaults reads back-quoted words) followed by a non-empty description, and no
// page speaks of the project's issue tracker.
func TestEveryHelpPage(t *testing.T) {
	flagLine := regexp.MustCompile(`^  -([A-Za-z0-9-]+)( (int|float|string|uint|duration|value))?$`)
	pages := 0
	root.walk(root.Name, func(path string, c *Command) {
		pages++
		var out bytes.Buffer
		err := c.run(context.Background(), path, []string{"-h"}, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s -h: %v, want flag.ErrHelp", path, err)
		}
		page := out.String()
		if !strings.HasPrefix(page, "usage: "+path+" ") {
			t.Errorf("%s -h does not start with its usage line:\n%s", path, page)
		}
		if c != root && c.Short == "" {
			t.Errorf("%s has no summary", path)
		}
		if regexp.MustCompile(`(?i)\bissue \d+`).MatchString(page) {
			t.Errorf("%s -h speaks of an issue of the tracker:\n%s", path, page)
		}
		if c.Flags == nil {
			for _, s := range c.Commands {
				if !strings.Contains(page, "  "+s.Name+" ") || !strings.Contains(page, s.Short) {
					t.Errorf("%s -h does not list %s with its summary:\n%s", path, s.Name, page)
				}
			}
			return
		}
		if c.Long == "" {
			t.Errorf("%s has no description", path)
		}
		fs := flag.NewFlagSet(path, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.Flags(fs)
		documented := map[string]bool{}
		lines := strings.Split(page, "\n")
		for i, l := range lines {
			if !strings.HasPrefix(l, "  -") {
				continue
			}
			m := flagLine.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("%s -h: garbled flag line %q", path, l)
				continue
			}
			if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) == "" {
				t.Errorf("%s -h: flag -%s has no description", path, m[1])
			}
			documented[m[1]] = true
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !documented[f.Name] {
				t.Errorf("%s -h does not document -%s:\n%s", path, f.Name, page)
			}
		})
	})
	if pages < 17 {
		t.Errorf("walked %d help pages, want every command (17 or more)", pages)
	}
}

// geloattack -h from the binary lists every command and exits 0.
func TestRootHelp(t *testing.T) {
	out, err := cli(t, "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("geloattack -h: %v\n%s", err, out)
	}
	for _, c := range root.Commands {
		if !bytes.Contains(out, []byte("  "+c.Name+" ")) {
			t.Errorf("geloattack -h lacks %s:\n%s", c.Name, out)
		}
	}
}
