package main

import "strings"

// plan is the go command line for the caller's arguments and what they ask of the rendering.
type plan struct {
	argv    []string // arguments of the go command: "test", ...
	raw     bool     // the caller asked for -json: go test's output unparsed
	verbose bool     // -v: every line of every package
	short   bool     // -short: skips without a known reason are the long tests
}

// planArgs builds the go test command line: -json added, ./... added when the caller names no
// package (before -args, whose tail is the test binary's).
func planArgs(args []string) plan {
	head, tail := args, []string(nil)
	for i, a := range args {
		if a == "-args" || a == "--args" {
			head, tail = args[:i], args[i:]
			break
		}
	}
	var p plan
	named := false
	for _, a := range head {
		switch name, val := flagName(a); {
		case name == "json":
			p.raw = val
		case name == "v" || name == "test.v":
			p.verbose = val
		case name == "short" || name == "test.short":
			p.short = val
		case isPackagePattern(a):
			named = true
		}
	}
	p.argv = append([]string{"test"}, head...)
	if !p.raw {
		p.argv = []string{"test", "-json"}
		p.argv = append(p.argv, head...)
	}
	if !named {
		p.argv = append(p.argv, "./...")
	}
	p.argv = append(p.argv, tail...)
	return p
}

// flagName returns the name of a boolean-style flag argument ("-v", "--short", "-json=false")
// and its value; name is empty for anything else.
func flagName(a string) (name string, val bool) {
	if !strings.HasPrefix(a, "-") {
		return "", false
	}
	a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	name, v, has := strings.Cut(a, "=")
	if !has {
		return name, true
	}
	switch v {
	case "true", "1", "t", "T", "TRUE", "True":
		return name, true
	}
	return name, false
}

// isPackagePattern reports whether an argument names packages by path: "./...", "./data/store",
// "../x", ".". Import paths and flag values are not told apart from each other here, so only
// relative patterns count.
func isPackagePattern(a string) bool {
	return a == "." || a == ".." || strings.HasPrefix(a, "./") || strings.HasPrefix(a, "../")
}
