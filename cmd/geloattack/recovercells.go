package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/store"
)

// recoverCell is one cell recover attacks: the flags' own cell, or a cell of the grid around it.
type recoverCell struct {
	// grid is the grid's cell (nil: the flags' one cell, outside -grid).
	grid *content.Cell
	// tp, set and size are the cell's template and candidate set (size 0: all of it).
	tp   content.Template
	set  string
	size int
	// sampler is the cell's sampler config, validated.
	sampler gelo.Config
}

// name names the cell in messages.
func (c recoverCell) name() string {
	if c.grid == nil {
		return "the run's cell"
	}
	return fmt.Sprintf("grid cell %s=%s", c.grid.Axis, c.grid.Value)
}

// cells returns the cells the flags run: the one cell of template t, the -set, -candidates and
// the sampler config sc; with -grid, every cell of content.Grid (-axes) around it, its set and
// sampler applied (the dates cell fills the birth template, -suffix appended). d is the store's
// row width, which the defence cells fill with shield rows.
func (a *recoverArgs) cells(t content.Template, sc gelo.Config, d int) ([]recoverCell, error) {
	if !*a.grid {
		return []recoverCell{{tp: t, set: *a.set, size: *a.nCand, sampler: sc}}, nil
	}
	var axes []string
	if *a.axes != "" {
		axes = strings.Split(*a.axes, ",")
	}
	grid, err := content.Grid(axes, d)
	if err != nil {
		return nil, fmt.Errorf("-axes: %w", err)
	}
	out := make([]recoverCell, len(grid))
	for i := range grid {
		g := &grid[i]
		c := recoverCell{grid: g, tp: t, set: *a.set, size: *a.nCand, sampler: sc}
		if g.Set != content.BaseSet {
			c.set, c.size = g.Set.Name, g.Set.Size
			if c.set == "date" {
				c.tp = content.TemplateBirth
				c.tp.Pattern += *a.suffix
			}
		}
		if g.Apply != nil {
			g.Apply(&c.sampler)
		}
		if err := c.sampler.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name(), err)
		}
		out[i] = c
	}
	return out, nil
}

// cellValues returns the values of cell c's candidate set (all) and those the cell scores (vals,
// in the order content.Run indexes them): all, or the seeded subset content.Subset keeps of them
// when the cell keeps c.size.
// A set is read once per run (the name set reads WordNet; a grid has dozens of cells).
func (a *recoverArgs) cellValues(c recoverCell, seed uint64) (all, vals []string, err error) {
	all, ok := a.sets[c.set]
	if !ok {
		if all, err = candidateValues(c.set, *a.years, *a.corpusDir); err != nil {
			return nil, nil, err
		}
		if a.sets == nil {
			a.sets = map[string][]string{}
		}
		a.sets[c.set] = all
	}
	return all, content.Subset(all, c.size, seed), nil
}

// victimTexts returns the texts of the victims content.Run attacks in cell c, victim v at v: the
// cell's template filled (as content.Embed fills it) with the secret content.Secrets draws for v
// among the values the cell scores.
func (a *recoverArgs) victimTexts(c recoverCell, seed uint64) ([]string, error) {
	_, vals, err := a.cellValues(c, seed)
	if err != nil {
		return nil, err
	}
	secrets := content.Secrets(seed, *a.victims, len(vals))
	texts := make([]string, len(secrets))
	for v, s := range secrets {
		texts[v] = c.tp.Fill(vals[s])
	}
	return texts, nil
}

// rewriteHint says how to write a deployer input that holds every cell's victims.
const rewriteHint = "write the deployer's input with recover -deployer-texts and the same -store, -model, -template, -suffix, -set, -years, -candidates, -victims, -seed (or -config: its seed), and -grid and -axes when the attack runs the grid"

// writeVictimTexts writes the texts of the victims recover would attack in cells (victims[i]:
// cells[i]'s, as victimTexts draws them) as an external deployer's input: each distinct token
// sequence once (cells of one set and template share victims, and a secret drawn twice is one
// text), ids 0, 1, ... in order of first appearance, its token ids as the store's forward pass
// reads them and its special prefix. -deployer-rows finds each victim's rows by its tokens.
func writeVictimTexts(path string, emb *content.Embedder, cells []recoverCell, victims [][]string) error {
	var out []deployer.Text
	seen := map[string]bool{}
	n := 0
	for i, texts := range victims {
		in, err := emb.DeployerTexts(texts)
		if err != nil {
			return fmt.Errorf("recover: -deployer-texts: %s: %w", cells[i].name(), err)
		}
		for _, x := range in {
			n++
			if key := fmt.Sprint(x.Tokens); !seen[key] {
				seen[key] = true
				out = append(out, deployer.Text{ID: int64(len(out)), Tokens: x.Tokens, BOS: x.BOS})
			}
		}
	}
	var buf bytes.Buffer
	if err := deployer.WriteTexts(&buf, out); err != nil {
		return fmt.Errorf("recover: -deployer-texts %s: %w", path, err)
	}
	if err := checkpoints.WriteFileAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("recover: -deployer-texts: %w", err)
	}
	fmt.Fprintf(os.Stderr, "recover: wrote %d distinct texts of the %d victims of %d cell(s) for the deployer to %s\n", len(out), n, len(cells), path)
	return nil
}

// readDeployerRows reads the rows an external deployer wrote in dir for recover: the store's
// point at its layer (an encoder store's: Hugging Face's hidden_states at its layer, the
// deployer's residual point), from a run of the model in modelDir (its config.json, byte for byte).
func readDeployerRows(ctx context.Context, dir, modelDir string, meta store.Meta) (*deployer.Rows, error) {
	point := deployer.Residual
	if meta.Decoder != nil {
		point = meta.Decoder.Point
	}
	rows, err := deployer.ReadRows(ctx, dir, point, []int{meta.Layer})
	if err != nil {
		return nil, fmt.Errorf("recover: -deployer-rows: %w", err)
	}
	if err := rows.Info.CheckModel(modelDir); err != nil {
		return nil, fmt.Errorf("recover: -deployer-rows: %w", err)
	}
	if rows.Info.HiddenSize != meta.D {
		// Else the first cell would stop at its victims, after its candidates were embedded.
		return nil, fmt.Errorf("recover: -deployer-rows %s: %s hidden_size %d (the rows' width), the store's rows are %d wide: not the store's model",
			dir, deployer.InfoFile, rows.Info.HiddenSize, meta.D)
	}
	return rows, nil
}

// checkDeployerCovers refuses deployer rows that lack a victim's text of any cell (victims[i]:
// cells[i]'s), before the store check and the candidates' embedding: the attack would stop there
// (victimRows) only when it reached the cell.
func checkDeployerCovers(emb *content.Embedder, dep *deployer.Rows, block int, cells []recoverCell, victims [][]string) error {
	for i, texts := range victims {
		in, err := emb.DeployerTexts(texts)
		if err != nil {
			return fmt.Errorf("recover: -deployer-rows: %s: %w", cells[i].name(), err)
		}
		for v, x := range in {
			if _, _, err := dep.Find(ints(x.Tokens), block); err != nil {
				return fmt.Errorf("recover: -deployer-rows: %s, victim %d (%q): %w (%s)", cells[i].name(), v, texts[v], err, rewriteHint)
			}
		}
	}
	return nil
}

// victimRows is content.Options.Deployer for an external deployer's rows at block: victim v's
// rows are those of the deployer's text of exactly the attacker's tokens of the victim's text
// (deployer.Rows.Find), laid out as the store's extraction lays out rows.
func victimRows(emb *content.Embedder, dep *deployer.Rows, block int) func(context.Context, []string) (*content.Rows, error) {
	return func(_ context.Context, texts []string) (*content.Rows, error) {
		return emb.FromDeployer(texts, func(v int, text content.DeployerText) ([]float32, error) {
			_, x, err := dep.Find(ints(text.Tokens), block)
			if err != nil {
				return nil, fmt.Errorf("recover: -deployer-rows: victim %d (%q): %w (%s)", v, texts[v], err, rewriteHint)
			}
			return x, nil
		})
	}
}

// ints widens token ids to int.
func ints(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// finerBoundNote is the run's header line when -deployer-precision asks for a finer precision
// than the dtype deployer.json declares (and -recompute-error does not set rho instead): rho is
// then too small for the rows, and an absolute verdict (a claim, "not among the candidates") may
// be wrong; the run goes on, as an experiment with the wrong bound may, but says so. Empty when
// the precision is the dtype's or coarser.
func finerBoundNote(precision, dtype string) (string, error) {
	asked, err := deployer.Unit(precision)
	if err != nil {
		return "", fmt.Errorf("recover: -deployer-precision: %w", err)
	}
	declared, err := deployer.Unit(dtype)
	if err != nil {
		return "", fmt.Errorf("recover: -deployer-rows: %w", err)
	}
	if asked >= declared {
		return "", nil
	}
	return fmt.Sprintf("WARNING: -deployer-precision %s is finer than the deployer's dtype %s (%s): rho is a %s deployer's bound, which %s rows need not meet, so claims and \"not among the candidates\" may be wrong; leave -deployer-precision out for the %s bound\n",
		precision, dtype, deployer.InfoFile, precision, dtype, dtype), nil
}

// checkOutputsOutsideInputs refuses an output file (-out, -table, -deployer-texts) that lies in
// a directory the run reads (-store, -model, -deployer-rows): `-deployer-texts STORE/meta.json`
// replaced the store's record, `-out ROWS/deployer.json` the deployer's. Paths are compared
// after resolving symbolic links; one that does not resolve is left to the write's own checks.
func checkOutputsOutsideInputs(outs, ins [][2]string) error {
	resolve := func(p string) (string, bool) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", false
		}
		r, err := filepath.EvalSymlinks(abs)
		return r, err == nil
	}
	for _, o := range outs {
		if o[1] == "" {
			continue
		}
		at, ok := resolve(filepath.Dir(o[1]))
		if !ok {
			continue
		}
		for _, in := range ins {
			if in[1] == "" {
				continue
			}
			dir, ok := resolve(in[1])
			if !ok {
				continue
			}
			if rel, err := filepath.Rel(dir, at); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return fmt.Errorf("recover: -%s %s lies in the -%s directory %s, which the run reads: refusing to write into an input", o[0], o[1], in[0], in[1])
			}
		}
	}
	return nil
}
