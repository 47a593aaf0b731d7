package train

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// A resealed checkpoint (rewritten by SaveCheckpoint, so every checksum holds) whose next_batch
// or best_step this loop cannot have written is refused on resume, naming the file, the key and
// the value, rather than resumed at whatever position it claims.
func TestResumeRefusesResealedAbsurdState(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
	opts := DefaultOptions()
	opts.Steps, opts.BatchSize, opts.WarmupSteps = 4, 2, 0
	opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery = 2, 100, 1, 4
	for _, c := range []struct {
		name string
		edit func(*checkpoints.State)
		want string
	}{
		{"next_batch far beyond the data", func(st *checkpoints.State) { st.NextBatch = 1 << 40 }, "geloattack.next_batch is 1099511627776 at geloattack.step 4"},
		{"next_batch behind the step", func(st *checkpoints.State) { st.NextBatch = 1 }, "geloattack.next_batch is 1 at geloattack.step 4"},
		{"best_step after the step", func(st *checkpoints.State) { st.BestStep = 99 }, "geloattack.best_step is 99"},
		{"best_step negative", func(st *checkpoints.State) { st.BestStep = -3 }, "geloattack.best_step is -3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Train(context.Background(), Run{Dir: dir, Options: opts, Task: newFakeTask(t), Sampler: s, Seed: 42, Progress: io.Discard}); err != nil {
				t.Fatal(err)
			}
			ck := latest(t, dir)
			c.edit(&ck.State)
			if err := checkpoints.SaveCheckpoint(dir, ck.State.Step, ck.Weights, ck.State, ck.Metadata); err != nil {
				t.Fatalf("reseal: %v", err)
			}
			resealed := latest(t, dir) // loads: its checksums are valid
			more := opts
			more.Steps = 8
			_, err := Train(context.Background(), Run{Dir: dir, Options: more, Task: newFakeTask(t), Sampler: s, Seed: 42, From: resealed, Progress: io.Discard})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), filepath.Join(dir, "ckpt-4.safetensors")) {
				t.Fatalf("resume from a resealed checkpoint: %v, want a refusal naming the file and %q", err, c.want)
			}
		})
	}
}
