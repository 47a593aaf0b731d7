package overhead

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProtocolBench is the full benchmark, run only when GELOATTACK_OVERHEAD_OUT names a
// directory: it writes overhead.md, overhead.csv and overhead.png there and prints the Markdown.
// Until the CLI has `geloattack protocol bench`, this is how to run it:
//
//	GELOATTACK_OVERHEAD_OUT=/tmp/overhead go test ./protocol/overhead -run TestProtocolBench -v -timeout 60m
//
// GELOATTACK_OVERHEAD_NS (e.g. "64,128,256"), _REPEATS, _D and _MAX_TIME_PER_N (a Go duration)
// override the defaults; Ctrl-C stops between measurements and writes what finished.
func TestProtocolBench(t *testing.T) {
	out := os.Getenv("GELOATTACK_OVERHEAD_OUT")
	if out == "" {
		t.Skip("set GELOATTACK_OVERHEAD_OUT to a directory to run the benchmark")
	}
	var cfg Config
	if s := os.Getenv("GELOATTACK_OVERHEAD_NS"); s != "" {
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("GELOATTACK_OVERHEAD_NS: %v", err)
			}
			cfg.Ns = append(cfg.Ns, n)
		}
	}
	for name, dst := range map[string]*int{"GELOATTACK_OVERHEAD_REPEATS": &cfg.Repeats, "GELOATTACK_OVERHEAD_D": &cfg.D} {
		if s := os.Getenv(name); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			*dst = v
		}
	}
	if s := os.Getenv("GELOATTACK_OVERHEAD_MAX_TIME_PER_N"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("GELOATTACK_OVERHEAD_MAX_TIME_PER_N: %v", err)
		}
		cfg.MaxTimePerN = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	res, runErr := Run(ctx, cfg, os.Stdout)
	if runErr != nil && len(res.Rows) == 0 {
		t.Fatal(runErr)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"overhead.md": res.Markdown(), "overhead.csv": res.CSV()} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := res.Plot(filepath.Join(out, "overhead.png")); err != nil {
		t.Fatal(err)
	}
	os.Stdout.Write(res.Markdown())
	t.Logf("took %v; wrote %s/overhead.{md,csv,png}", time.Since(start).Round(time.Second), out)
	if runErr != nil {
		t.Fatal(runErr)
	}
}
