package eval

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Proportion is k successes of n trials with an exact two-sided confidence interval for the
// underlying rate.
type Proportion struct {
	K, N   int
	Lo, Hi float64
	// Level is the confidence level of [Lo, Hi] (0.95 for a 95% interval).
	Level float64
}

// ClopperPearson returns the exact (Clopper-Pearson) interval at level conf (e.g. 0.95) for k
// successes in n trials: the rates p whose binomial tail probabilities of k or fewer, and of k
// or more, both exceed (1 - conf)/2, from the beta quantiles
//
//	lo = Beta(k, n - k + 1).Quantile(alpha/2)   (0 when k = 0)
//	hi = Beta(k + 1, n - k).Quantile(1 - alpha/2) (1 when k = n)
//
// It never undercovers, which matters for the counts this repository reports most: 0 wrong
// claims of 100 victims gives [0, 0.036] at 95%, not the empty interval of the normal
// approximation.
func ClopperPearson(k, n int, conf float64) (Proportion, error) {
	if n < 1 || k < 0 || k > n {
		return Proportion{}, fmt.Errorf("eval: %d successes of %d trials: want 0 <= k <= n, n >= 1", k, n)
	}
	if !(conf > 0 && conf < 1) {
		return Proportion{}, fmt.Errorf("eval: confidence level %v outside (0, 1)", conf)
	}
	alpha := 1 - conf
	p := Proportion{K: k, N: n, Lo: 0, Hi: 1, Level: conf}
	if k > 0 {
		p.Lo = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(alpha / 2)
	}
	if k < n {
		p.Hi = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - alpha/2)
	}
	return p, nil
}

// Rate is K/N.
func (p Proportion) Rate() float64 { return float64(p.K) / float64(p.N) }

// String writes the count and the interval as the docs' tables do: "97/100 [0.915, 0.994]".
func (p Proportion) String() string {
	return fmt.Sprintf("%d/%d [%.3f, %.3f]", p.K, p.N, roundDown(p.Lo, 3), roundUp(p.Hi, 3))
}

// roundDown and roundUp round x to digits decimals outward, so that a printed interval still
// covers the computed one.
func roundDown(x float64, digits int) float64 {
	s := math.Pow(10, float64(digits))
	return math.Floor(x*s) / s
}

func roundUp(x float64, digits int) float64 {
	s := math.Pow(10, float64(digits))
	return math.Ceil(x*s) / s
}
