package extraction

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/models/bert/berttest"
)

// cpuTime is the process's user + system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type discardSink struct{ rows int }

func (d *discardSink) AddText(_ int64, _ string, _ bool, ids []int32, _ []float32, _ []float32) error {
	d.rows += len(ids)
	return nil
}

// BenchmarkExtractMiniLM measures end-to-end extraction throughput (tokens/s) of all-MiniLM-L6-v2
// on the first 300 texts of the cached corpus, in wall-clock tokens/s and tokens per CPU-second. It needs scripts/fetch-data.sh to have run.
func BenchmarkExtractMiniLM(b *testing.B) {
	m, tok, _ := berttest.MiniLM(b)
	dir, err := corpus.DefaultCorpusDir()
	if err != nil {
		b.Skip(err)
	}
	if _, err := os.Stat(dir); err != nil {
		b.Skipf("corpus not downloaded (%v); run scripts/fetch-data.sh corpus", err)
	}
	src, err := corpus.ReadSource(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	texts := src.Texts[:300]
	var tokens int64
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := Run(context.Background(), m, tok, texts, Options{Layer: 3}, &discardSink{})
		if err != nil {
			b.Fatal(err)
		}
		tokens += st.Tokens
	}
	// On a shared machine wall-clock tok/s depends on the other load; tokens per CPU-second
	// times the cores available is the throughput the machine would give this run alone.
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric(float64(tokens)/(cpuTime(b)-cpu0).Seconds(), "tok/cpu-s")
}
