package decode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/shard"
)

// longRun is the toy run the output-directory tests decode: 5 batches of 4 texts, blocks 0 and 1,
// with the order margin measured (its figures are in every line).
type longRun struct {
	m     *toy
	texts [][]int
	opt   Options
	rec   Record
}

func newLongRun() longRun {
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.ValFrac = gelo.Fixed(4), 0.3
	opt := Options{Sampler: cfg, Split: data.Train, Batches: 5, Blocks: []int{0, 1}}
	return longRun{m: newToy(200, 64, 3, 1), texts: sourceTexts(40, 200, 2), opt: opt,
		rec: Record{Batches: 5, Shard: shard.All(), Settings: []Setting{{"model", "toy 200 x 64"}, {"beam", "0"}}}}
}

// run decodes into dir (opened with resume) what the shard owes, cancelling after stopAfter
// batches of this call when stopAfter > 0; it returns the batches this call ran and Run's error.
func (l longRun) run(t *testing.T, dir string, shard Shard, resume bool, stopAfter int) ([]int64, error) {
	t.Helper()
	rec := l.rec
	rec.Shard = shard
	d, err := OpenDir(dir, rec, resume, new(safefile.Files)) // a command's door, which remembers inputs
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ran []int64
	opt := l.opt
	opt.OnBatch = func(r BatchResult) error {
		ran = append(ran, r.Index)
		if len(ran) == stopAfter {
			cancel()
		}
		return nil
	}
	err = d.Run(ctx, l.m, l.texts, opt)
	if _, _, serr := d.WriteSummary(false); serr != nil {
		t.Fatal(serr)
	}
	return ran, err
}

// read is file name of dir.
func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameFiles checks that dirs a and b hold the same bytes in the files every run of the same
// options writes alike.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	for _, name := range []string{OptionsFile, ResultsFile, SummaryFile} {
		if x, y := read(t, a, name), read(t, b, name); !bytes.Equal(x, y) {
			t.Errorf("%s differs between %s and %s:\n%s\n---\n%s", name, a, b, x, y)
		}
	}
}

// A decode killed after 2 of 5 batches (its context cancelled, then a cut line left by a crash in
// the next append) and resumed writes the same results.jsonl, options.json and summary.json as
// one uninterrupted run, running only the 3 batches it lacked; the lines read back are the
// results Run returns in memory, and the summary computed from them is the in-memory one.
func TestResumeGivesTheUninterruptedRun(t *testing.T) {
	l := newLongRun()
	whole := filepath.Join(t.TempDir(), "whole")
	if ran, err := l.run(t, whole, shard.All(), false, 0); err != nil || len(ran) != 5 {
		t.Fatalf("uninterrupted run: ran %v, %v", ran, err)
	}
	killed := filepath.Join(t.TempDir(), "killed")
	ran, err := l.run(t, killed, shard.All(), false, 2)
	if !errors.Is(err, context.Canceled) || len(ran) != 2 {
		t.Fatalf("cancelled run: ran %v, err %v; want 2 batches and context.Canceled", ran, err)
	}
	for name, cut := range map[string]string{ResultsFile: `{"index":2,"truth":[[1,`, TimingFile: `{"batch":2,"sec`} {
		f, err := os.OpenFile(filepath.Join(killed, name), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(cut)
		f.Close()
	}
	if d, err := OpenDir(killed, l.rec, false, nil); err == nil || !strings.Contains(err.Error(), "-resume") {
		d.Close()
		t.Fatalf("a second run without -resume into the directory: %v, want a refusal naming -resume", err)
	}
	d, err := OpenDir(killed, l.rec, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Done() != 2 || d.Total() != 5 || len(d.Notes) != 1 || !strings.Contains(d.Notes[0], "cut last line") {
		t.Errorf("resumed directory: %d of %d done, notes %q; want 2 of 5 and the cut line noted", d.Done(), d.Total(), d.Notes)
	}
	d.Close()
	ran, err = l.run(t, killed, shard.All(), true, 0)
	if err != nil || len(ran) != 3 || ran[0] != 2 {
		t.Fatalf("resumed run: ran %v, %v; want batches 2, 3, 4", ran, err)
	}
	sameFiles(t, whole, killed)

	mem, err := Run(context.Background(), l.m, l.texts, l.opt)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(read(t, killed, ResultsFile), []byte("\n"))
	for i, r := range mem {
		want, err := resultLine(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(lines[i], want) {
			t.Errorf("batch %d: results.jsonl holds\n%s\nwant Run's result\n%s", i, lines[i], want)
		}
	}
	sum := Summarize(mem, false)
	want, _ := json.MarshalIndent(sum, "", "  ")
	if got := read(t, killed, SummaryFile); !bytes.Equal(got, append(want, '\n')) {
		t.Errorf("summary.json\n%s\nwant the in-memory summary\n%s", got, want)
	}
	if sum.Texts != 20 || sum.Batches != 5 || sum.Exact != 1 || sum.Claims != 20 {
		t.Errorf("summary %+v: want 20 texts in 5 batches, all exact and claimed", sum)
	}
	var withTimes []BatchResult
	if err := json.Unmarshal(read(t, killed, ResultsJSON), &withTimes); err != nil {
		t.Fatal(err)
	}
	for _, r := range withTimes {
		if !(r.Seconds > 0) {
			t.Errorf("results.json batch %d: %v s, want its wall time from timing.jsonl", r.Index, r.Seconds)
		}
	}
}

// -resume refuses a directory another run wrote, naming the option that differs; a shard's
// directory is another run's for a different shard.
func TestResumeRefusesAnotherRunsDirectory(t *testing.T) {
	l := newLongRun()
	dir := filepath.Join(t.TempDir(), "out")
	d, err := OpenDir(dir, l.rec, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	other := l.rec
	other.Settings = []Setting{{"model", "toy 200 x 64"}, {"beam", "8"}}
	sharded := l.rec
	sharded.Shard = Shard{Index: 1, Count: 2}
	longer := l.rec
	longer.Batches = 6
	for _, c := range []struct {
		rec  Record
		want string
	}{
		{other, `beam: "0" on disk, "8" now`},
		{sharded, "shard: 0/1 on disk, 1/2 now"},
		{longer, "batches: 5 on disk, 6 now"},
	} {
		d, err := OpenDir(dir, c.rec, true, nil)
		if err == nil {
			d.Close()
			t.Errorf("resume with %+v: opened, want a refusal naming %q", c.rec, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("resume with %+v: %v, want it to name %q", c.rec, err, c.want)
		}
	}
	if d, err := OpenDir(dir, l.rec, true, nil); err != nil {
		t.Errorf("resume with the recorded options: %v", err)
	} else {
		d.Close()
	}
}

// Three shards (batches 0 and 3, 1 and 4, 2), one of them killed and resumed, merged: the same
// options.json, results.jsonl and summary.json as one unsharded run. A merge missing a shard is
// refused, naming the first batch it lacks; so is a merge of shards of different runs.
func TestShardsMergeToOneRun(t *testing.T) {
	l := newLongRun()
	tmp := t.TempDir()
	whole := filepath.Join(tmp, "whole")
	if _, err := l.run(t, whole, shard.All(), false, 0); err != nil {
		t.Fatal(err)
	}
	var shards []string
	for i := range 3 {
		sh := Shard{Index: i, Count: 3}
		dir := filepath.Join(tmp, "shard"+sh.String()[:1])
		shards = append(shards, dir)
		stop := 0
		if i == 0 {
			stop = 1
		}
		ran, err := l.run(t, dir, sh, false, stop)
		if i == 0 {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("shard 0/3 cancelled: %v", err)
			}
			ran, err = l.run(t, dir, sh, true, 0)
			ran = append([]int64{0}, ran...)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range ran {
			if !sh.Owns(int(b)) {
				t.Errorf("shard %s ran batch %d", sh, b)
			}
		}
		if len(ran) != sh.Items(5) {
			t.Errorf("shard %s ran %v, want %d batches", sh, ran, sh.Items(5))
		}
	}
	if _, err := Merge(filepath.Join(tmp, "partial"), shards[:2], nil); err == nil || !strings.Contains(err.Error(), "batch 2 first") {
		t.Errorf("merge of 2 of 3 shards: %v, want a refusal naming batch 2", err)
	}
	merged := filepath.Join(tmp, "merged")
	d, err := Merge(merged, shards, new(safefile.Files))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.WriteSummary(false); err != nil {
		t.Fatal(err)
	}
	d.Close()
	sameFiles(t, whole, merged)

	other := newLongRun()
	other.rec.Settings[1].Value = "8"
	stray := filepath.Join(tmp, "stray")
	if _, err := other.run(t, stray, Shard{Index: 2, Count: 3}, false, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(filepath.Join(tmp, "mixed"), []string{shards[0], shards[1], stray}, nil); err == nil || !strings.Contains(err.Error(), `beam: "0" on disk, "8" now`) {
		t.Errorf("merge of another run's shard: %v, want a refusal naming beam", err)
	}
}

// A result's infinite and NaN figures, which JSON numbers cannot hold, read back bit for bit; an
// unknown key or a side value that is finite is refused.
func TestResultJSONRoundTrip(t *testing.T) {
	r := BatchResult{Index: 7, Truth: [][]int{{1, 2}}, BagMargin: math.Inf(1), OrderMargin: math.NaN(), BagMarginTopK: math.Inf(-1),
		BagRankRecall: 0.25, BagRankRecallTopK: math.NaN(), Exact: 0.5, TokenAcc: math.NaN(), Seconds: 3,
		Decoded: []Text{{Tokens: []int{1, 2}, Excess: math.Inf(-1), Lead: math.Inf(1), Match: 0}, {Tokens: []int{3}, Excess: -2, Lead: 1.5, Match: -1}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got BatchResult
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	same := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
	for i, f := range r.floatFields() {
		if g := got.floatFields()[i]; !same(*f.p, *g.p) {
			t.Errorf("%s: %v read back as %v", f.key, *f.p, *g.p)
		}
	}
	for i, txt := range r.Decoded {
		if g := got.Decoded[i]; !same(txt.Excess, g.Excess) || !same(txt.Lead, g.Lead) {
			t.Errorf("text %d: excess %v, lead %v read back as %v, %v", i, txt.Excess, txt.Lead, g.Excess, g.Lead)
		}
	}
	again, _ := json.Marshal(got)
	if !bytes.Equal(b, again) {
		t.Errorf("re-encoded:\n%s\nwant\n%s", again, b)
	}
	for _, bad := range []string{`{"index":1,"extra":2}`, `{"index":1,"bag_margin":null,"nonfinite":{"bag_margin":"3"}}`,
		`{"index":1,"bag_margin":1,"nonfinite":{"bag_margin":"+Inf"}}`, `{"index":1,"nonfinite":{"bag":"NaN"}}`} {
		if err := json.Unmarshal([]byte(bad), new(BatchResult)); err == nil {
			t.Errorf("%s: read as a result", bad)
		}
	}
}

// The progress line counts a resume's batches as done and times the ETA by this process's pace:
// resumed at 1 of 4, one batch in 10 s leaves 2 at 10 s each.
func TestProgressETA(t *testing.T) {
	now := time.Unix(1e9, 0)
	var b bytes.Buffer
	p := newProgressAt(&b, 4, 1, func() time.Time { return now })
	now = now.Add(10 * time.Second)
	p.Batch(BatchResult{Index: 1, Exact: 1, TokenAcc: 1, Claims: 4, ClaimsRight: 4, Seconds: 10})
	for _, want := range []string{"decode: 2/4 batches (50%): batch 1: exact 1.00, token accuracy 1.00, 4 claims (4 right), 10.0 s; elapsed 10s, ETA 20s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("progress %q lacks %q", b.String(), want)
		}
	}
}
