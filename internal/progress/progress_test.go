package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fakeClock advances by step on every reading.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Unix(0, 0)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

// Written to a file, 100 000 updates over 100 s give about one line per 10 s and no carriage
// return; the first line, after a millisecond of work, shows no rate.
func TestFileGetsALineNowAndThen(t *testing.T) {
	var out bytes.Buffer
	b := newBar(&out, "extract", "tok", 100000, false, fakeClock(time.Millisecond))
	for i := int64(1); i <= 100000; i++ {
		b.Set(i, 100000)
	}
	b.Finish()
	s := out.String()
	if strings.Contains(s, "\r") {
		t.Fatalf("carriage return in a file:\n%q", s)
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) < 5 || len(lines) > 25 {
		t.Fatalf("%d lines for 100 s of work, want about one per 10 s:\n%s", len(lines), s)
	}
	if strings.Contains(lines[0], "/s") {
		t.Errorf("first line shows a rate after a millisecond: %q", lines[0])
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "100.0% (100000/100000 tok)") || !strings.Contains(last, "tok/s") {
		t.Errorf("last line %q, want the final count and rate", last)
	}
}

// On a terminal the line is redrawn in place, throttled, and ended by Finish.
func TestTerminalRedrawsInPlace(t *testing.T) {
	var out bytes.Buffer
	b := newBar(&out, "validate", "rows", 1000, true, fakeClock(10*time.Millisecond))
	for i := int64(1); i <= 1000; i++ {
		b.Set(i, 1000)
	}
	b.Println("note")
	b.Finish()
	s := out.String()
	frames := strings.Count(s, "\r")
	if frames < 10 || frames > 60 {
		t.Fatalf("%d frames for 10 s at one per 200 ms", frames)
	}
	if !strings.HasSuffix(s, "\n") || !strings.Contains(s, "\nnote\n") {
		t.Fatalf("lines not ended:\n%q", s)
	}
}

func TestNilWriterPrintsNothing(t *testing.T) {
	b := New(nil, "x", "y", 10)
	b.Add(3)
	b.Println("z")
	b.Finish()
}
