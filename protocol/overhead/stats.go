package overhead

import (
	"math"
	"slices"
)

// Stat summarises the measured rounds of one part, in milliseconds.
type Stat struct {
	// Median is the middle round (the mean of the two middle ones for an even count).
	Median float64
	// Q1 and Q3 are the lower and upper quartiles (linear interpolation between rounds).
	Q1, Q3 float64
	// Min and Max are the fastest and slowest rounds.
	Min, Max float64
}

// summarize returns the Stat of ms (at least one value); ms is not modified.
func summarize(ms []float64) Stat {
	s := slices.Clone(ms)
	slices.Sort(s)
	return Stat{Median: quantile(s, 0.5), Q1: quantile(s, 0.25), Q3: quantile(s, 0.75), Min: s[0], Max: s[len(s)-1]}
}

// quantile is the q-quantile of sorted s, interpolating linearly between order statistics.
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (pos-float64(lo))*(s[hi]-s[lo])
}
