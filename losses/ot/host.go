package ot

import (
	"fmt"
	"math"
)

// SinkhornHost is the float64 reference of the balanced log-domain Sinkhorn that OT records
// on the tape, with the same iteration order (v = 0, then iters times: u update, v update):
// cost (rows x cols, row-major), marginals a (rows) and b (cols) >= 0 with equal totals
// -> plan (rows x cols, row-major). A zero marginal entry is a padded row or column: it gets
// no mass and takes no part in the updates. It is a test oracle, not a training path.
func SinkhornHost(cost []float64, rows, cols int, a, b []float64, eps float64, iters int) ([]float64, error) {
	if err := checkHost(cost, rows, cols, a, b, eps, iters); err != nil {
		return nil, fmt.Errorf("ot: SinkhornHost: %w", err)
	}
	sa, sb := sum(a), sum(b)
	if math.Abs(sa-sb) > 1e-9*math.Max(sa, sb) {
		return nil, fmt.Errorf("ot: SinkhornHost: marginal totals %v and %v differ", sa, sb)
	}
	return hostSinkhorn(cost, rows, cols, a, b, eps, iters, 1), nil
}

// UnbalancedSinkhornHost is SinkhornHost with KL-relaxed marginals of weight rho > 0: every
// potential update is scaled by rho/(rho+eps) (Chizat et al.), and the totals may differ.
func UnbalancedSinkhornHost(cost []float64, rows, cols int, a, b []float64, eps, rho float64, iters int) ([]float64, error) {
	if err := checkHost(cost, rows, cols, a, b, eps, iters); err != nil {
		return nil, fmt.Errorf("ot: UnbalancedSinkhornHost: %w", err)
	}
	if !finite(rho) || rho <= 0 {
		return nil, fmt.Errorf("ot: UnbalancedSinkhornHost: rho %v, want a finite value > 0", rho)
	}
	return hostSinkhorn(cost, rows, cols, a, b, eps, iters, rho/(rho+eps)), nil
}

func checkHost(cost []float64, rows, cols int, a, b []float64, eps float64, iters int) error {
	if rows < 1 || cols < 1 || len(cost) != rows*cols {
		return fmt.Errorf("%d costs for a %d x %d plan", len(cost), rows, cols)
	}
	if len(a) != rows || len(b) != cols {
		return fmt.Errorf("marginals of lengths %d and %d for a %d x %d plan", len(a), len(b), rows, cols)
	}
	for i, c := range cost {
		if !finite(c) {
			return fmt.Errorf("cost[%d] = %v is not finite", i, c)
		}
	}
	for _, m := range [][]float64{a, b} {
		pos := false
		for i, v := range m {
			if !finite(v) || v < 0 {
				return fmt.Errorf("marginal entry %d = %v, want a finite value >= 0", i, v)
			}
			pos = pos || v > 0
		}
		if !pos {
			return fmt.Errorf("a marginal without mass")
		}
	}
	if !finite(eps) || eps <= 0 {
		return fmt.Errorf("eps %v, want a finite value > 0", eps)
	}
	if iters < 1 {
		return fmt.Errorf("iters %d, want >= 1", iters)
	}
	return nil
}

// hostSinkhorn holds u + log a and v + log b like the tape version; tau scales the updates.
func hostSinkhorn(cost []float64, rows, cols int, a, b []float64, eps float64, iters int, tau float64) []float64 {
	ua, vb := make([]float64, rows), make([]float64, cols)
	for k := range vb {
		vb[k] = math.Log(b[k])
	}
	terms := make([]float64, max(rows, cols))
	for range iters {
		for j := range rows {
			if a[j] == 0 {
				continue
			}
			t := terms[:0]
			for k := range cols {
				if b[k] > 0 {
					t = append(t, -cost[j*cols+k]/eps+vb[k])
				}
			}
			ua[j] = -tau*lse(t) + math.Log(a[j])
		}
		for k := range cols {
			if b[k] == 0 {
				continue
			}
			t := terms[:0]
			for j := range rows {
				if a[j] > 0 {
					t = append(t, -cost[j*cols+k]/eps+ua[j])
				}
			}
			vb[k] = -tau*lse(t) + math.Log(b[k])
		}
	}
	plan := make([]float64, rows*cols)
	for j := range rows {
		for k := range cols {
			if a[j] > 0 && b[k] > 0 {
				plan[j*cols+k] = math.Exp(-cost[j*cols+k]/eps + ua[j] + vb[k])
			}
		}
	}
	return plan
}

// lse is log sum exp of a non-empty slice, shifted by its maximum.
func lse(x []float64) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v)
	}
	var s float64
	for _, v := range x {
		s += math.Exp(v - mx)
	}
	return mx + math.Log(s)
}

func sum(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}
