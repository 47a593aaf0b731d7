package store

import "github.com/gelo-research/geloattack/internal/numfmt"

// RoundFloat16 replaces every value of x by its nearest binary16 value, so that in-memory data
// equals what a float16 store returns for it. It is numfmt.RoundF16s under the name that
// baselines/content still calls; new code calls internal/numfmt.
func RoundFloat16(x []float32) { numfmt.RoundF16s(x) }
