package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/models/settransformer/stepbench"
)

var cmdBench = &Command{
	Name:  "bench",
	Short: "throughput benchmarks: data generation and training steps",
	Long: "Measures example generation (examples/s and rows/s of fresh obfuscated sets: window tokens,\n" +
		"10% gaussian shields, Haar mixing) and training-step throughput (forward, backward, AdamW;\n" +
		"rows/s and peak RSS) on this machine. On a GPU (-device) the step report adds the peak device\n" +
		"memory, the GEMM GFLOP per step and the MFU (against the H100/H200 dense peak of -precision;\n" +
		"n/a elsewhere); each preset runs on a freshly opened device. On the CPU it adds the GEMM GFLOP\n" +
		"per step, an sgemm peak measured after the steps on the same workers (best of 5 runs of a square\n" +
		"product and of the step's gate/up shape) and the step's share of that GEMM limit, by wall clock\n" +
		"and by CPU time. Timings on shared machines are noisy: repeat and quote medians (and the CPU-time\n" +
		"figures, which the neighbours distort less).\n\n" +
		"-what train runs the training loop itself (train.Train: generator goroutines, batching, step,\n" +
		"AdamW, metrics.jsonl) at paper size (B16 n256 d=e=4096, h384 L24) on a synthetic store for\n" +
		"-warmup + max(2, -steps) steps and reports rows/s with generation included, the median step\n" +
		"and the cores generation needs; -torch PYTHON runs bench/torch_settransformer.py --e2e after\n" +
		"each task on the same device and prints the ratio.",
	Flags: benchFlags,
}

// benchFlags defines the flags of `geloattack bench` and returns what runs it.
func benchFlags(flags *flag.FlagSet) runFunc {
	what := flags.String("what", "gen,step", "comma-separated benchmarks: gen (example generation), step (retrieval training step), unmix (unmix training step), train (the training loop end to end at paper size, generation included)")
	presets := flags.String("presets", "tiny,small,paper", "model presets for -what step and unmix: tiny (h128 L2, n64 B4), small (h256 L4, n128 B8), paper (h384 L24, n256 B16); d = e = 4096")
	steps := intFlag(flags, "steps", 3, field.Bounds{Int: true, Min: 1, Max: 1 << 30}, "timed training steps per preset (after one warm-up step)")
	sizes := flags.String("n", "64,256,1024", "set sizes n (rows of X) for -what gen, each "+genSizes.Want())
	workers := flags.String("workers", "1,2", "generator goroutines for -what gen")
	examples := intFlag(flags, "examples", 64, field.Bounds{Int: true, Min: 1, Max: 1 << 30}, "examples generated per gen measurement")
	d := intFlag(flags, "d", 4096, field.Bounds{Int: true, Min: 2, Max: 1 << 16}, "row width for -what gen")
	dev := flags.String("device", device.Auto, "device of -what step and unmix: auto (a GPU when the CUDA backend opens, else the CPU, logging why), cpu, cuda or cuda:N (fails when no GPU opens)")
	tasks := flags.String("tasks", "retrieval", "tasks of -what train: retrieval, unmix, or both comma-separated")
	warmup := intFlag(flags, "warmup", 2, field.Bounds{Int: true, Min: 1, Max: 1 << 30}, "untimed steps of -what train before its -steps timed ones")
	genWorkers := intFlag(flags, "gen-workers", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 10, Zero: "GOMAXPROCS on the CPU, half of it on a GPU"}, "generator goroutines of -what train (train.workers)")
	python := flags.String("torch", "", "-what train: also run the PyTorch twin (bench/torch_settransformer.py --e2e) with this Python interpreter on the same device, and print the ratio")
	script := flags.String("torch-script", "bench/torch_settransformer.py", "path of the PyTorch twin for -torch")
	mixOn := flags.String("mix-on", "auto", "-what train: where U = A X is formed (train.mix_on): auto (the GPU on a GPU, else the host), host or device")
	cpuProfile := flags.String("cpuprofile", "", "write a Go CPU profile of the whole benchmark to this file (read it with go tool pprof)")
	precision := flags.String("precision", device.FP32, "GEMM precision on a GPU: fp32, tf32 or bf16 (the CPU computes in fp32); sets the peak that MFU is measured against")
	return func(ctx context.Context, args []string) error {
		if _, err := device.ParseSpec(*dev); err != nil {
			return fmt.Errorf("-device: %w", err)
		}
		if err := device.ValidPrecision(*precision); err != nil {
			return fmt.Errorf("-precision: %w", err)
		}
		runtime.LockOSThread() // the CUDA context is current per OS thread (see runner.Train)
		defer runtime.UnlockOSThread()
		if *cpuProfile != "" {
			stop, err := startCPUProfile(*cpuProfile)
			if err != nil {
				return fmt.Errorf("-cpuprofile: %w", err)
			}
			defer stop()
		}
		logged := false
		openDevice := func() (engine.Backend, error) {
			// The choice is logged once; later presets open the same device again.
			log := func(l string) { fmt.Fprintln(os.Stderr, l) }
			if logged {
				log = nil
			}
			logged = true
			return device.Open(*dev, *precision, log)
		}
		for _, w := range strings.Split(*what, ",") {
			switch strings.TrimSpace(w) {
			case "gen":
				ns, err := parseInts(*sizes, genSizes)
				if err != nil {
					return fmt.Errorf("-n: %w", err)
				}
				ws, err := parseInts(*workers, field.Bounds{Int: true, Min: 1, Max: 1 << 10})
				if err != nil {
					return fmt.Errorf("-workers: %w", err)
				}
				if err := benchGen(ctx, ns, ws, *examples, *d); err != nil {
					return err
				}
			case "step", "unmix":
				run := stepbench.RunWith
				if strings.TrimSpace(w) == "unmix" {
					run = stepbench.RunUnmixWith
				}
				for _, p := range strings.Split(*presets, ",") {
					// A fresh device per preset: its memory peak and FLOP count are this benchmark's
					// alone, and the previous preset's model is freed.
					be, err := openDevice()
					if err != nil {
						return err
					}
					err = run(ctx, stepbench.Options{Backend: be}, strings.TrimSpace(p), *steps, os.Stdout)
					device.Close(be)
					if err != nil {
						return err
					}
				}
			case "train":
				tb := trainBench{steps: max(2, *steps), warmup: *warmup, dev: *dev, precision: *precision,
					workers: *genWorkers, mixOn: *mixOn, python: *python, script: *script, stdout: os.Stdout, logging: os.Stderr}
				for _, t := range strings.Split(*tasks, ",") {
					switch task := settransformer.Task(strings.TrimSpace(t)); task {
					case settransformer.TaskRetrieval, settransformer.TaskUnmix:
						tb.tasks = append(tb.tasks, task)
					default:
						return fmt.Errorf("-tasks: unknown task %q (want retrieval or unmix)", t)
					}
				}
				if err := tb.run(ctx); err != nil {
					return err
				}
			default:
				return fmt.Errorf("-what: unknown benchmark %q (want gen, step, unmix or train)", w)
			}
		}
		return nil
	}
}

// parseInts parses a non-empty comma-separated list of integers, each within b (intList, then
// the range bench needs).
func parseInts(s string, b field.Bounds) ([]int, error) {
	vs, err := intList(s)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%q: want at least one integer", s)
	}
	for _, v := range vs {
		if err := b.Check("", float64(v)); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// genTexts is the number of texts of bench -what gen's corpus, and maxGenBytes bounds its size.
const (
	genTexts    = 64
	maxGenBytes = 4 << 30
)

// genSizes bounds bench -what gen's set sizes: an example of n rows of d = 65536 floats is 16 GiB
// at the largest, so that a mistyped -n is refused before any corpus is allocated.
var genSizes = field.Bounds{Int: true, Min: 1, Max: 1 << 16}

// benchGen times the sampler on a corpus of Gaussian rows: for each n, 4 positives of t rows
// with ceil(0.1 * 4t) shields, so that 4t + k ≈ n.
func benchGen(ctx context.Context, ns, workers []int, examples, d int) error {
	fmt.Printf("| n | d | workers | examples/s | rows/s |\n|---|---|---|---|---|\n")
	for _, n := range ns {
		t := max(1, int(float64(n)/1.1/4))
		if bytes := int64(genTexts) * int64(t) * int64(d) * 4; bytes > maxGenBytes {
			return fmt.Errorf("-n %d with -d %d: the corpus would take %.1f GiB (%d texts of %d rows of %d floats), over the %d GiB bench allows; lower -n or -d",
				n, d, float64(bytes)/(1<<30), genTexts, t, d, maxGenBytes>>30)
		}
		corpus, err := gaussianCorpus(genTexts, t, d)
		if err != nil {
			return err
		}
		cfg := gelo.DefaultConfig()
		cfg.Positives = gelo.Fixed(4)
		cfg.TokensPerText = gelo.Fixed(float64(t))
		cfg.ValFrac = 0.25
		s, err := gelo.NewSampler(corpus, cfg)
		if err != nil {
			return err
		}
		for _, w := range workers {
			const batch = 4
			nb := int64((examples + batch - 1) / batch)
			start := time.Now()
			p := gelo.NewFinitePipeline(ctx, s, data.Train, batch, w, 2*w, 0, nb)
			rows := 0
			for i := int64(0); i < nb; i++ {
				b, err := p.Next()
				if err != nil {
					p.Close()
					return err
				}
				for _, ex := range b.Examples {
					rows += ex.N
				}
			}
			p.Close()
			el := time.Since(start).Seconds()
			fmt.Printf("| %d | %d | %d | %.1f | %.0f |\n", n, d, w, float64(nb*batch)/el, float64(rows)/el)
		}
	}
	return nil
}

// gaussianCorpus is texts of t Gaussian rows each; generation cost does not depend on the values.
func gaussianCorpus(texts, t, d int) (*data.MemCorpus, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := data.NewMemCorpus(d, 8)
	rows := make([]float32, t*d)
	for i := 0; i < texts; i++ {
		for j := range rows {
			rows[j] = float32(rng.NormFloat64())
		}
		if err := c.Add(int64(i), rows, make([]float32, 8)); err != nil {
			return nil, err
		}
	}
	return c, nil
}
