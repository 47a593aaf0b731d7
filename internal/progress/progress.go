// Package progress reports the progress of a long job: on a terminal one line redrawn in place a
// few times a second; in a file or a pipe (store extract 2> log) a whole line now and then, so
// that a log holds a few lines rather than thousands of carriage-return frames.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

const (
	// ttyEvery is how often a terminal line is redrawn.
	ttyEvery = 200 * time.Millisecond
	// logEvery is how often a line is written to a file or pipe.
	logEvery = 10 * time.Second
	// rateAfter is how long the job must have run before a rate is shown: over the first
	// milliseconds a few items give a rate that means nothing (millions per second).
	rateAfter = time.Second
)

// Bar is the progress of one job, counted in units (rows, files, tokens).
type Bar struct {
	w          io.Writer
	what, unit string
	tty        bool
	now        func() time.Time
	start      time.Time
	last       time.Time
	done       int64
	total      int64
	drawn      bool // a terminal line is on screen, not yet ended by a newline
}

// New starts a bar for a job named what on w; a nil w gives a bar that prints nothing.
func New(w io.Writer, what, unit string, total int64) *Bar {
	return newBar(w, what, unit, total, isTerminal(w), time.Now)
}

func newBar(w io.Writer, what, unit string, total int64, tty bool, now func() time.Time) *Bar {
	return &Bar{w: w, what: what, unit: unit, total: total, tty: tty, now: now, start: now()}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Add counts n more units done.
func (b *Bar) Add(n int64) { b.Set(b.done+n, b.total) }

// Set records done of total units and prints when it is time to.
func (b *Bar) Set(done, total int64) {
	if b == nil || b.w == nil {
		return
	}
	b.done, b.total = done, total
	now := b.now()
	every := logEvery
	if b.tty {
		every = ttyEvery
	}
	if done < total && now.Sub(b.last) < every {
		return
	}
	if !b.tty && done >= total {
		return // Finish writes the last line
	}
	b.last = now
	b.print(now)
}

func (b *Bar) print(now time.Time) {
	pct := 100.0
	if b.total > 0 {
		pct = 100 * float64(b.done) / float64(b.total)
	}
	line := fmt.Sprintf("%s: %5.1f%% (%d/%d %s)", b.what, pct, b.done, b.total, b.unit)
	if el := now.Sub(b.start); el >= rateAfter {
		line += fmt.Sprintf(", %.0f %s/s", float64(b.done)/el.Seconds(), b.unit)
	}
	if b.tty {
		fmt.Fprintf(b.w, "\r%s\x1b[K", line)
		b.drawn = true
		return
	}
	fmt.Fprintln(b.w, line)
}

// Println prints msg on a line of its own, ending a terminal line first.
func (b *Bar) Println(msg string) {
	if b == nil || b.w == nil {
		return
	}
	b.endLine()
	fmt.Fprintln(b.w, msg)
}

// Finish prints the final count and ends the line.
func (b *Bar) Finish() {
	if b == nil || b.w == nil {
		return
	}
	b.print(b.now())
	b.endLine()
}

func (b *Bar) endLine() {
	if b.drawn {
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}
