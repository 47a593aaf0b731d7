package equality

import (
	"context"
	"math"

	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/workpool"
	"github.com/gelo-research/geloattack/models/bert"
)

// hook is the bert.LinearHook of one run (one precision, and one mix or none): it computes the
// projections of the chosen blocks text by text through the protocol (gelo) or with storage
// rounding only, and measures each call's error against the float32 projection of the same input.
type hook struct {
	ctx       context.Context
	lib       *blas.Library
	cfg       Config
	layers    []bool // indexed by block 1..L
	precision string
	mix       *Mix // nil: precision only
	workers   int
	scratch   []scratch
	ids       []int64 // text id of each sequence of the current batch

	// weights caches W rounded to the storage precision per projection (RoundWeights).
	weights map[bert.Projection][]float32

	// Per-worker projection error: sum and max of ||y - y32|| / ||y32|| per call, and the calls.
	errSum, errMax []float64
	calls, shields []int64
}

// newHook prepares a hook for one run; mix nil means storage rounding without GELO.
func newHook(ctx context.Context, lib *blas.Library, cfg Config, layers []bool, precision string, mix *Mix, workers int) *hook {
	return &hook{
		ctx: ctx, lib: lib, cfg: cfg, layers: layers, precision: precision, mix: mix, workers: workers,
		scratch: make([]scratch, workers),
		weights: map[bert.Projection][]float32{},
		errSum:  make([]float64, workers), errMax: make([]float64, workers),
		calls: make([]int64, workers), shields: make([]int64, workers),
	}
}

// Hooked implements bert.LinearHook.
func (h *hook) Hooked(layer int) bool { return layer < len(h.layers) && h.layers[layer] }

// Linear implements bert.LinearHook: each sequence of the batch (one text) is its own block
// of rows with its own A.
func (h *hook) Linear(p bert.Projection, offs []int, x []float32, in int, w, b []float32, out int, dst []float32) error {
	if err := h.ctx.Err(); err != nil {
		return err
	}
	wAcc := w // what the accelerator holds
	if h.cfg.RoundWeights && h.precision != FP32 {
		if wr, ok := h.weights[p]; ok {
			wAcc = wr
		} else {
			wr = append([]float32(nil), w...)
			roundTo(h.precision, wr)
			h.weights[p] = wr
			wAcc = wr
		}
	}
	nseq := len(offs) - 1
	errs := make([]error, nseq)
	workpool.Jobs(h.workers, nseq, func(worker, s int) {
		lo, hi := offs[s], offs[s+1]
		t := hi - lo
		xs, ds := x[lo*in:hi*in], dst[lo*out:hi*out]
		sc := &h.scratch[worker]
		if h.mix == nil {
			sc.precisionOnly(h.lib, h.precision, xs, t, in, wAcc, b, out, ds)
		} else {
			c := call{
				textID: h.ids[s], layer: p.Layer, which: p.Which, mix: *h.mix,
				precision: h.precision, trusted: h.cfg.Trusted,
				frac: h.cfg.ShieldFrac, scale: h.cfg.ShieldScale, seed: h.cfg.Seed,
			}
			k, err := sc.gelo(h.lib, c, xs, t, in, wAcc, b, out, ds)
			if err != nil {
				errs[s] = err
				return
			}
			h.shields[worker] += int64(k)
		}
		// The call's own error: against x . W^T + b in float32 with the unrounded W.
		sc.exact = grow(sc.exact, t*out)
		h.lib.Sgemm(false, true, t, out, in, 1, xs, in, w, in, 0, sc.exact, out)
		addBias(sc.exact, b, out)
		var num, den float64
		for i, v := range sc.exact {
			d := float64(ds[i]) - float64(v)
			num += d * d
			den += float64(v) * float64(v)
		}
		rel := math.Sqrt(num / den)
		if math.IsNaN(rel) {
			rel = math.Inf(1) // a non-finite output: the call failed outright
		}
		h.errSum[worker] += rel
		h.errMax[worker] = max(h.errMax[worker], rel)
		h.calls[worker]++
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// projStats returns the mean and max relative error of the calls so far, their number, the
// shield rows used and the largest magnitude stored on the accelerator.
func (h *hook) projStats() (mean, maxErr float64, calls, shields int64, peak float64) {
	var sum float64
	for i := range h.errSum {
		sum += h.errSum[i]
		maxErr = max(maxErr, h.errMax[i])
		calls += h.calls[i]
		shields += h.shields[i]
		peak = max(peak, h.scratch[i].peak)
	}
	if calls > 0 {
		mean = sum / float64(calls)
	}
	return mean, maxErr, calls, shields, peak
}
