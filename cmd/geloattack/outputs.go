package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// fileFlags names a command's flags that name files: out, the files it writes when its work is
// done; in, the files (or directories) it reads.
type fileFlags struct {
	out, in []string
}

// outputFlags is, for every command that writes a result file at its end, which flags name what
// it writes and reads. The command tree checks each output before the command runs
// (checkOutputFlags), so a mistyped -out is refused at once rather than after hours of work (a
// decode to -out nosuch/r.json once ran to the end and threw its result away), and an output
// that is one of the command's inputs is refused instead of replacing it. Commands that write
// directories check them themselves (safefile.BeginDir).
func outputFlags(c *Command) fileFlags {
	// By name, not by value: baseline -attack content runs a copy of recover (baselineDelegate).
	switch c.Name {
	case cmdBaseline.Name:
		return fileFlags{out: []string{"out"}, in: []string{"config"}}
	case cmdDecode.Name:
		// decode's -out is a directory, which decode checks itself (decode.OpenDir).
		return fileFlags{out: []string{"deployer-texts"}, in: []string{"config", "texts"}}
	case cmdRecover.Name:
		// -set file:PATH reads PATH.
		return fileFlags{out: []string{"out", "table", "deployer-texts"}, in: []string{"config", "set"}}
	}
	return fileFlags{}
}

// checkOutputFlags checks c's output flags as parsed in fs (see outputFlags).
func checkOutputFlags(c *Command, fs *flag.FlagSet) error {
	ff := outputFlags(c)
	value := func(name string) string {
		f := fs.Lookup(name)
		if f == nil {
			return ""
		}
		return f.Value.String()
	}
	seen := map[string]string{} // output path -> its flag
	for _, o := range ff.out {
		path := value(o)
		if path == "" {
			continue
		}
		if err := safefile.CheckOutput(path); err != nil {
			return fmt.Errorf("-%s: %w", o, err)
		}
		if prev, dup := seen[path]; dup {
			return fmt.Errorf("-%s and -%s both name %s: give each output its own file", prev, o, path)
		}
		seen[path] = o
		for _, i := range ff.in {
			in := strings.TrimPrefix(value(i), "file:")
			if in != "" && sameFile(path, in) {
				return fmt.Errorf("-%s %s is the file -%s reads: refusing to write over an input", o, path, i)
			}
		}
	}
	return nil
}

// sameFile reports whether a and b name the same existing file (through any links).
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}
