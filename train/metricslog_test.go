package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMetricsLogResumeDropsLaterAndTornLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "metrics.jsonl")
	l, err := openMetricsLog(p, -1)
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

	l, err = openMetricsLog(p, 3)
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
	// A fresh start truncates.
	l, _ = openMetricsLog(p, -1)
	l.close()
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Fatalf("fresh log not empty: %q", b)
	}
}
