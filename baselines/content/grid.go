package content

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/data/gelo"
)

// Set names a candidate set of the grid: a built-in set ("pin", "date", "name") and how many of
// its candidates to keep (0: all).
type Set struct {
	Name string
	Size int
}

// String spells the set as the grid tables show it.
func (s Set) String() string {
	if s.Size == 0 {
		return s.Name + " (all)"
	}
	return fmt.Sprintf("%s %d", s.Name, s.Size)
}

// Cell is one cell of the one-axis-at-a-time grid: the base cell with one setting changed.
type Cell struct {
	// Axis and Value name the change ("base" for the base cell itself).
	Axis, Value string
	// Set is the candidate set of the cell.
	Set Set
	// Apply changes the base sampler config (nil: none).
	Apply func(*gelo.Config)
}

// BaseSet is the grid's base candidate set: the 10^4 PINs.
var BaseSet = Set{Name: "pin", Size: 0}

// GridAxes are the axes Grid varies, in table order.
var GridAxes = []string{"candidates", "shield", "dtype", "obs_rows", "mix", "rows", "defence"}

// Grid returns the cells of the one-axis-at-a-time grid around the base cell (the caller's
// sampler config with the 10^4 PINs): each axis varies alone, the others stay at the base. The
// full cartesian product (4 x 7 x 3 x 3 x 2 x 6 cells) is not run. axes restricts the axes (nil:
// all of GridAxes); d is the row width, which the defence cells fill with shield rows.
func Grid(axes []string, d int) ([]Cell, error) {
	want := map[string]bool{}
	for _, a := range axes {
		if !slices.Contains(GridAxes, a) {
			return nil, fmt.Errorf("grid axis %q: want one of %s", a, strings.Join(GridAxes, ", "))
		}
		want[a] = true
	}
	on := func(a string) bool { return len(axes) == 0 || want[a] }
	cells := []Cell{{Axis: "base", Value: "base", Set: BaseSet}}
	if on("candidates") {
		for _, n := range []int{10, 100} {
			cells = append(cells, Cell{Axis: "candidates", Value: fmt.Sprint(n), Set: Set{Name: "pin", Size: n}})
		}
		cells = append(cells, Cell{Axis: "candidates", Value: "dates", Set: Set{Name: "date"}})
	}
	if on("shield") {
		cells = append(cells, Cell{Axis: "shield", Value: "none (scale 0)", Set: BaseSet, Apply: func(c *gelo.Config) {
			c.ShieldRows, c.ShieldFrac = 0, gelo.Fixed(0)
		}})
		for _, kind := range []gelo.ShieldKind{gelo.ShieldGaussian, gelo.ShieldManifold, gelo.ShieldStudentT} {
			for _, sc := range []float64{1, 10} {
				cells = append(cells, Cell{Axis: "shield", Value: fmt.Sprintf("%s %g", kind, sc), Set: BaseSet, Apply: func(c *gelo.Config) {
					c.ShieldKind, c.ShieldScale = kind, gelo.Fixed(sc)
				}})
			}
		}
	}
	if on("dtype") {
		for _, dt := range []gelo.ObserveDtype{gelo.ObserveBF16, gelo.ObserveFP16} {
			cells = append(cells, Cell{Axis: "dtype", Value: string(dt), Set: BaseSet, Apply: func(c *gelo.Config) { c.ObserveDtype = dt }})
		}
	}
	if on("obs_rows") {
		for _, f := range []float64{0.96, 0.8} {
			cells = append(cells, Cell{Axis: "obs_rows", Value: fmt.Sprint(f), Set: BaseSet, Apply: func(c *gelo.Config) { c.ObsRows = f }})
		}
	}
	if on("mix") {
		cells = append(cells, Cell{Axis: "mix", Value: "non_orthogonal kappa 100", Set: BaseSet, Apply: func(c *gelo.Config) {
			c.Mix, c.MixCond = gelo.MixNonOrthogonal, gelo.Fixed(100)
		}})
	}
	if on("rows") {
		// 16 rows per text, more texts per example: 64 up to 768 clean rows (texts shorter than 16
		// tokens give fewer), crossing d.
		for _, p := range []int{4, 8, 16, 24, 32, 48} {
			cells = append(cells, Cell{Axis: "rows", Value: fmt.Sprintf("%d texts x 16", p), Set: BaseSet, Apply: func(c *gelo.Config) {
				c.Positives, c.TokensPerText = gelo.Fixed(float64(p)), gelo.Fixed(16)
			}})
		}
	}
	if on("defence") {
		// Shields added to full rank and beyond (1x, 2x, 4x d rows) at scales 1, 3 and 10; then,
		// at d rows of scale 1, the other shield kinds, precisions, kappa and partial observation.
		for _, mult := range []int{1, 2, 4} {
			for _, sc := range []float64{1, 3, 10} {
				cells = append(cells, Cell{Axis: "defence", Value: fmt.Sprintf("shield_rows %d (gaussian %g)", mult*d, sc), Set: BaseSet, Apply: func(c *gelo.Config) {
					c.ShieldKind, c.ShieldRows, c.ShieldScale = gelo.ShieldGaussian, mult*d, gelo.Fixed(sc)
				}})
			}
		}
		full := func(extra func(c *gelo.Config)) func(c *gelo.Config) {
			return func(c *gelo.Config) {
				c.ShieldKind, c.ShieldRows, c.ShieldScale = gelo.ShieldGaussian, d, gelo.Fixed(1)
				extra(c)
			}
		}
		for _, kind := range []gelo.ShieldKind{gelo.ShieldManifold, gelo.ShieldStudentT} {
			cells = append(cells, Cell{Axis: "defence", Value: fmt.Sprintf("shield_rows %d (%s 1)", d, kind), Set: BaseSet, Apply: full(func(c *gelo.Config) { c.ShieldKind = kind })})
		}
		for _, dt := range []gelo.ObserveDtype{gelo.ObserveBF16, gelo.ObserveFP16} {
			cells = append(cells, Cell{Axis: "defence", Value: fmt.Sprintf("shield_rows %d (gaussian 1), %s", d, dt), Set: BaseSet, Apply: full(func(c *gelo.Config) { c.ObserveDtype = dt })})
		}
		cells = append(cells, Cell{Axis: "defence", Value: fmt.Sprintf("shield_rows %d (gaussian 1), kappa 100", d), Set: BaseSet, Apply: full(func(c *gelo.Config) {
			c.Mix, c.MixCond = gelo.MixNonOrthogonal, gelo.Fixed(100)
		})})
		for _, f := range []float64{0.96, 0.8} {
			cells = append(cells, Cell{Axis: "defence", Value: fmt.Sprintf("shield_rows %d (gaussian 1), obs_rows %g", d, f), Set: BaseSet, Apply: full(func(c *gelo.Config) { c.ObsRows = f })})
		}
	}
	return cells, nil
}

// GridHeader is the header of the grid table GridRow writes.
const GridHeader = "| axis | value | candidates | n | n_obs | rank (min-max) of d | full rank | recovery residual / leverage / topk / attack | chance | median rank (attack) | margin p5 / p50 / p95 (attack) | claimed (right) | not among | s |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"

// GridRow is one line of the grid table for a cell's result: the primary residual score's
// recovery beside leverage, top-k and the attack's own ranking, whose rank and margins follow.
func GridRow(c Cell, r *Result) string {
	by := map[string]Summary{}
	for _, s := range r.Summaries {
		by[s.Score] = s
	}
	s, a := r.Summaries[0], by["attack"]
	return fmt.Sprintf("| %s | %s | %d | %.1f | %.1f | %.1f (%d-%d) of %d | %.2f | %.3f / %.3f / %.3f / %.3f | %.2g | %.1f | %.2f / %.2f / %.2f | %.2f (%.2f) | %.2f | %.1f |\n",
		c.Axis, c.Value, r.Candidates, r.N, r.NObs, r.Rank, r.RankMin, r.RankMax, r.D, r.FullRank,
		s.Recovery, by["leverage"].Recovery, by["topk"].Recovery, a.Recovery, s.Chance,
		a.MedianRank, a.Margin[1], a.Margin[3], a.Margin[5], r.Claimed, r.ClaimedCorrect, r.Absent, r.Seconds)
}
