package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/engine/device"
)

// noGPU skips a test that needs a machine where the CUDA backend does not open.
func noGPU(t *testing.T) {
	t.Helper()
	if be, err := device.Open("cuda", "", nil); err == nil {
		device.Close(be)
		t.Skip("this machine has a GPU")
	}
}

// -device and -precision override the config: the header names the device, config.yaml and the
// checkpoints record both, and eval takes them too.
func TestTrainAndEvalDeviceFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "4")
	run := filepath.Join(dir, "run")
	out, err := cli(t, "train", "-config", cfg, "-out", run, "-device", "cpu", "-precision", "bf16").CombinedOutput()
	if err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	for _, want := range []string{"\n  device: cpu (", "the CPU computes in fp32"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("train output lacks %q:\n%s", want, out)
		}
	}
	resolved := mustRead(t, filepath.Join(run, "config.yaml"))
	for _, want := range []string{"device: cpu\n", "precision: bf16\n"} {
		if !bytes.Contains(resolved, []byte(want)) {
			t.Errorf("config.yaml lacks %q:\n%s", want, resolved)
		}
	}
	ck, err := checkpoints.LoadLatest(run)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ck.Metadata["device"], "cpu (") {
		t.Errorf("checkpoint device metadata %q", ck.Metadata["device"])
	}
	out, err = cli(t, "eval", "-batches", "1", "-device", "cpu", "-precision", "fp32", run).CombinedOutput()
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("device: cpu (")) || bytes.Contains(out, []byte("computes in fp32")) {
		t.Errorf("eval output does not name the device (or notes fp32):\n%s", out)
	}
}

// Bad values are refused before anything runs, naming the flag and the choices.
func TestBadDeviceFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "4")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"train", "-config", cfg, "-out", filepath.Join(dir, "a"), "-device", "gpu"}, `-device: device "gpu": want auto, cpu, cuda or cuda:N`},
		{[]string{"train", "-config", cfg, "-out", filepath.Join(dir, "b"), "-precision", "fp16"}, `-precision: precision "fp16": want fp32, tf32 or bf16`},
		{[]string{"bench", "-what", "step", "-device", "cuda:x"}, `-device: device "cuda:x"`},
		{[]string{"bench", "-what", "step", "-precision", "int8"}, `-precision: precision "int8"`},
		{[]string{"bench", "-what", "step", "-steps", "0"}, `"0" for flag -steps: want an integer in [1,`},
		{[]string{"sweep", "-config", "../../configs/sweeps/cpu-retrieval.yaml", "-list", "-device", "tpu"}, `-device: device "tpu"`},
	}
	for _, c := range cases {
		out, err := cli(t, c.args...).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte(c.want)) {
			t.Errorf("%v: err %v, want %q in:\n%s", c.args, err, c.want, out)
		}
	}
}

// Asking for a GPU where there is none fails, saying why; auto falls back to the CPU.
func TestCUDAWithoutGPU(t *testing.T) {
	noGPU(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "2")
	out, err := cli(t, "train", "-config", cfg, "-out", filepath.Join(dir, "run"), "-device", "cuda").CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("device cuda: no CUDA device: ")) {
		t.Fatalf("train -device cuda without a GPU: err %v\n%s", err, out)
	}
	out, err = cli(t, "bench", "-what", "step,unmix", "-presets", "tiny", "-steps", "1", "-device", "cuda", "-precision", "bf16").CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("device cuda: no CUDA device: ")) {
		t.Fatalf("bench -device cuda without a GPU: err %v\n%s", err, out)
	}
	out, err = cli(t, "train", "-config", cfg, "-out", filepath.Join(dir, "auto")).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("\n  device: cpu (auto: no usable GPU here, so the CPU computes; why: no CUDA device: ")) {
		t.Fatalf("train with the default device auto: err %v\n%s", err, out)
	}
}

// bench -device runs the model benchmarks there and logs the choice once.
func TestBenchDeviceFlag(t *testing.T) {
	cmd := cli(t, "bench", "-what", "step,unmix", "-presets", "tiny", "-steps", "1", "-device", "cpu", "-precision", "bf16")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if strings.Count(stdout.String(), "dedicated cores") != 2 || !strings.Contains(stdout.String(), "unmix tiny") {
		t.Errorf("bench output lacks the two CPU reports:\n%s", stdout.String())
	}
	if strings.Count(stderr.String(), "device: cpu (") != 1 || !strings.Contains(stderr.String(), "computes in fp32") {
		t.Errorf("bench log %q: want the device once and the fp32 note", stderr.String())
	}
}
