package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/field"
)

// A numeric flag's range is its field.Bounds: a flag that sets a config field takes the field's
// rule from its schema's table (config.Bounds), other flags state theirs where they are defined.
// A value outside the range is refused when the flag is parsed, and the help prints the range.
// A flag left out keeps its default; a flag that overrides a config field defaults to "the
// config's" and accepts only what the config would.

// boundedInt is an integer flag with a range.
type boundedInt struct {
	p *int64
	b field.Bounds
}

func (v *boundedInt) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v *boundedInt) Set(s string) error {
	x, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: want %s", v.b.Want())
	}
	if !v.b.Allows(float64(x)) {
		return fmt.Errorf("want %s", v.b.Want())
	}
	*v.p = x
	return nil
}

// boundedFloat is a number flag with a range.
type boundedFloat struct {
	p *float64
	b field.Bounds
}

func (v *boundedFloat) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v *boundedFloat) Set(s string) error {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number: want %s", v.b.Want())
	}
	if !v.b.Allows(x) {
		return fmt.Errorf("want %s", v.b.Want())
	}
	*v.p = x
	return nil
}

// intVar defines an integer flag in range b; the help adds the range.
func intVar(fs *flag.FlagSet, p *int, name string, def int, b field.Bounds, usage string) {
	v := int64(def)
	fs.Var(&intTarget{boundedInt{&v, b}, p}, name, usage+" ("+b.Want()+")")
	*p = def
}

// intTarget writes a boundedInt's value through to an int.
type intTarget struct {
	boundedInt
	p *int
}

func (v *intTarget) Set(s string) error {
	if err := v.boundedInt.Set(s); err != nil {
		return err
	}
	*v.p = int(*v.boundedInt.p)
	return nil
}

// intFlag is intVar returning the value's address.
func intFlag(fs *flag.FlagSet, name string, def int, b field.Bounds, usage string) *int {
	p := new(int)
	intVar(fs, p, name, def, b, usage)
	return p
}

// int64Flag defines a 64-bit integer flag in range b.
func int64Flag(fs *flag.FlagSet, name string, def int64, b field.Bounds, usage string) *int64 {
	p := new(int64)
	*p = def
	fs.Var(&boundedInt{p, b}, name, usage+" ("+b.Want()+")")
	return p
}

// floatVar defines a number flag in range b.
func floatVar(fs *flag.FlagSet, p *float64, name string, def float64, b field.Bounds, usage string) {
	*p = def
	fs.Var(&boundedFloat{p, b}, name, usage+" ("+b.Want()+")")
}

// optInt is the value of a flag that overrides a config field: set only when given.
type optInt struct {
	v   int64
	set bool
	b   field.Bounds
}

func (o *optInt) String() string { return strconv.FormatInt(o.v, 10) }

func (o *optInt) Set(s string) error {
	if err := (&boundedInt{&o.v, o.b}).Set(s); err != nil {
		return err
	}
	o.set = true
	return nil
}

// apply writes the flag's value to *p when it was given.
func (o *optInt) apply(p *int) {
	if o.set {
		*p = int(o.v)
	}
}

// overrideInt defines a flag that overrides the config field at path: left out, the config's
// value stays; given, it must be a value the config's rule for the field allows.
func overrideInt(fs *flag.FlagSet, name, path, usage string) *optInt {
	o := &optInt{b: config.Bounds(path)}
	if usage != "" {
		usage = ", " + usage
	}
	fs.Var(o, name, fmt.Sprintf("override %s%s (%s; left out: the config's)", path, usage, o.b.Want()))
	return o
}

// printFlags writes every flag of fs, sorted by name: "  -name TYPE" and its usage on the next
// line, then its default when that is not the zero value. Unlike flag.PrintDefaults it never
// reads a back-quoted word of the usage as the flag's type name.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		line := "  -" + f.Name
		if t := typeName(f); t != "" {
			line += " " + t
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(f.Usage, "\n", "\n    \t"))
		if !isZeroDefault(f) {
			if typeName(f) == "string" {
				fmt.Fprintf(w, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(w, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w)
	})
}

// typeName is the placeholder of a flag's value in the help: "" for a boolean.
func typeName(f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	switch v := f.Value.(type) {
	case *boundedInt, *intTarget, *optInt:
		return "int"
	case *boundedFloat:
		return "float"
	case *samplerFlag:
		switch {
		case v.o.values != nil:
			return "string"
		case gelo.Rules.Bounds(v.o.key).Int:
			return "int"
		}
		return "float"
	}
	switch fmt.Sprintf("%T", f.Value) {
	case "*flag.stringValue":
		return "string"
	case "*flag.intValue", "*flag.int64Value":
		return "int"
	case "*flag.uintValue", "*flag.uint64Value":
		return "uint"
	case "*flag.float64Value":
		return "float"
	case "*flag.durationValue":
		return "duration"
	}
	return "value"
}

// isZeroDefault reports whether a flag's default is its type's zero value, which the help omits.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}
