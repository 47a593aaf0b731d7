package eval

import (
	"slices"
	"sort"
	"testing"
)

func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestMetricKeys: the keys are the ones metrics.jsonl, checkpoints and the sweep reports have
// always read, byte for byte, each holding its own figure.
func TestMetricKeys(t *testing.T) {
	r := RetrievalResult{Mass: Metric{Mean: 0.5, Chance: 0.1, StdErr: 0.01}, Top1: Metric{Mean: 0.6, Chance: 0.2, StdErr: 0.02},
		Recall: Metric{Mean: 0.7, Chance: 0.3, StdErr: 0.03}}
	rm := r.Metrics()
	want := []string{"pos_mass", "pos_mass_chance", "pos_mass_se", "recall", "recall_chance", "recall_se", "top1", "top1_chance", "top1_se"}
	if got := sortedKeys(rm); !slices.Equal(got, want) {
		t.Fatalf("retrieval keys %v, want %v", got, want)
	}
	if rm["pos_mass"] != 0.5 || rm["top1_chance"] != 0.2 || rm["recall_se"] != 0.03 {
		t.Errorf("retrieval figures under the wrong keys: %v", rm)
	}
	u := UnmixSummary{Mass: Metric{Mean: 0.4, Chance: 1.0 / 16, StdErr: 0.05}, CosMean: 0.8, CosP95: 0.9,
		RandomMass: Metric{Mean: 0.2, Chance: 1.0 / 16, StdErr: 0.04}, RandomCosMean: 0.3, RandomCosP95: 0.35}
	um := u.Metrics()
	want = []string{"cos_mean", "cos_p95", "random_cos_mean", "random_cos_p95", "random_mass", "random_mass_chance",
		"random_mass_se", "unmix_mass", "unmix_mass_chance", "unmix_mass_se"}
	if got := sortedKeys(um); !slices.Equal(got, want) {
		t.Fatalf("unmix keys %v, want %v", got, want)
	}
	if um["unmix_mass"] != 0.4 || um["random_mass_se"] != 0.04 || um["cos_p95"] != 0.9 || um["random_cos_mean"] != 0.3 {
		t.Errorf("unmix figures under the wrong keys: %v", um)
	}
	for _, k := range PrimaryMetrics {
		_, inR := rm[k]
		_, inU := um[k]
		if inR == inU {
			t.Errorf("primary metric %s should be reported by exactly one task", k)
		}
	}
}

// TestMetricsMarkdownAndLine: companions fold into the chance column and the line, and a metric
// without a chance level shows a dash.
func TestMetricsMarkdownAndLine(t *testing.T) {
	m := map[string]map[string]float64{
		"train": {"pos_mass": 0.5, "pos_mass_chance": 0.25, "pos_mass_se": 0.01, "cos_mean": 0.1},
		"val":   {"pos_mass": 0.4, "pos_mass_chance": 0.125, "pos_mass_se": 0.02, "cos_mean": 0.2},
	}
	md := MetricsMarkdown(m)
	want := "| metric | train | val | chance (train / val) |\n|---|---|---|---|\n" +
		"| cos_mean | 0.1000 | 0.2000 | – |\n| pos_mass | 0.5000 | 0.4000 | 0.2500 / 0.1250 |\n"
	if md != want {
		t.Errorf("markdown\n%s\nwant\n%s", md, want)
	}
	line := MetricsLine(m)
	if want := "train cos_mean 0.1000, pos_mass 0.5000 (chance 0.2500) | val cos_mean 0.2000, pos_mass 0.4000 (chance 0.1250)"; line != want {
		t.Errorf("line %q, want %q", line, want)
	}
}
