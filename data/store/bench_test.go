package store

import (
	"bufio"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rssKiB reads a field of /proc/self/status (VmRSS, RssFile, RssAnon) in KiB, or -1.
func rssKiB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v
		}
	}
	return -1
}

// evict drops a file's pages from the page cache, so the next Open reads from disk.
func evict(tb testing.TB, path string) {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	const fadvDontNeed = 4
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		tb.Logf("fadvise: %v (timing is warm)", errno)
	}
}

// BenchmarkOpenLarge opens the store named by GELOATTACK_BENCH_STORE with a cold page cache,
// then reads 16 random texts; it reports the open time and the resident memory each step adds.
// Make one with: geloattack store synth -out /tmp/big -texts 6000 -d 4096 -e 384
func BenchmarkOpenLarge(b *testing.B) {
	dir := os.Getenv("GELOATTACK_BENCH_STORE")
	if dir == "" {
		b.Skip("set GELOATTACK_BENCH_STORE to a large store")
	}
	var openSec, openRSS, readRSS float64
	for b.Loop() {
		b.StopTimer()
		evict(b, filepath.Join(dir, TokensFile))
		evict(b, filepath.Join(dir, TextsFile))
		rss0 := rssKiB("VmRSS")
		b.StartTimer()
		t0 := time.Now()
		s, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		openSec += time.Since(t0).Seconds()
		b.StopTimer()
		rss1 := rssKiB("VmRSS")
		rng := rand.New(rand.NewPCG(1, 2))
		rows := make([]float32, 0)
		for k := 0; k < 16; k++ {
			i := rng.IntN(s.NumTexts())
			n := s.NumTokens(i)
			if cap(rows) < n*s.D() {
				rows = make([]float32, n*s.D())
			}
			if err := s.Rows(i, 0, n, rows[:n*s.D()]); err != nil {
				b.Fatal(err)
			}
		}
		rss2 := rssKiB("VmRSS")
		openRSS += rss1 - rss0
		readRSS += rss2 - rss1
		s.Close()
		b.StartTimer()
	}
	t0 := time.Now()
	s, err := Open(dir) // pages cached by the last iteration
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(t0).Seconds(), "s/warm-open")
	s.Close()
	n := float64(b.N)
	b.ReportMetric(openSec/n, "s/open")
	b.ReportMetric(openRSS/n/1024, "MiB-rss/open")
	b.ReportMetric(readRSS/n/1024, "MiB-rss/16texts")
}

// BenchmarkValidateLarge runs the full scan of the store named by GELOATTACK_BENCH_STORE.
func BenchmarkValidateLarge(b *testing.B) {
	dir := os.Getenv("GELOATTACK_BENCH_STORE")
	if dir == "" {
		b.Skip("set GELOATTACK_BENCH_STORE to a large store")
	}
	var bytes int64
	for b.Loop() {
		if err := Validate(b.Context(), dir, func(done, total int64) {}); err != nil {
			b.Fatal(err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, TokensFile)); err == nil {
		bytes = st.Size()
	}
	b.SetBytes(bytes)
}
