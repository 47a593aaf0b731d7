// Package assign solves the linear assignment problem exactly: given an n x m cost matrix, pick
// min(n, m) entries, no two in one row or column, with the least total cost. It is the matching
// step of every metric that compares predicted rows with true rows, whose order is secret.
package assign

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Result is a minimum-cost assignment.
type Result struct {
	// RowToCol[i] is the column assigned to row i, or -1 when row i is left out (n > m).
	RowToCol []int
	// ColToRow[j] is the row assigned to column j, or -1 when column j is left out (n < m).
	ColToRow []int
	// Total is the sum of the assigned entries of the cost matrix.
	Total float64
}

// Pairs returns the assigned (row, column) pairs in row order.
func (r Result) Pairs() [][2]int {
	var out [][2]int
	for i, j := range r.RowToCol {
		if j >= 0 {
			out = append(out, [2]int{i, j})
		}
	}
	return out
}

// Minimize returns an assignment of least total cost for the n x m matrix cost, rectangular or
// square. Every row is assigned when n <= m, every column when n > m. It runs in O(min^2 * max)
// time with the shortest-augmenting-path (Hungarian) method and rejects NaN and infinite costs,
// which have no meaningful minimum.
func Minimize(cost mat.Matrix) (Result, error) {
	n, m := cost.Dims()
	res := Result{RowToCol: make([]int, n), ColToRow: make([]int, m)}
	for i := range res.RowToCol {
		res.RowToCol[i] = -1
	}
	for j := range res.ColToRow {
		res.ColToRow[j] = -1
	}
	if n == 0 || m == 0 {
		return res, nil
	}
	// The solver below needs rows <= columns; a tall matrix is solved transposed.
	transposed := n > m
	rows, cols := n, m
	if transposed {
		rows, cols = m, n
	}
	// a: (rows, cols) row-major copy, so the inner loop avoids interface calls.
	a := make([]float64, rows*cols)
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			v := cost.At(i, j)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return Result{}, fmt.Errorf("assign: cost[%d][%d] = %v is not finite", i, j, v)
			}
			if transposed {
				a[j*cols+i] = v
			} else {
				a[i*cols+j] = v
			}
		}
	}
	colOf := solve(a, rows, cols)
	for r, c := range colOf {
		i, j := r, c
		if transposed {
			i, j = c, r
		}
		res.RowToCol[i] = j
		res.ColToRow[j] = i
		res.Total += cost.At(i, j)
	}
	return res, nil
}

// solve assigns every row of the (rows, cols) row-major matrix a, rows <= cols, to a distinct
// column at least total cost and returns the column of each row. It keeps dual potentials u (rows)
// and v (columns) with a[i][j] - u[i] - v[j] >= 0 and adds one row at a time along a shortest
// augmenting path in reduced costs (Dijkstra-like), so each row costs O(rows * cols).
// Index 0 of the column arrays is a virtual column that holds the row being inserted.
func solve(a []float64, rows, cols int) []int {
	u := make([]float64, rows+1)
	v := make([]float64, cols+1)
	owner := make([]int, cols+1) // owner[j]: 1-based row matched to column j, 0 if free
	way := make([]int, cols+1)   // way[j]: previous column on the shortest path to j
	minv := make([]float64, cols+1)
	used := make([]bool, cols+1)
	for i := 1; i <= rows; i++ {
		owner[0] = i
		j0 := 0
		for j := range minv {
			minv[j] = math.Inf(1)
			used[j] = false
		}
		for {
			used[j0] = true
			i0 := owner[j0]
			delta := math.Inf(1)
			j1 := -1
			row := a[(i0-1)*cols:]
			for j := 1; j <= cols; j++ {
				if used[j] {
					continue
				}
				if cur := row[j-1] - u[i0] - v[j]; cur < minv[j] {
					minv[j] = cur
					way[j] = j0
				}
				if j1 < 0 || minv[j] < delta {
					delta = minv[j]
					j1 = j
				}
			}
			for j := 0; j <= cols; j++ {
				if used[j] {
					u[owner[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
			if owner[j0] == 0 {
				break
			}
		}
		// Flip the matching along the path back to the virtual column.
		for j0 != 0 {
			j1 := way[j0]
			owner[j0] = owner[j1]
			j0 = j1
		}
	}
	colOf := make([]int, rows)
	for j := 1; j <= cols; j++ {
		if owner[j] != 0 {
			colOf[owner[j]-1] = j - 1
		}
	}
	return colOf
}
