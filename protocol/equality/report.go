package equality

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// PaperFigure is one precision's functional-equality figures from the GELO paper (Llama-2 7B,
// GELO on Q, K, V and O of every attention layer, 1000 OpenWebText2 samples).
type PaperFigure struct {
	// Top1 is the fraction of positions whose top-1 token is unchanged.
	Top1 float64
	// LogitMSE is the mean squared error of the logits.
	LogitMSE float64
	// LogitL2 is the mean per-token L2 distance of the logits.
	LogitL2 float64
}

// Paper holds the paper's figures by storage precision (docs/paper.md, "The protocol
// itself"). Its mix, its shields and whether its reference ran in float32 or in the same
// precision are not stated there.
var Paper = map[string]PaperFigure{
	FP32: {Top1: 1.000000, LogitMSE: 9.32e-11, LogitL2: 0.000902},
	BF16: {Top1: 0.988045, LogitMSE: 1.813e-3, LogitL2: 6.18},
	FP16: {Top1: 0.998450, LogitMSE: 4.31e-5, LogitL2: 0.794},
}

// paperText formats a precision's paper figures, or "n/a".
func paperText(p string) string {
	f, ok := Paper[p]
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf("%.6f / %.4g / %.4g", f.Top1, f.LogitMSE, f.LogitL2)
}

// Markdown renders the result: the settings, summary tables (precision x mix) of nearest-neighbour
// equality and of the hidden states' relative error with the paper's figures beside, and one
// table per precision with every figure.
func (r Result) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# GELO functional equality\n\n")
	model := r.Model
	if model == "" {
		model = "(given model)"
	}
	fmt.Fprintf(&b, "Model %s: %d layers, d = %d. %d texts, %d tokens", model, r.NumLayers, r.Hidden, r.Texts, r.Tokens)
	if r.Truncated > 0 {
		fmt.Fprintf(&b, " (%d texts truncated at %d tokens)", r.Truncated, c.MaxTokens)
	}
	fmt.Fprintf(&b, ". Forward passes: %s.\n\n", r.Elapsed.Round(time.Second/10))
	fmt.Fprintf(&b, "GELO on the query, key, value and output projections of layers %s, a fresh A per text, layer and projection (seed %d). ", intList(c.Layers), c.Seed)
	if c.ShieldFrac > 0 {
		fmt.Fprintf(&b, "Shields: ceil(%g x tokens) gaussian rows per text at %g x the mean input row norm, dropped after unmixing. ", c.ShieldFrac, c.ShieldScale)
	} else {
		fmt.Fprintf(&b, "No shields. ")
	}
	fmt.Fprintf(&b, "Trusted side in %s (A, mix, unmix; A^-1 = A^T for orthogonal A, an LU inverse otherwise). ", c.Trusted)
	w := "float32"
	if c.RoundWeights {
		w = "rounded to the storage precision"
	}
	fmt.Fprintf(&b, "Accelerator: U = A[X; S] and Y = U W^T stored in the precision, GEMM with float32 accumulation, weights %s; the bias is added after unmixing. ", w)
	fmt.Fprintf(&b, "\"none\" rounds the projections' inputs and outputs the same way without GELO.\n\n")
	fmt.Fprintf(&b, "Reference: the plain float32 forward pass (mean final-layer row norm %.3g). ", r.MeanRowNorm)
	fmt.Fprintf(&b, "NN equality: fraction of texts whose nearest neighbour among the other %d texts (cosine of sentence embeddings) is unchanged, our analogue of the paper's top-1 token equality. ", r.Texts-1)
	fmt.Fprintf(&b, "Paper figures (Llama-2 7B, top-1 token equality / logit MSE / mean per-token logit L2) measure logits, not embeddings: compare trends, not values; the paper's mix and reference precision are not stated.\n\n")

	mixes := []string{NoMix}
	for _, m := range c.mixes() {
		mixes = append(mixes, m.Name())
	}
	summary := func(title string, val func(Row) string) {
		fmt.Fprintf(&b, "## %s\n\n| precision |", title)
		for _, m := range mixes {
			fmt.Fprintf(&b, " %s |", m)
		}
		fmt.Fprintf(&b, " paper (top-1 / MSE / L2) |\n|---|")
		for range mixes {
			fmt.Fprintf(&b, "---|")
		}
		fmt.Fprintf(&b, "---|\n")
		for _, p := range c.Precisions {
			fmt.Fprintf(&b, "| %s |", p)
			for _, m := range mixes {
				row, ok := r.Find(p, m)
				s := "n/a"
				if ok {
					s = val(row)
				}
				fmt.Fprintf(&b, " %s |", s)
			}
			fmt.Fprintf(&b, " %s |\n", paperText(p))
		}
		fmt.Fprintf(&b, "\n")
	}
	summary("Nearest-neighbour equality vs plain float32", func(row Row) string { return fmt.Sprintf("%.4f", row.VsPlain.NNEqual) })
	summary("Nearest-neighbour equality vs the same precision without GELO", func(row Row) string {
		if row.VsPrecision == nil {
			return "-"
		}
		return fmt.Sprintf("%.4f", row.VsPrecision.NNEqual)
	})
	summary("Final hidden states: mean relative L2 error per token vs plain float32", func(row Row) string { return sci(row.VsPlain.HiddenRelL2) })
	summary("Sentence embeddings: min cosine to plain float32", func(row Row) string { return fmt.Sprintf("%.6f", row.VsPlain.CosMin) })
	summary("One projection call: mean relative error vs float32", func(row Row) string { return sci(row.ProjRelErr) })

	for _, p := range c.Precisions {
		fmt.Fprintf(&b, "## %s (paper: %s)\n\n", p, paperText(p))
		fmt.Fprintf(&b, "| mix | NN eq. | cos mean | cos min | emb L2 | hidden max abs | hidden rel L2 | proj rel err mean / max | max stored | non-finite | vs %s without GELO: NN eq. / cos min / hidden rel L2 |\n", p)
		fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, row := range r.Precision(p) {
			m := row.VsPlain
			vs := "-"
			if row.VsPrecision != nil {
				v := row.VsPrecision
				vs = fmt.Sprintf("%.4f / %.6f / %s", v.NNEqual, v.CosMin, sci(v.HiddenRelL2))
			}
			fmt.Fprintf(&b, "| %s | %.4f | %.7f | %.6f | %s | %s | %s | %s / %s | %s | %d | %s |\n",
				row.Mix, m.NNEqual, m.CosMean, m.CosMin, sci(m.EmbL2), sci(m.HiddenMaxAbs), sci(m.HiddenRelL2),
				sci(row.ProjRelErr), sci(row.ProjRelErrMax), sci(row.MaxStored), m.NonFinite, vs)
		}
		fmt.Fprintf(&b, "\n")
	}
	return b.String()
}

// csvHeader names the CSV columns; *_vs_prec columns are empty for the precision-only rows.
var csvHeader = []string{
	"precision", "mix", "kappa",
	"nn_equal", "cos_mean", "cos_min", "emb_l2", "hidden_max_abs", "hidden_rel_l2", "non_finite",
	"nn_equal_vs_prec", "cos_mean_vs_prec", "cos_min_vs_prec", "emb_l2_vs_prec", "hidden_max_abs_vs_prec", "hidden_rel_l2_vs_prec", "non_finite_vs_prec",
	"proj_rel_err_mean", "proj_rel_err_max", "max_stored", "calls", "shield_rows", "seconds",
	"paper_top1", "paper_logit_mse", "paper_logit_l2",
}

// CSV renders one line per run (precision x mix) with every figure, the paper's beside.
func (r Result) CSV() string {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(csvHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	metrics := func(m Metrics) []string {
		return []string{f(m.NNEqual), f(m.CosMean), f(m.CosMin), f(m.EmbL2), f(m.HiddenMaxAbs), f(m.HiddenRelL2), strconv.Itoa(m.NonFinite)}
	}
	for _, row := range r.Rows {
		rec := []string{row.Precision, row.Mix, f(row.Kappa)}
		rec = append(rec, metrics(row.VsPlain)...)
		if row.VsPrecision != nil {
			rec = append(rec, metrics(*row.VsPrecision)...)
		} else {
			rec = append(rec, make([]string, 7)...)
		}
		rec = append(rec, f(row.ProjRelErr), f(row.ProjRelErrMax), f(row.MaxStored), strconv.FormatInt(row.Calls, 10), strconv.FormatInt(row.ShieldRows, 10), strconv.FormatFloat(row.Seconds, 'f', 2, 64))
		if p, ok := Paper[row.Precision]; ok {
			rec = append(rec, f(p.Top1), f(p.LogitMSE), f(p.LogitL2))
		} else {
			rec = append(rec, "", "", "")
		}
		_ = w.Write(rec)
	}
	w.Flush()
	return buf.String()
}

// sci formats an error figure with three significant digits.
func sci(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 0):
		return "inf"
	case v == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'e', 2, 64)
}

// intList formats 1, 2, 3.
func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
