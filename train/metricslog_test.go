package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/safefile/safefiletest"
)

func TestMetricsLogResumeDropsLaterAndKeepsTornLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "metrics.jsonl")
	l, _, err := openMetricsLog(p, -1)
	if err != nil {
		t.Fatal(err)
	}
	for s := int64(1); s <= 5; s++ {
		if err := l.write(map[string]any{"step": s, "loss": float64(s) / 10}); err != nil {
			t.Fatal(err)
		}
	}
	l.close()
	// A crash mid-write leaves a torn line.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":6,"lo`)
	f.Close()

	l, notes, err := openMetricsLog(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.write(map[string]any{"step": int64(4), "loss": 0.4}); err != nil {
		t.Fatal(err)
	}
	l.close()
	b, _ := os.ReadFile(p)
	want := strings.Join([]string{
		`{"loss":0.1,"step":1}`, `{"loss":0.2,"step":2}`, `{"loss":0.3,"step":3}`, `{"loss":0.4,"step":4}`, ``,
	}, "\n")
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
	// The torn line is kept aside and named, not dropped.
	side := p + ".damaged-1"
	if b, err := os.ReadFile(side); err != nil || string(b) != `{"step":6,"lo`+"\n" {
		t.Fatalf("side file %s: %q %v", side, b, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], side) || !strings.Contains(notes[0], "line 6") {
		t.Fatalf("notes %q do not name %s and line 6", notes, side)
	}
	// A fresh start truncates.
	l, _, _ = openMetricsLog(p, -1)
	l.close()
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Fatalf("fresh log not empty: %q", b)
	}
}

// A damaged line in the middle of the log goes to a side file with a note naming it, its line
// number and the count; the valid lines after it that belong before the resume step are kept.
// Before, the damaged line and every line after it were dropped without a word.
func TestMetricsLogResumeKeepsLinesAroundDamage(t *testing.T) {
	for _, tc := range []struct {
		name, bad string
		count     int
	}{
		{"garbage", "\x00\x01garbage", 1},
		{"no-step", `{"loss":0.25}`, 1},
		{"cut", `{"loss":0.2`, 1},
		{"two", "not json\n[1,2]", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "metrics.jsonl")
			src := `{"step":1}` + "\n" + tc.bad + "\n" + `{"step":2}` + "\n" + `{"step":3}` + "\n" + `{"step":4}` + "\n"
			os.WriteFile(p, []byte(src), 0o644)
			// A side file of an earlier resume is kept: the next one gets another name.
			os.WriteFile(p+".damaged-1", []byte("earlier\n"), 0o644)
			l, notes, err := openMetricsLog(p, 3)
			if err != nil {
				t.Fatal(err)
			}
			l.close()
			if b, _ := os.ReadFile(p); string(b) != `{"step":1}`+"\n"+`{"step":2}`+"\n"+`{"step":3}`+"\n" {
				t.Fatalf("log kept %q", b)
			}
			side := p + ".damaged-2"
			if b, _ := os.ReadFile(side); string(b) != tc.bad+"\n" {
				t.Fatalf("side file holds %q, want %q", b, tc.bad+"\n")
			}
			if b, _ := os.ReadFile(p + ".damaged-1"); string(b) != "earlier\n" {
				t.Fatalf("earlier side file changed: %q", b)
			}
			if len(notes) != 1 || !strings.Contains(notes[0], side) || !strings.Contains(notes[0], "line 2") ||
				!strings.Contains(notes[0], " "+string(rune('0'+tc.count))+" damaged") {
				t.Fatalf("notes %q do not name %s, line 2 and the count %d", notes, side, tc.count)
			}
		})
	}
}

// metrics.jsonl planted as a link to a file outside the run directory (or as a FIFO, a link to
// /dev/zero, a directory) is refused naming it, fresh or resumed; the victim keeps its content.
// Before, a resume wrote the metrics through the link.
func TestMetricsLogRefusesHostileFile(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo", "devzero", "dir"} {
		for _, keep := range []int64{-1, 3} {
			root := t.TempDir()
			victim := filepath.Join(root, "victim.txt")
			os.WriteFile(victim, []byte(`{"step":1}`+"\n"), 0o644)
			p := filepath.Join(root, "metrics.jsonl")
			safefiletest.Plant(t, kind, p, victim)
			l, _, err := openMetricsLog(p, keep)
			if err == nil {
				l.close()
				t.Errorf("%s, keep %d: accepted", kind, keep)
			} else if !strings.Contains(err.Error(), p) {
				t.Errorf("%s, keep %d: %v does not name %s", kind, keep, err, p)
			}
			if b, _ := os.ReadFile(victim); string(b) != `{"step":1}`+"\n" {
				t.Errorf("%s, keep %d: victim is now %q", kind, keep, b)
			}
		}
	}
}
