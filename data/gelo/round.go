package gelo

import "github.com/gelo-research/geloattack/internal/numfmt"

// roundSlice rounds every element of x in place to dtype, to the nearest value with ties to even
// as a GPU stores float32 in it (internal/numfmt: overflow to infinity, subnormals kept).
func roundSlice(x []float32, dtype ObserveDtype) {
	switch dtype {
	case ObserveBF16:
		numfmt.RoundBF16s(x)
	case ObserveFP16:
		numfmt.RoundF16s(x)
	}
}
