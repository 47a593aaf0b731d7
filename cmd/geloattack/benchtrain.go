package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/runner"
)

// trainBench is what `bench -what train` runs: the tasks, the steps, the device and, when Python
// names an interpreter, the PyTorch twin on the same device.
type trainBench struct {
	tasks           []settransformer.Task
	steps, warmup   int
	dev, precision  string
	workers         int
	mixOn           string // train.mix_on ("" = auto)
	python, script  string
	stdout, logging io.Writer
}

// torchE2E is the part of bench/torch_settransformer.py's --e2e JSON record that the side-by-side
// table shows.
type torchE2E struct {
	Task      string  `json:"task"`
	Device    string  `json:"device"`
	Precision string  `json:"precision"`
	StepMS    float64 `json:"step_ms"`
	RowsPerS  float64 `json:"rows_per_s"`
	GenMS     float64 `json:"gen_ms"`
	GenShare  float64 `json:"gen_share"`
	CPURowsS  float64 `json:"cpu_rows_per_s"`
	StepMin   float64 `json:"step_ms_min"`
	StepMax   float64 `json:"step_ms_max"`
	Threads   int     `json:"threads"`
	Error     string  `json:"error"`
}

// run times each task end to end in Go and, with a python, in the PyTorch twin right after, and
// prints one table of both with the ratio of their throughputs.
func (tb trainBench) run(ctx context.Context) error {
	type row struct {
		goRes runner.BenchTrainResult
		torch *torchE2E
	}
	var rows []row
	for _, task := range tb.tasks {
		res, err := runner.BenchTrain(ctx, runner.BenchTrainOptions{Task: task, Steps: tb.steps, Warmup: tb.warmup,
			Device: tb.dev, Precision: tb.precision, Workers: tb.workers, MixOn: tb.mixOn, Log: tb.logging})
		if err != nil {
			return err
		}
		fmt.Fprint(tb.stdout, res.Report())
		r := row{goRes: res}
		if tb.python != "" {
			t, err := tb.torch(ctx, task, res)
			if err != nil {
				return err
			}
			r.torch = t
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(tb.stdout, "\n| task | impl | device | step median s (min-max) | rows/s | CPU-time rows/s | generation | geloattack / torch (rows/s; CPU-time) |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		g := r.goRes
		fmt.Fprintf(tb.stdout, "| %s | geloattack | %s | %.3f (%.3f-%.3f) | %.1f | %.1f | %.1f ms/example, %.0f%% of %d cores | |\n",
			g.Task, deviceWord(g.Backend), g.StepMedian.Seconds(), g.StepMin.Seconds(), g.StepMax.Seconds(),
			g.RowsPerSec, g.CPURowsPerSec, 1000*g.GenPerExample.Seconds(), 100*g.GenShare, g.Cores)
		if t := r.torch; t != nil {
			cpuRatio := "n/a"
			if t.CPURowsS > 0 && g.CPURowsPerSec > 0 {
				cpuRatio = fmt.Sprintf("%.2fx", g.CPURowsPerSec/t.CPURowsS)
			}
			fmt.Fprintf(tb.stdout, "| %s | torch | %s | %.3f (%.3f-%.3f) | %.1f | %.1f | %.0f ms/step in line, %.0f%% of the step | %.2fx; %s |\n",
				t.Task, t.Device, t.StepMS/1000, t.StepMin/1000, t.StepMax/1000, t.RowsPerS, t.CPURowsS, t.GenMS, 100*t.GenShare,
				g.RowsPerSec/t.RowsPerS, cpuRatio)
		}
	}
	return nil
}

// deviceWord is the first word of a backend's name ("cpu", "cuda:0").
func deviceWord(name string) string {
	if f := strings.Fields(name); len(f) > 0 {
		return f[0]
	}
	return name
}

// torchDevice is the --device of the PyTorch twin for the backend the Go run used: the GPU it ran
// on, or the CPU.
func torchDevice(dev, backend string) string {
	if strings.HasPrefix(dev, "cuda") {
		return dev
	}
	if strings.HasPrefix(backend, "cuda") {
		return "cuda"
	}
	return "cpu"
}

// torch runs the twin's --e2e mode for task on the device the Go run used, and reads its record.
func (tb trainBench) torch(ctx context.Context, task settransformer.Task, res runner.BenchTrainResult) (*torchE2E, error) {
	js, err := os.CreateTemp("", "geloattack-torch-*.jsonl")
	if err != nil {
		return nil, fmt.Errorf("torch twin: %w", err)
	}
	js.Close()
	defer os.Remove(js.Name())
	args := []string{tb.script, "--e2e", "--device", torchDevice(tb.dev, res.Backend), "--task", string(task),
		"--preset", "paper", "--steps", strconv.Itoa(tb.steps), "--warmup", strconv.Itoa(tb.warmup),
		"--precision", tb.precision, "--json", js.Name()}
	cmd := exec.CommandContext(ctx, tb.python, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(tb.stdout, &out), io.MultiWriter(tb.logging, &out)
	fmt.Fprintf(tb.logging, "torch twin: %s %s\n", tb.python, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("torch twin %s %s: %w\n%s", tb.python, tb.script, err, tail(out.String(), 2000))
	}
	lr, err := safefile.Lines(js.Name(), safefile.BenchRecord)
	if err != nil {
		return nil, fmt.Errorf("torch twin: %w", err)
	}
	defer lr.Close()
	var rec *torchE2E
	for {
		line, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("torch twin record: %w", err)
		}
		var r torchE2E
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("torch twin record %s:%d: %w", js.Name(), lr.Line(), err)
		}
		rec = &r
	}
	if rec == nil {
		return nil, fmt.Errorf("torch twin wrote no record")
	}
	if rec.Error != "" {
		return nil, fmt.Errorf("torch twin %s: %s", task, rec.Error)
	}
	if rec.RowsPerS <= 0 {
		return nil, fmt.Errorf("torch twin %s: rows/s %v", task, rec.RowsPerS)
	}
	return rec, nil
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
