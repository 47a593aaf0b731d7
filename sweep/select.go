package sweep

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gelo-research/geloattack/internal/termtext"
)

// maxListedNames bounds how many cell names an error about an unknown cell lists, so that a
// grid of thousands of cells does not fill the terminal; -list shows them all.
const maxListedNames = 40

// SelectCells returns the 0-based indices, in expansion order, of the cells that list names: a
// comma-separated list of cell labels (e.g. "R4,R7", the paper's rows) or cell directory names
// (what -list prints). An unlabelled cell's name holds commas itself
// ("shield_kind=gaussian,shield_scale=0.5"), so at each place the longest run of comma-separated
// pieces that is a cell's name is taken. A cell named twice is selected once. An unknown name is
// an error that lists the valid ones.
func (sw *Sweep) SelectCells(list string) ([]int, error) {
	byName := make(map[string]int, len(sw.Cells))
	for i, c := range sw.Cells {
		byName[c.Name] = i
		if c.Label != "" {
			// A labelled cell's name is its label; this only guards against that changing.
			byName[c.Label] = i
		}
	}
	pieces := strings.Split(list, ",")
	chosen := make([]bool, len(sw.Cells))
	for k := 0; k < len(pieces); {
		if strings.TrimSpace(pieces[k]) == "" {
			return nil, errors.New(termtext.Escape(fmt.Sprintf("cells %q: an empty name at position %d; want LABEL[,LABEL...], e.g. R4,R7", list, k+1)))
		}
		found := -1
		for end := len(pieces); end > k; end-- {
			if i, ok := byName[strings.TrimSpace(strings.Join(pieces[k:end], ","))]; ok {
				chosen[i], found = true, end
				break
			}
		}
		if found < 0 {
			// The names come from the sweep file and the list from the command line: escaped whole.
			return nil, errors.New(termtext.Escape(fmt.Sprintf("cells: sweep %s has no cell %q; its cells are %s (see -list)",
				sw.Name, strings.TrimSpace(pieces[k]), sw.cellNames())))
		}
		k = found
	}
	var out []int
	for i, ok := range chosen {
		if ok {
			out = append(out, i)
		}
	}
	return out, nil
}

// cellNames lists the cells' names (a labelled cell's is its label) for an error message, at most
// maxListedNames of them, separated by "; " when a name holds a comma.
func (sw *Sweep) cellNames() string {
	var names []string
	sep := ", "
	for i, c := range sw.Cells {
		if strings.Contains(c.Name, ",") {
			sep = "; "
		}
		if i == maxListedNames {
			names = append(names, fmt.Sprintf("and %d more", len(sw.Cells)-i))
			break
		}
		names = append(names, c.Name)
	}
	return strings.Join(names, sep)
}
