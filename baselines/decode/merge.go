package decode

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/shard"
)

// Merge joins the output directories of the shards of one decode (`decode -shard i/N`) into out,
// a new or empty directory, and opens it: their options records must be the same but for the
// shard, every batch of the record must be in one of them (a batch in two must be the same bytes
// in both), and out gets the record of an unsharded run and the lines in batch order. out's
// options.json, results.jsonl and, from them, summary.json are then byte-equal to one unsharded
// run's. A shard's cut last line (a shard still running, or killed) is left out; its batch is
// then missing unless another shard has it.
func Merge(out string, dirs []string, files *safefile.Files) (*Dir, error) {
	if len(dirs) == 0 {
		return nil, errors.New("decode: merge: name the shards' output directories")
	}
	var rec Record
	results := map[int64][]byte{}
	timings := map[int64][]byte{}
	from := map[int64]string{}
	for i, dir := range dirs {
		recPath := filepath.Join(dir, OptionsFile)
		b, err := files.ReadNoFollow(recPath, safefile.RunRecord)
		if err != nil {
			return nil, fmt.Errorf("decode: merge: %w", err)
		}
		r, err := parseRecord(recPath, b)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			rec = r
		} else {
			r.Shard = rec.Shard
			if err := diff(rec, r); err != nil {
				return nil, fmt.Errorf("decode: merge: %s is not of %s's run: %w", recPath, filepath.Join(dirs[0], OptionsFile), err)
			}
		}
		path := filepath.Join(dir, ResultsFile)
		lines, _, err := readLines(files, path)
		if err != nil {
			return nil, err
		}
		for n, l := range lines {
			res, err := parseResult(path, n+1, l)
			if err != nil {
				return nil, err
			}
			if res.Index < 0 || res.Index >= int64(rec.Batches) {
				return nil, fmt.Errorf("decode: merge: %s:%d is batch %d, outside the record's %d batches", path, n+1, res.Index, rec.Batches)
			}
			if had, ok := results[res.Index]; ok && !bytes.Equal(had, l) {
				return nil, fmt.Errorf("decode: merge: %s:%d: batch %d differs from %s's: the shards did not compute the same run", path, n+1, res.Index, from[res.Index])
			}
			results[res.Index], from[res.Index] = l, path
		}
		tpath := filepath.Join(dir, TimingFile)
		tlines, _, err := readLines(files, tpath)
		if err != nil {
			return nil, err
		}
		for n, l := range tlines {
			t, err := parseTiming(tpath, n+1, l)
			if err != nil {
				return nil, err
			}
			if _, ok := timings[t.Batch]; !ok {
				timings[t.Batch] = l
			}
		}
	}
	var missing []int64
	var resLines, timeLines [][]byte
	for b := range int64(rec.Batches) {
		l, ok := results[b]
		if !ok {
			missing = append(missing, b)
			continue
		}
		resLines = append(resLines, l)
		if t, ok := timings[b]; ok {
			timeLines = append(timeLines, t)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("decode: merge: %d of %d batches are in no shard (batch %d first): finish the shards (rerun each with -resume) and merge again",
			len(missing), rec.Batches, slices.Min(missing))
	}
	rec.Shard = shard.All()
	tx, err := files.BeginDir(out)
	if err != nil {
		return nil, fmt.Errorf("decode: merge: %w", err)
	}
	defer tx.Abort()
	for name, b := range map[string][]byte{OptionsFile: rec.encode(), ResultsFile: joinLines(resLines), TimingFile: joinLines(timeLines)} {
		if err := files.WriteFileAtomic(filepath.Join(tx.Path(), name), b); err != nil {
			return nil, fmt.Errorf("decode: merge: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("decode: merge: %w", err)
	}
	return OpenDir(out, rec, true, files)
}
