package field

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

func TestBounds(t *testing.T) {
	b := Bounds{Int: true, Min: 1, Max: 10, Zero: "the default"}
	for _, c := range []struct {
		v  float64
		ok bool
	}{{0, true}, {1, true}, {10, true}, {11, false}, {-1, false}, {2.5, false}, {math.NaN(), false}, {math.Inf(1), false}} {
		if got := b.Allows(c.v); got != c.ok {
			t.Errorf("Allows(%v) = %v, want %v", c.v, got, c.ok)
		}
	}
	if got, want := b.Want(), "an integer in [1, 10]; 0 = the default"; got != want {
		t.Errorf("Want() = %q, want %q", got, want)
	}
	open := Bounds{Min: 0, Max: 1, MinOpen: true, MaxOpen: true}
	if open.Allows(0) || open.Allows(1) || !open.Allows(0.5) || open.Want() != "a value in (0, 1)" {
		t.Errorf("open bounds: %q", open.Want())
	}
	err := open.Check("k", 1)
	var fe *Error
	if !errors.As(err, &fe) || fe.Path != "k" || fe.Msg != "1, want a value in (0, 1)" {
		t.Errorf("Check: %#v", err)
	}
}

type schema struct {
	N      int
	Lo, Hi float64
	On     bool
}

func TestTableAndIn(t *testing.T) {
	tab := Table[schema]{
		{Key: "n", Bounds: Bounds{Int: true, Min: 1, Max: 5}, Get: func(s schema) float64 { return float64(s.N) }},
		{Key: "r", Bounds: Bounds{Min: 0, Max: 1}, Lo: func(s schema) float64 { return s.Lo }, Get: func(s schema) float64 { return s.Hi },
			When: func(s schema) bool { return s.On }},
	}
	if err := tab.Check(schema{N: 3, Lo: -1, Hi: 2}); err != nil {
		t.Errorf("a field that does not apply was checked: %v", err)
	}
	err := tab.Check(schema{N: 3, Lo: 0.5, Hi: 2, On: true})
	if err == nil || err.Error() != "r: [0.5, 2], want a value in [0, 1] for both bounds" {
		t.Errorf("range: %v", err)
	}
	err = In("sec", fmt.Errorf("pkg: %w", errors.Join(tab.Check(schema{N: 9}), errors.New("other"))))
	if err == nil || err.Error() != "sec.n: 9, want an integer in [1, 5]" {
		t.Errorf("In: %v", err)
	}
	if err := In("sec", errors.New("no key")); err.Error() != "sec: no key" {
		t.Errorf("In without a field: %v", err)
	}
	if tab.Bounds("n").Max != 5 || len(tab.Named()) != 2 {
		t.Error("Bounds or Named")
	}
}
