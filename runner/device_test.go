package runner

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/device"
)

// tinyRun trains in a fraction of a second.
func tinyRun(t *testing.T, extra string) config.Run {
	t.Helper()
	src := `name: tiny
seed: 7
store:
  synth: {texts: 120, min_tokens: 8, max_tokens: 16, d: 16, e: 8}
sampler:
  positives: [2, 3]
  tokens_per_text: 8
  shield_frac: 0.25
model: {task: retrieval, hidden: 16, layers: 1, heads: 2, mlp_hidden: 32}
train: {steps: 4, batch_size: 4, warmup_steps: 1, log_every: 2, eval_every: 4, eval_batches: 1, ckpt_every: 2, keep_ckpts: 2, workers: 1}
` + extra
	cfg, err := config.Parse("tiny.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// gpuPresent reports whether the CUDA backend opens on this machine.
func gpuPresent(t *testing.T) bool {
	be, err := device.Open("cuda", "", nil)
	if err != nil {
		t.Logf("no GPU: %v", err)
		return false
	}
	device.Close(be)
	return true
}

// Open builds the model on the configured device and records it: the session's backend, its log
// and the checkpoint metadata.
func TestOpenUsesTheConfiguredDevice(t *testing.T) {
	cfg := tinyRun(t, "device: cpu\nprecision: bf16\n")
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.Backend.(*cpu.Backend); !ok {
		t.Fatalf("device cpu gave %T", s.Backend)
	}
	if got := s.Task.Params().Data().Storage().Backend(); got != s.Backend {
		t.Errorf("the model lives on %s, not on the session's backend", got.Name())
	}
	log := strings.Join(s.DeviceLog, "\n")
	if !strings.Contains(log, "device: "+s.Backend.Name()) || !strings.Contains(log, "the CPU computes in fp32") {
		t.Errorf("device log %q", s.DeviceLog)
	}
	meta, err := s.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if meta[MetaDevice] != s.Backend.Name() {
		t.Errorf("metadata %s = %q, want %q", MetaDevice, meta[MetaDevice], s.Backend.Name())
	}
	var rc config.Run
	if err := json.Unmarshal([]byte(meta[MetaRunConfig]), &rc); err != nil || rc.Precision != "bf16" || rc.Device != "cpu" {
		t.Errorf("run config metadata: %v, device %q precision %q", err, rc.Device, rc.Precision)
	}
}

// device cuda without a GPU fails with ErrNoDevice; auto falls back to the CPU saying why.
func TestOpenWithoutGPU(t *testing.T) {
	if gpuPresent(t) {
		t.Skip("this machine has a GPU")
	}
	if _, err := Open(tinyRun(t, "device: cuda\n")); !errors.Is(err, cuda.ErrNoDevice) || !strings.HasPrefix(err.Error(), "device cuda: no CUDA device: ") {
		t.Fatalf("device cuda without a GPU: %v", err)
	}
	s, err := Open(tinyRun(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.DeviceLog) != 1 || !strings.HasPrefix(s.DeviceLog[0], "device: cpu (auto: no usable GPU here") {
		t.Fatalf("auto without a GPU logged %q", s.DeviceLog)
	}
}

// The run header names the device, every checkpoint records it, and a run resumes with another
// precision (noted in the header, recorded in the new checkpoints) but not with another setting.
func TestTrainRecordsDeviceAndResumesWithAnotherPrecision(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cfg := tinyRun(t, "device: cpu\n")
	var log strings.Builder
	if _, err := Train(context.Background(), cfg, dir, false, &log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "run "+dir+": ") || !strings.Contains(log.String(), "\n  device: cpu (") {
		t.Errorf("header lacks the device:\n%s", log.String())
	}
	ck, err := checkpoints.LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ck.Metadata[MetaDevice], "cpu (") {
		t.Errorf("checkpoint %s = %q", MetaDevice, ck.Metadata[MetaDevice])
	}

	more := cfg
	more.Train.Steps, more.Precision = 6, "bf16"
	log.Reset()
	if _, err := Train(context.Background(), more, dir, true, &log); err != nil {
		t.Fatalf("resume with precision bf16: %v", err)
	}
	if !strings.Contains(log.String(), "resume: precision fp32 -> bf16") {
		t.Errorf("resume log lacks the precision change:\n%s", log.String())
	}
	ck, err = checkpoints.LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	had, err := ConfigOf(ck)
	if err != nil || had.Precision != "bf16" || ck.State.Step != 6 {
		t.Errorf("after the resume: %v, precision %q, step %d", err, had.Precision, ck.State.Step)
	}

	other := more
	other.Train.Steps, other.Seed = 8, 8
	if _, err := Train(context.Background(), other, dir, true, &log); err == nil || !strings.Contains(err.Error(), "seed: 7 -> 8") {
		t.Errorf("resume with another seed: %v", err)
	}
}

// Checkpoints written before the precision key existed hold no precision: they ran in fp32.
func TestConfigOfOldCheckpointIsFP32(t *testing.T) {
	cfg := tinyRun(t, "")
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "precision")
	old, _ := json.Marshal(m)
	got, err := ConfigOf(checkpoints.Checkpoint{Path: "old.safetensors", Metadata: map[string]string{MetaRunConfig: string(old)}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Precision != "fp32" {
		t.Errorf("precision %q, want fp32", got.Precision)
	}
}
