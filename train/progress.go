package train

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/gelo-research/geloattack/eval"
)

// progress shows training progress: a bar with step, loss, rows/s and ETA on a terminal, plain
// log lines at every log step otherwise (files, CI logs). Wall-clock figures live here only, never
// in metrics.jsonl.
type progress struct {
	w         io.Writer
	bar       *progressbar.ProgressBar
	total     int64
	start     int64
	began     time.Time
	rowsBegan int64
	lastRows  int64
	lastLoss  float64
	unit      string // what rows counts: "rows" (of U) or "tokens"
}

func newProgress(w io.Writer, total, start int64, unit string) *progress {
	p := &progress{w: w, total: total, start: start, began: time.Now(), unit: unit}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		_ = p.bar.Set64(start)
	}
	return p
}

func (p *progress) rate() float64 {
	el := time.Since(p.began).Seconds()
	if el <= 0 {
		return 0
	}
	return float64(p.lastRows) / el
}

func (p *progress) eta(done int64) time.Duration {
	if done <= p.start {
		return 0
	}
	per := time.Since(p.began) / time.Duration(done-p.start)
	return (per * time.Duration(p.total-done)).Round(time.Second)
}

// step records one finished step; rows counts the units (real rows, tokens) seen since the run
// (re)started.
func (p *progress) step(done int64, loss float64, rows int64) {
	p.lastRows, p.lastLoss = rows, loss
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("step %d loss %.4f %.0f %s/s", done, loss, p.rate(), p.unit))
		_ = p.bar.Set64(done)
	}
}

// line prints a log step on non-terminals.
func (p *progress) line(done int64, meanLoss, lr float64) {
	if p.bar != nil {
		return
	}
	fmt.Fprintf(p.w, "step %d/%d  loss %.4f  lr %.2e  %.0f %s/s  eta %s\n",
		done, p.total, meanLoss, lr, p.rate(), p.unit, p.eta(done))
}

// eval prints an evaluation on every kind of output.
func (p *progress) eval(done int64, m map[string]map[string]float64) {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintf(p.w, "eval @ step %d: %s\n", done, eval.MetricsLine(m))
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
