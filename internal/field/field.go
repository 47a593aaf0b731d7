// Package field holds the rules of a config's numeric fields in one place: each schema lists its
// fields once, with their minimum, maximum and what 0 means, in a Table that its Validate checks,
// that the command-line flags overriding a field take their range from, and that the help text
// is written from. Errors carry the key's dotted path as data, so a config file's reader can point
// at the key's line without reading the message.
package field

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Bounds is what a numeric field allows.
type Bounds struct {
	// Int says the field is an integer.
	Int bool
	// Min and Max bound the field, inclusive unless MinOpen or MaxOpen. Every field has both:
	// a bound far above any real use still keeps a value from reaching an allocation that panics,
	// an integer product that overflows, or a float that overflows or underflows the engine's
	// float32 (Inf and NaN are never allowed).
	Min, Max         float64
	MinOpen, MaxOpen bool
	// Zero, when not empty, says what 0 means ("no clipping", "GOMAXPROCS"): 0 is then allowed
	// even outside [Min, Max].
	Zero string
}

// Allows reports whether v is within the bounds (NaN and ±Inf never are).
func (b Bounds) Allows(v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	if v == 0 && b.Zero != "" {
		return true
	}
	if b.Int && v != math.Trunc(v) {
		return false
	}
	return !(v < b.Min || v > b.Max || (b.MinOpen && v == b.Min) || (b.MaxOpen && v == b.Max))
}

// Want is what the field allows in words: "an integer in [1, 1000000000]", "a value in (0, 1]",
// followed by "; 0 = ..." when 0 has a meaning.
func (b Bounds) Want() string {
	l, r := "[", "]"
	if b.MinOpen {
		l = "("
	}
	if b.MaxOpen {
		r = ")"
	}
	kind := "a value"
	if b.Int {
		kind = "an integer"
	}
	s := fmt.Sprintf("%s in %s%s, %s%s", kind, l, Num(b.Min), Num(b.Max), r)
	if b.Zero != "" {
		s += "; 0 = " + b.Zero
	}
	return s
}

// Check returns nil when v is allowed, else an *Error at key naming v and what is allowed.
func (b Bounds) Check(key string, v float64) error {
	if b.Allows(v) {
		return nil
	}
	return &Error{Path: key, Msg: fmt.Sprintf("%s, want %s", Num(v), b.Want())}
}

// Rule is one numeric field of a schema T: its YAML key, its bounds and how to read it.
type Rule[T any] struct {
	// Key is the field's YAML key within its section.
	Key string
	Bounds
	// Get reads the field from a T (a range's largest value for a ranged field).
	Get func(T) float64
	// Lo, when set, reads a ranged field's smallest value, checked too.
	Lo func(T) float64
	// When, when set, says whether the field matters in this T (a shield fraction does not when
	// a fixed shield count is set); a field that does not is not checked.
	When func(T) bool
}

// Table is every numeric field of a schema T, in declaration order.
type Table[T any] []Rule[T]

// Check returns an *Error for the first field of x outside its bounds, or nil.
func (t Table[T]) Check(x T) error {
	for _, r := range t {
		if r.When != nil && !r.When(x) {
			continue
		}
		if r.Lo != nil {
			lo, hi := r.Lo(x), r.Get(x)
			if lo != hi && (!r.Allows(lo) || !r.Allows(hi)) {
				return &Error{Path: r.Key, Msg: fmt.Sprintf("[%s, %s], want %s for both bounds", Num(lo), Num(hi), r.Want())}
			}
		}
		if err := r.Check(r.Key, r.Get(x)); err != nil {
			return err
		}
	}
	return nil
}

// Named is a field's key and bounds, apart from the schema it belongs to.
type Named struct {
	Key string
	Bounds
}

// Named lists the table's keys and bounds, in order.
func (t Table[T]) Named() []Named {
	out := make([]Named, len(t))
	for i, r := range t {
		out[i] = Named{r.Key, r.Bounds}
	}
	return out
}

// Bounds returns the bounds of the field at key; a key not in the table is a programming error.
func (t Table[T]) Bounds(key string) Bounds {
	for _, r := range t {
		if r.Key == key {
			return r.Bounds
		}
	}
	panic("field: no rule for key " + strconv.Quote(key))
}

// Error is a field's value refused by its schema: the key's dotted path and what is wrong.
type Error struct {
	// Path is the dotted YAML path of the field ("train.steps"); empty when the error is not
	// about one field.
	Path string
	// Msg says what is wrong and what is allowed, without the path.
	Msg string
}

// Error renders "path: message".
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Errorf is an *Error at key.
func Errorf(key, format string, args ...any) error {
	return &Error{Path: key, Msg: fmt.Sprintf(format, args...)}
}

// In places err inside section: the path of the first *Error in err is prefixed by section; an
// error that names no field becomes an *Error at the section itself. nil stays nil.
func In(section string, err error) error {
	if err == nil {
		return nil
	}
	var fe *Error
	if !errors.As(err, &fe) {
		return &Error{Path: section, Msg: err.Error()}
	}
	p := fe.Path
	switch {
	case section == "":
	case p == "":
		p = section
	default:
		p = section + "." + p
	}
	return &Error{Path: p, Msg: fe.Msg}
}

// Num writes a number as a config would: integral values without an exponent, others in %g.
func Num(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
		return strconv.FormatInt(int64(x), 10)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
