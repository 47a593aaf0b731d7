package cuda

import (
	"os"
	"slices"

	"github.com/gelo-research/geloattack/engine"
)

// adamwBF16Kernel is adamw16.cu's entry point: AdamW that also writes the updated weights'
// bf16 copy. adamw16.ptx is built on a GPU machine; without it the backend keeps no copies and
// its bf16 GEMMs round the weights on every call, as before.
const adamwBF16Kernel = "ga_adamw_bf16"

// weightCopy is the bf16 copy of one storage that AdamW updates (a model's parameter buffer):
// bf16 GEMMs read an operand lying in a fresh part of it from the copy instead of rounding the
// fp32 values again (engine/cuda/README.md, "bf16 weight copies").
type weightCopy struct {
	p16   DevicePtr // n bf16 values: element i of the storage at p16 + 2i
	fresh spans     // element ranges whose copy equals the fp32 values rounded to bf16
}

// spans is a sorted list of disjoint, non-adjacent half-open element ranges [lo, hi).
type spans [][2]int

// add marks [lo, hi), merging it with the ranges it touches.
func (s spans) add(lo, hi int) spans {
	if lo >= hi {
		return s
	}
	out := make(spans, 0, len(s)+1)
	for _, r := range s {
		switch {
		case r[1] < lo || r[0] > hi: // apart (not even adjacent)
			out = append(out, r)
		default:
			lo, hi = min(lo, r[0]), max(hi, r[1])
		}
	}
	out = append(out, [2]int{lo, hi})
	slices.SortFunc(out, func(a, b [2]int) int { return a[0] - b[0] })
	return out
}

// covers reports whether [lo, hi) lies inside one range.
func (s spans) covers(lo, hi int) bool {
	for _, r := range s {
		if r[0] <= lo && hi <= r[1] {
			return true
		}
	}
	return false
}

// weightCopiesOff reports whether GELOATTACK_CUDA_BF16_WEIGHTS=off turns the copies off (to time
// the bf16 step both ways on one machine).
func weightCopiesOff() bool { return os.Getenv("GELOATTACK_CUDA_BF16_WEIGHTS") == "off" }

// adamWWithCopy is AdamW in a bf16 backend with adamw16.ptx loaded: one launch updates p, m and v
// and writes p's bf16 copy, which then serves bf16 GEMMs until something else writes p's storage.
// It reports false when it did nothing (another precision, no kernel, copies off, not a storage
// of this backend), for AdamW's plain launch.
func (b *Backend) adamWWithCopy(p, g, m, v *engine.Tensor, s engine.AdamWStep) bool {
	if b.prec != PrecisionBF16 || b.noCopies {
		return false
	}
	if _, ok := b.dev.funcs[adamwBF16Kernel]; !ok {
		return false
	}
	st, ok := p.Storage().(*storage)
	if !ok {
		return false
	}
	c := b.copies[st]
	if c == nil {
		p16 := b.alloc((st.n + 1) / 2) // n bf16 values in float32 elements
		if p16 == 0 {
			return false
		}
		if b.copies == nil {
			b.copies = map[*storage]*weightCopy{}
		}
		c = &weightCopy{p16: p16}
		b.copies[st] = c
	}
	n, off := p.Size(), p.Offset()
	b.launch(adamwBF16Kernel, gridFor(n), blk, ptr(p), ptr(g), ptr(m), ptr(v), c.p16+DevicePtr(2*off), int64(n),
		s.LR, s.Beta1, s.Beta2, s.Eps, s.Decay, s.BiasCorr1, s.BiasCorr2)
	c.fresh = c.fresh.add(off, off+n)
	return true
}

// bf16Copy is the bf16 copy of the n elements at x when a fresh weight copy holds them all.
func (b *Backend) bf16Copy(x DevicePtr, n int) (DevicePtr, bool) {
	for st, c := range b.copies {
		if x < st.p || x >= st.p+DevicePtr(4*st.n) || (x-st.p)%4 != 0 {
			continue
		}
		off := int(x-st.p) / 4
		if c.fresh.covers(off, off+n) {
			return c.p16 + DevicePtr(2*off), true
		}
		return 0, false
	}
	return 0, false
}

// wrote records that ts were written other than by AdamW's copying launch: their storages'
// copies are stale from now on (all of each: writes to a parameter buffer outside the optimizer
// are rare, such as a checkpoint's restore). Every Backend method that writes a tensor calls it;
// fused kernels write only their outputs, which a tape allocates, never a parameter buffer.
func (b *Backend) wrote(ts ...*engine.Tensor) {
	if len(b.copies) == 0 {
		return
	}
	for _, t := range ts {
		if t == nil {
			continue
		}
		if st, ok := t.Storage().(*storage); ok {
			if c := b.copies[st]; c != nil {
				c.fresh = nil
			}
		}
	}
}

// dropWeightCopies marks every copy stale (tests: the same GEMM without copies).
func (b *Backend) dropWeightCopies() {
	for _, c := range b.copies {
		c.fresh = nil
	}
}
