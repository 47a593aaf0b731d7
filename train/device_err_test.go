package train

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/tasks/taskstest"
)

// hostBackend is a minimal host-memory backend whose AdamW "kernel" fails from one call on, as
// an asynchronous device would: the failure is kept for Err, and the call returns normally. It
// implements what Train touches; any other method panics (nil embedded interface).
type hostBackend struct {
	engine.Backend
	adamCalls, failAt int
	failDownload      bool // every Download fails
	err               error
	stepLog           *[]string // BeginStep and EndStep append to it when set (graphstep_test.go)
}

type hostStorage struct {
	be   *hostBackend
	data []float32
}

func (s *hostStorage) Backend() engine.Backend { return s.be }
func (s *hostStorage) Len() int                { return len(s.data) }

func host(t *engine.Tensor) []float32 {
	return t.Storage().(*hostStorage).data[t.Offset() : t.Offset()+t.Size()]
}

func (b *hostBackend) Name() string { return "host (test)" }
func (b *hostBackend) Err() error   { return b.err }
func (b *hostBackend) Alloc(n int) (engine.Storage, error) {
	return &hostStorage{be: b, data: make([]float32, n)}, nil
}
func (b *hostBackend) Upload(t *engine.Tensor, src []float32) { copy(host(t), src) }
func (b *hostBackend) Download(dst []float32, t *engine.Tensor) {
	if b.failDownload && b.err == nil {
		b.err = errors.New("cuda: cuMemcpyDtoH: CUDA_ERROR_ILLEGAL_ADDRESS (simulated)")
	}
	copy(dst, host(t))
}
func (b *hostBackend) Fill(t *engine.Tensor, v float32) {
	for i := range host(t) {
		host(t)[i] = v
	}
}
func (b *hostBackend) SumSquaresHost(t *engine.Tensor) float64 {
	s := 0.0
	for _, v := range host(t) {
		s += float64(v) * float64(v)
	}
	return s
}
func (b *hostBackend) AdamW(p, g, m, v *engine.Tensor, s engine.AdamWStep) {
	b.adamCalls++
	if b.adamCalls >= b.failAt && b.err == nil {
		b.err = errors.New("cuda: ga_adamw: CUDA_ERROR_LAUNCH_FAILED (simulated)")
	}
	clear(host(g))
}

// A device error raised during a step stops training at that step, names it and the error, and
// leaves the last good checkpoint as the latest.
func TestDeviceErrorStopsAtItsStep(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
	be := &hostBackend{failAt: 7} // one parameter tensor: AdamW call k is step k
	ps := engine.NewParams()
	w := ps.Add("w.weight", []int{2, 2}, true)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	task := &fakeTask{ps: ps, w: w}
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Steps, opts.BatchSize, opts.WarmupSteps, opts.GradClip = 20, 2, 0, 0
	opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery = 1, 100, 1, 5
	res, err := Train(context.Background(), Run{Dir: dir, Options: opts, Task: task, Sampler: s, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "step 7: device error: ") || !strings.Contains(err.Error(), "CUDA_ERROR_LAUNCH_FAILED") {
		t.Fatalf("got %v, want an error naming step 7 and the device's error", err)
	}
	if !errors.Is(err, be.err) {
		t.Errorf("%v does not wrap the device's error", err)
	}
	if res.Steps != 6 {
		t.Errorf("result says %d steps done, want 6", res.Steps)
	}
	if _, step, err := checkpoints.LatestPath(dir); err != nil || step != 5 {
		t.Fatalf("latest checkpoint %d, %v; want the last good one, step 5", step, err)
	}
}

// A device error raised while a checkpoint is downloaded (here: by the download itself) is found
// by the sync before the file is written: no checkpoint with corrupt weights is written.
func TestDeviceErrorDuringCheckpointWritesNothing(t *testing.T) {
	s := taskstest.UnmixSampler(t, taskstest.UnmixCorpus(t, 40), false)
	be := &hostBackend{failAt: math.MaxInt, failDownload: true}
	ps := engine.NewParams()
	w := ps.Add("w.weight", []int{2, 2}, true)
	if err := ps.Alloc(be); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Steps, opts.BatchSize, opts.WarmupSteps, opts.GradClip = 20, 2, 0, 0
	opts.LogEvery, opts.EvalEvery, opts.EvalBatches, opts.CkptEvery = 1, 100, 1, 5
	_, err := Train(context.Background(), Run{Dir: dir, Options: opts, Task: &fakeTask{ps: ps, w: w}, Sampler: s, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "step 5: checkpoint: device error before writing checkpoint 5") {
		t.Fatalf("got %v, want a device error before checkpoint 5", err)
	}
	if _, step, err := checkpoints.LatestPath(dir); err == nil {
		t.Fatalf("checkpoint %d written despite the device error", step)
	}
}
