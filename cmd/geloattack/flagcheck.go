package main

import (
	"flag"
	"fmt"
	"strconv"
)

// span is the allowed range of an integer flag.
type span struct{ lo, hi int64 }

// atLeast is the range [lo, a limit far above any real use] (the config's size limits are of the
// same order: they keep a value from reaching an allocation that panics).
func atLeast(lo int64) span { return span{lo, 1 << 30} }

// checkFlags refuses an integer flag given on the command line outside its range. A flag left out
// keeps its documented default ("0 = keep the config's"), but a 0 or a negative number typed by
// the user is a mistake to report, never a silent default.
func checkFlags(fs *flag.FlagSet, spans map[string]span) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		r, ok := spans[f.Name]
		if !ok || err != nil {
			return
		}
		v, perr := strconv.ParseInt(f.Value.String(), 10, 64)
		if perr != nil || v < r.lo || v > r.hi {
			err = fmt.Errorf("%s: flag -%s %s: want an integer in [%d, %d] (leave the flag out to keep its default)", fs.Name(), f.Name, f.Value, r.lo, r.hi)
		}
	})
	return err
}

// noArgs refuses positional arguments after the flags of a command that takes none: the usual
// cause is a flag typed after a word, which the flag package stops parsing at.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q: this command takes only flags, and every flag must come before any other word (see %s -h)",
			fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}
