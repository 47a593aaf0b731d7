// Package losses holds the training objectives of SPEC §5: the multi-positive InfoNCE over
// in-batch candidates for retrieval (the candidate set itself is built by data/splitpool, which
// the baselines share; the unmixing losses live in losses/ot).
package losses

import "fmt"

// ValidatePositives checks that every example has at least one positive, none repeated, and all
// indices in [0, numCandidates).
func ValidatePositives(pos [][]int, numCandidates int) error {
	for b, ps := range pos {
		if len(ps) == 0 {
			return fmt.Errorf("losses: example %d has no positives", b)
		}
		for j, c := range ps {
			if c < 0 || c >= numCandidates {
				return fmt.Errorf("losses: example %d positive %d = %d, want in [0, %d)", b, j, c, numCandidates)
			}
			for _, prev := range ps[:j] {
				if prev == c {
					return fmt.Errorf("losses: example %d lists candidate %d twice", b, c)
				}
			}
		}
	}
	return nil
}
