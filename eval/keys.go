package eval

import (
	"fmt"
	"sort"
	"strings"
)

// The metric keys are what metrics.jsonl, checkpoints (State.Best), report.md, eval.json and the
// sweep reports name a figure by; they are defined here, beside the figures, and nowhere else.
// A metric with a chance level has the companions "<key>_chance" and "<key>_se" (its standard
// error over examples).
const (
	// KeyPosMass is the retrieval positive mass (SPEC §6), the retrieval task's primary metric.
	KeyPosMass = "pos_mass"
	// KeyUnmixMass is the unmix same-embedding mass (SPEC §6), the unmix task's primary metric.
	KeyUnmixMass = "unmix_mass"
	// KeyLMLoss is a language model's mean next-token cross-entropy in nats per token (task lm).
	KeyLMLoss = "lm_loss"
	// KeyPerplexity is exp(lm_loss); its chance level is the vocabulary size (uniform guessing).
	KeyPerplexity = "ppl"
	// KeyUnigramPPL and KeyBigramPPL are the perplexities of the add-one unigram and bigram
	// models counted on the train split, on the same tokens as ppl: the baselines a trained
	// language model must beat.
	KeyUnigramPPL = "ppl_unigram"
	KeyBigramPPL  = "ppl_bigram"
	// ChanceSuffix marks the chance level of the metric it follows.
	ChanceSuffix = "_chance"
	// StdErrSuffix marks the standard error of the metric it follows.
	StdErrSuffix = "_se"
)

// PrimaryMetrics are the keys that rank evaluations, one per task: an evaluation is scored by the
// first of them its val split reports.
var PrimaryMetrics = []string{KeyPosMass, KeyUnmixMass}

// addMetric writes m under key with its chance level and standard error.
func addMetric(out map[string]float64, key string, m Metric) {
	out[key] = m.Mean
	out[key+ChanceSuffix] = m.Chance
	out[key+StdErrSuffix] = m.StdErr
}

// Metrics are the figures under their keys: pos_mass, top1 and recall, each with its _chance and
// _se companions.
func (r RetrievalResult) Metrics() map[string]float64 {
	out := map[string]float64{}
	addMetric(out, KeyPosMass, r.Mass)
	addMetric(out, "top1", r.Top1)
	addMetric(out, "recall", r.Recall)
	return out
}

// Metrics are the figures under their keys: unmix_mass and random_mass with their _chance and _se
// companions, and the matched cosines' cos_mean, cos_p95, random_cos_mean and random_cos_p95.
func (s UnmixSummary) Metrics() map[string]float64 {
	out := map[string]float64{
		"cos_mean": s.CosMean, "cos_p95": s.CosP95,
		"random_cos_mean": s.RandomCosMean, "random_cos_p95": s.RandomCosP95,
	}
	addMetric(out, KeyUnmixMass, s.Mass)
	addMetric(out, "random_mass", s.RandomMass)
	return out
}

// MetricsLine renders each split's metrics with their chance levels on one line, e.g.
// "train pos_mass 0.41 (chance 0.13) | val pos_mass 0.30 (chance 0.13)".
func MetricsLine(m map[string]map[string]float64) string {
	var parts []string
	for _, split := range []string{"train", "val"} {
		ms, ok := m[split]
		if !ok {
			continue
		}
		var fs []string
		for _, k := range metricNames(ms) {
			s := fmt.Sprintf("%s %.4f", k, ms[k])
			if c, ok := ms[k+ChanceSuffix]; ok {
				s += fmt.Sprintf(" (chance %.4f)", c)
			}
			fs = append(fs, s)
		}
		parts = append(parts, split+" "+strings.Join(fs, ", "))
	}
	return strings.Join(parts, " | ")
}

// MetricsMarkdown renders the metrics as a table: metric, train, val, chance.
func MetricsMarkdown(m map[string]map[string]float64) string {
	var b strings.Builder
	b.WriteString("| metric | train | val | chance (train / val) |\n|---|---|---|---|\n")
	names := metricNames(m["val"])
	if len(names) == 0 {
		names = metricNames(m["train"])
	}
	for _, k := range names {
		fmt.Fprintf(&b, "| %s | %.4f | %.4f | %s |\n", k, m["train"][k], m["val"][k], chancePair(m, k))
	}
	return b.String()
}

// chancePair is the "train / val" chance cell of metric k, or "–" when it has none.
func chancePair(m map[string]map[string]float64, k string) string {
	t, okT := m["train"][k+ChanceSuffix]
	v, okV := m["val"][k+ChanceSuffix]
	if !okT && !okV {
		return "–"
	}
	return fmt.Sprintf("%.4f / %.4f", t, v)
}

// metricNames lists the metric keys without their _chance and _se companions, sorted.
func metricNames(ms map[string]float64) []string {
	var names []string
	for k := range ms {
		if strings.HasSuffix(k, ChanceSuffix) || strings.HasSuffix(k, StdErrSuffix) {
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
