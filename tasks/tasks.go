// Package tasks holds the attack objectives of SPEC §4–§6 over a model: retrieval (which texts are
// in the set) and unmix (recover the clean rows), each with its training step, its evaluator and
// its candidate or distractor draws (data/splitpool), and Evaluate, the evaluation pass over fixed
// batches of both splits. The training loop (package train) and the `eval` command both run tasks
// through the Task interface; this package never imports the loop, so scoring a checkpoint does
// not link it. The metrics and their keys are package eval's.
package tasks

import (
	"context"
	"fmt"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/train/trainopts"
)

// Task is one attack objective over a model: it runs the forward and backward pass of a batch and
// scores batches for evaluation. Implementations hold the model and its parameters.
type Task interface {
	// Params is the model's parameter buffer (weights, gradients, named views).
	Params() *engine.Params
	// Step runs forward and backward on b, accumulating gradients into Params, and returns the
	// loss. step is the 0-based optimizer step, for per-step draws (extra negatives), so a resumed
	// run repeats them exactly.
	Step(b *gelo.Batch, step int64) (float64, error)
	// NewEvaluator starts one evaluation pass over a split.
	NewEvaluator() Evaluator
}

// Evaluator accumulates the SPEC §6 metrics of one split over several batches.
type Evaluator interface {
	// Add scores batch b (forward only).
	Add(b *gelo.Batch) error
	// Metrics returns the figures so far under eval's keys, each metric beside its chance level
	// (e.g. "pos_mass" and "pos_mass_chance").
	Metrics() map[string]float64
}

// TrainEvalOffset is the first example index of the train split's evaluation stream: far beyond
// any training step's examples, so evaluation on train scores fresh mixtures of training texts.
const TrainEvalOffset = int64(1) << 40

// EvalSpec says how many batches of which size an evaluation scores.
type EvalSpec struct {
	// BatchSize is the examples per batch, Batches the batches per split; Workers and Prefetch
	// size the batch pipeline.
	BatchSize, Batches, Workers, Prefetch int
	// Bucket pads each batch's set size to a multiple of it (gelo.PadTo); 0 means the sampler
	// config's default (gelo.Config.DefaultSetBucket).
	Bucket int
	// MixOnDevice makes the model's backend form each batch's U = A X (gelo.MixOnDevice)
	// instead of the sampler's workers.
	MixOnDevice bool
}

// Evaluate scores spec.Batches fixed batches of each split: val from the start of its stream, train
// from TrainEvalOffset (fresh mixtures of training texts). The batches depend on the sampler's
// seed alone, so every evaluation of a run sees the same examples. The result maps "train" and
// "val" to the task's metrics.
func Evaluate(ctx context.Context, s *gelo.Sampler, task Task, spec EvalSpec) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for _, split := range []data.Split{data.Train, data.Val} {
		first := int64(0)
		if split == data.Train {
			first = TrainEvalOffset / int64(spec.BatchSize)
		}
		bucket := spec.Bucket
		if bucket == 0 {
			bucket = s.Config().DefaultSetBucket()
		}
		opts := []gelo.PipelineOption{gelo.PadTo(bucket)}
		if spec.MixOnDevice {
			opts = append(opts, gelo.MixOnDevice())
		}
		pipe := gelo.NewFinitePipeline(ctx, s, split, spec.BatchSize, spec.Workers, spec.Prefetch, first, int64(spec.Batches), opts...)
		ev := task.NewEvaluator()
		for i := 0; i < spec.Batches; i++ {
			b, err := pipe.Next()
			if err == nil {
				err = ev.Add(b)
			}
			if err != nil {
				pipe.Close()
				return nil, fmt.Errorf("eval %s batch %d: %w", split, i, err)
			}
		}
		pipe.Close()
		out[split.String()] = ev.Metrics()
	}
	return out, nil
}

// modelBatch views a sampler batch as the model's input: U, or X and A for the backend to form
// U = A X (rounded to the sampler's observe dtype), with the row mask as 1/0 floats in *mask
// (reused).
func modelBatch(mask *[]float32, b *gelo.Batch) settransformer.Batch {
	*mask = floatMask(*mask, b.Mask)
	mb := settransformer.Batch{B: b.B, N: b.N, U: b.U, Mask: *mask}
	if b.X != nil {
		mb.X, mb.A, mb.NX, mb.Round = b.X, b.A, b.NX, MixRound(b.Observe)
	}
	return mb
}

// MixOnDevice reports whether a run with trainer options o whose model lives on be forms each
// batch's U = A X on be (train.mix_on): auto does unless be computes in host memory (the CPU,
// whose results stay those of host mixing). The training loop and the evaluation of a checkpoint
// both resolve it here, so they score the same batches.
func MixOnDevice(o trainopts.Options, be engine.Backend) bool {
	_, host := be.(engine.HostMemory)
	return o.MixOnDevice(host)
}

// MixRound is the rounding of device-formed U for the sampler's observe dtype.
func MixRound(o gelo.ObserveDtype) engine.MixRound {
	switch o {
	case gelo.ObserveBF16:
		return engine.MixRoundBF16
	case gelo.ObserveFP16:
		return engine.MixRoundFP16
	}
	return engine.MixRoundNone
}

// floatMask writes a batch's row mask as 1/0 floats, the form the models take, into buf (grown
// when too small) and returns it. mask: (B, N).
func floatMask(buf []float32, mask []bool) []float32 {
	if cap(buf) < len(mask) {
		buf = make([]float32, len(mask))
	}
	buf = buf[:len(mask)]
	for i, m := range mask {
		buf[i] = 0
		if m {
			buf[i] = 1
		}
	}
	return buf
}

// widen converts float32 values to float64 exactly, so bit-identical rows stay bit-identical.
func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
