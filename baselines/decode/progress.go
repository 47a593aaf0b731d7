package decode

import (
	"fmt"
	"io"
	"math"
	"time"
)

// Progress writes a line after each finished batch: the batches done of the run's total, the
// batch's figures and time, the time elapsed since the run (or its resumption) started and the
// ETA of the rest at the pace of the batches this process ran.
type Progress struct {
	w                      io.Writer
	total, done, startDone int
	start                  time.Time
	now                    func() time.Time
}

// NewProgress starts the count of a run of total batches of which done are already done (a
// resume's); w nil writes nothing.
func NewProgress(w io.Writer, total, done int) *Progress {
	return newProgressAt(w, total, done, time.Now)
}

// newProgressAt is NewProgress with the clock now (tests step it).
func newProgressAt(w io.Writer, total, done int, now func() time.Time) *Progress {
	return &Progress{w: w, total: total, done: done, startDone: done, start: now(), now: now}
}

// Batch counts r as done and writes its line.
func (p *Progress) Batch(r BatchResult) {
	p.done++
	if p.w == nil {
		return
	}
	el := p.now().Sub(p.start)
	eta := "-"
	if ran := p.done - p.startDone; ran > 0 {
		eta = time.Duration(float64(el) / float64(ran) * float64(p.total-p.done)).Round(time.Second).String()
	}
	figures := fmt.Sprintf("exact %.2f, token accuracy %.2f, %d claims (%d right)", r.Exact, r.TokenAcc, r.Claims, r.ClaimsRight)
	if math.IsNaN(r.Exact) {
		figures = fmt.Sprintf("bag P / R %.2f / %.2f", r.BagPrecision, r.BagRecall)
	}
	fmt.Fprintf(p.w, "decode: %d/%d batches (%.0f%%): batch %d: %s, %.1f s; elapsed %s, ETA %s\n",
		p.done, p.total, 100*float64(p.done)/float64(max(1, p.total)), r.Index, figures, r.Seconds,
		el.Round(time.Second), eta)
}
