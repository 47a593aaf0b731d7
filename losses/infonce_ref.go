package losses

import (
	"fmt"
	"math"
)

// InfoNCEHost is the multi-positive InfoNCE of SPEC §5 on the host in float64, for checking
// device kernels and for evaluation code: for scores s (B, C) (already divided by tau),
// L = mean_b [ logsumexp_{c in C} s_bc - logsumexp_{p in pos[b]} s_bp ]. It returns L and
// dL/ds (B, C) = (softmax_C(s_b) - softmax_{pos[b]}(s_b)) / B.
func InfoNCEHost(scores []float64, numCandidates int, pos [][]int) (loss float64, grad []float64, err error) {
	B, C := len(pos), numCandidates
	if len(scores) != B*C {
		return 0, nil, fmt.Errorf("losses: %d scores for %d examples x %d candidates", len(scores), B, C)
	}
	if err := ValidatePositives(pos, C); err != nil {
		return 0, nil, err
	}
	if B == 0 {
		return 0, nil, nil
	}
	grad = make([]float64, B*C)
	for b := 0; b < B; b++ {
		s := scores[b*C : (b+1)*C]
		g := grad[b*C : (b+1)*C]
		all := logSumExp(s, nil)
		posLSE := logSumExp(s, pos[b])
		loss += all - posLSE
		for c := range s {
			g[c] = math.Exp(s[c]-all) / float64(B)
		}
		for _, p := range pos[b] {
			g[p] -= math.Exp(s[p]-posLSE) / float64(B)
		}
	}
	return loss / float64(B), grad, nil
}

// logSumExp of s over idx (all of s when idx is nil), shifted by the maximum.
func logSumExp(s []float64, idx []int) float64 {
	m := math.Inf(-1)
	each := func(f func(v float64)) {
		if idx == nil {
			for _, v := range s {
				f(v)
			}
			return
		}
		for _, i := range idx {
			f(s[i])
		}
	}
	each(func(v float64) { m = math.Max(m, v) })
	if math.IsInf(m, 0) {
		return m
	}
	var sum float64
	each(func(v float64) { sum += math.Exp(v - m) })
	return m + math.Log(sum)
}
