// Package losses holds the training objectives of SPEC §5: the multi-positive InfoNCE over
// in-batch candidates for retrieval (the unmixing losses join it in a later issue).
package losses

import "fmt"

// InBatchCandidates builds the candidate set of SPEC §5 for one batch: the union of every
// example's positive text ids in order of first appearance, then the extra negatives that are not
// already candidates (a random negative may coincide with some example's positive; it is then
// that positive, not a second copy). pos[b] lists the candidate indices of example b's positives.
func InBatchCandidates(positives [][]int64, extra []int64) (ids []int64, pos [][]int, err error) {
	index := make(map[int64]int)
	pos = make([][]int, len(positives))
	for b, ps := range positives {
		if len(ps) == 0 {
			return nil, nil, fmt.Errorf("losses: example %d has no positive texts", b)
		}
		pos[b] = make([]int, len(ps))
		for j, id := range ps {
			c, ok := index[id]
			if !ok {
				c = len(ids)
				index[id] = c
				ids = append(ids, id)
			}
			for _, prev := range pos[b][:j] {
				if prev == c {
					return nil, nil, fmt.Errorf("losses: example %d lists positive text %d twice", b, id)
				}
			}
			pos[b][j] = c
		}
	}
	for _, id := range extra {
		if _, ok := index[id]; !ok {
			index[id] = len(ids)
			ids = append(ids, id)
		}
	}
	return ids, pos, nil
}

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
