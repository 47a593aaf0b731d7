package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"testing"
)

// Commands that take words accept flags after them (`eval RUN -batches 2`), "--" ends the flags,
// and a command of flags only still stops at its first word.
func TestParseInterspersed(t *testing.T) {
	for _, c := range []struct {
		args         []string
		interspersed bool
		words        []string
		n            int
		q            bool
	}{
		{[]string{"RUN", "-n", "2"}, true, []string{"RUN"}, 2, false},
		{[]string{"-q", "A", "B", "-n", "3"}, true, []string{"A", "B"}, 3, true},
		{[]string{"A", "--", "-n", "4"}, true, []string{"A", "-n", "4"}, 0, false},
		{[]string{"A", "-n", "5"}, false, []string{"A", "-n", "5"}, 0, false},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		n := fs.Int("n", 0, "")
		q := fs.Bool("q", false, "")
		words, err := parseInterspersed(fs, c.args, c.interspersed)
		if err != nil || !slices.Equal(words, c.words) || *n != c.n || *q != c.q {
			t.Errorf("%v (interspersed %v): words %q n %d q %v err %v; want %q %d %v", c.args, c.interspersed, words, *n, *q, err, c.words, c.n, c.q)
		}
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseInterspersed(fs, []string{"RUN", "-nosuch"}, true); err == nil {
		t.Error("an unknown flag after a word was accepted")
	}
}

// The error main prints is not prefixed twice with the command's name.
func TestErrorTextDropsTheCommandsOwnPrefix(t *testing.T) {
	err := fmt.Errorf("decode: -model DIR is required")
	if got := errorText(err, "decode"); got != "-model DIR is required" {
		t.Errorf("errorText = %q", got)
	}
	if got := errorText(errors.New("store x: bad"), "decode"); got != "store x: bad" {
		t.Errorf("errorText of another prefix = %q", got)
	}
}
