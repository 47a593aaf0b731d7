package equality

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/models/bert/berttest"
)

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.ModelDir, good.TextsSource = "model", "texts"
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"ModelDir", func(c *Config) { c.ModelDir = "" }},
		{"TextsSource", func(c *Config) { c.TextsSource = "" }},
		{"Texts", func(c *Config) { c.Texts = 1 }},
		{"MaxTokens", func(c *Config) { c.MaxTokens = 1 }},
		{"Layers", func(c *Config) { c.Layers = []int{0} }},
		{"Layers", func(c *Config) { c.Layers = []int{2, 2} }},
		{"Precisions", func(c *Config) { c.Precisions = nil }},
		{"Precisions", func(c *Config) { c.Precisions = []string{"fp8"} }},
		{"Kappas", func(c *Config) { c.Kappas = []float64{0.5} }},
		{"Kappas", func(c *Config) { c.Orthogonal, c.Kappas = false, nil }},
		{"ShieldFrac", func(c *Config) { c.ShieldFrac = 1.5 }},
		{"ShieldScale", func(c *Config) { c.ShieldScale = 0 }},
		{"Trusted", func(c *Config) { c.Trusted = "fp16" }},
		{"BatchTokens", func(c *Config) { c.BatchTokens = 100 }},
	} {
		c := good
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: got %v, want an error naming the field", tc.field, err)
		}
	}
}

// TestEvaluateTinyModel runs every run on a random-weights BERT: float32 storage is equal to
// round-off, bf16's error grows with kappa, and the report has a row per precision and mix.
func TestEvaluateTinyModel(t *testing.T) {
	m := tinyModel(t, tinyConfig, 1, 0.5)
	inputs := tinyInputs(12, 40, tinyConfig.VocabSize, 2)
	var progress bytes.Buffer
	res, err := Evaluate(context.Background(), m, inputs, testConfig(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3*6 {
		t.Fatalf("%d rows, want 18 (3 precisions x (none + 5 mixes))", len(res.Rows))
	}
	if !strings.Contains(progress.String(), "equality: batch 1/") {
		t.Errorf("progress lacks batch lines:\n%s", progress.String())
	}
	for _, row := range res.Precision(FP32) {
		m := row.VsPlain
		tol := 1e-6 * max(row.Kappa, 1)
		if m.NNEqual != 1 || m.CosMin < 1-tol || m.HiddenRelL2 > 10*tol || m.NonFinite != 0 {
			t.Errorf("fp32 %s: %+v, want equality to round-off", row.Mix, m)
		}
		if row.Mix != NoMix && row.ShieldRows == 0 {
			t.Errorf("fp32 %s: no shield rows used with ShieldFrac %v", row.Mix, res.Config.ShieldFrac)
		}
	}
	k10, _ := res.Find(BF16, "kappa=10")
	k1000, _ := res.Find(BF16, "kappa=1000")
	none, _ := res.Find(BF16, NoMix)
	if !(k1000.VsPlain.HiddenRelL2 > k10.VsPlain.HiddenRelL2 && k10.VsPlain.HiddenRelL2 > none.VsPlain.HiddenRelL2) {
		t.Errorf("bf16 hidden error: none %.3g, kappa 10 %.3g, kappa 1000 %.3g: want growing with kappa",
			none.VsPlain.HiddenRelL2, k10.VsPlain.HiddenRelL2, k1000.VsPlain.HiddenRelL2)
	}
	if k1000.VsPrecision == nil || none.VsPrecision != nil {
		t.Errorf("VsPrecision: want it for GELO rows only")
	}
	if res.Tokens == 0 || res.MeanRowNorm <= 0 || len(res.Config.Layers) != tinyConfig.NumLayers {
		t.Errorf("result header: tokens %d, mean row norm %v, layers %v", res.Tokens, res.MeanRowNorm, res.Config.Layers)
	}

	md := res.Markdown()
	for _, want := range []string{"## Nearest-neighbour equality vs plain float32", "## bf16 (paper: 0.988045 / 0.001813 / 6.18)", "| kappa=1000 |", "layers 1, 2"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	recs, err := csv.NewReader(strings.NewReader(res.CSV())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(res.Rows) || len(recs[0]) != len(csvHeader) || recs[2][1] != "orthogonal" {
		t.Errorf("CSV: %d records of %d fields, second row %v", len(recs), len(recs[0]), recs[2])
	}
}

// TestEvaluateBiasAndLayers: with large biases and GELO on one block only, fp32 storage still
// reproduces the plain forward pass (the bias is added after unmixing).
func TestEvaluateBiasAndLayers(t *testing.T) {
	m := tinyModel(t, tinyConfig, 3, 3) // biases ~3, well above x W^T's scale
	inputs := tinyInputs(6, 30, tinyConfig.VocabSize, 4)
	cfg := testConfig()
	cfg.Precisions, cfg.Kappas, cfg.Layers = []string{FP32}, []float64{10}, []int{2}
	res, err := Evaluate(context.Background(), m, inputs, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		if row.VsPlain.HiddenRelL2 > 1e-5 || row.VsPlain.CosMin < 1-1e-6 {
			t.Errorf("%s: hidden rel L2 %.3g, cos min %.9f: want the plain forward pass", row.Mix, row.VsPlain.HiddenRelL2, row.VsPlain.CosMin)
		}
		if want := int64(4 * len(inputs)); row.Calls != want {
			t.Errorf("%s: %d projection calls, want %d (4 projections of block 2 per text)", row.Mix, row.Calls, want)
		}
	}
}

// TestEvaluateShieldsDropped: shields change nothing but round-off in fp32, and the output has
// the plain pass's shape (one row per token).
func TestEvaluateShieldsDropped(t *testing.T) {
	m := tinyModel(t, tinyConfig, 5, 0.5)
	inputs := tinyInputs(6, 30, tinyConfig.VocabSize, 6)
	cfg := testConfig()
	cfg.Precisions, cfg.Kappas = []string{FP32}, nil
	run := func(frac float64) Row {
		cfg.ShieldFrac, cfg.ShieldScale = frac, 10
		res, err := Evaluate(context.Background(), m, inputs, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		row, _ := res.Find(FP32, "orthogonal")
		return row
	}
	without, with := run(0), run(0.5)
	if without.ShieldRows != 0 || with.ShieldRows == 0 {
		t.Fatalf("shield rows %d without, %d with", without.ShieldRows, with.ShieldRows)
	}
	for _, row := range []Row{without, with} {
		if row.VsPlain.HiddenRelL2 > 1e-5 || row.VsPlain.NNEqual != 1 {
			t.Errorf("shield rows %d: hidden rel L2 %.3g, NN equality %v", row.ShieldRows, row.VsPlain.HiddenRelL2, row.VsPlain.NNEqual)
		}
	}
}

// TestEvaluateOptions: a float32 trusted side still gives round-off equality in fp32 storage, and
// weights rounded to bf16 cost the precision-only run more than float32 weights.
func TestEvaluateOptions(t *testing.T) {
	m := tinyModel(t, tinyConfig, 7, 0.5)
	inputs := tinyInputs(6, 30, tinyConfig.VocabSize, 8)
	cfg := testConfig()
	cfg.Precisions, cfg.Kappas, cfg.Trusted = []string{FP32, BF16}, []float64{10}, TrustedFP32
	res, err := Evaluate(context.Background(), m, inputs, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Precision(FP32) {
		if row.VsPlain.HiddenRelL2 > 1e-5 {
			t.Errorf("trusted fp32, %s: hidden rel L2 %.3g", row.Mix, row.VsPlain.HiddenRelL2)
		}
	}
	plainW, _ := res.Find(BF16, NoMix)
	cfg.RoundWeights = true
	res, err = Evaluate(context.Background(), m, inputs, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	roundW, _ := res.Find(BF16, NoMix)
	if !(roundW.ProjRelErr > plainW.ProjRelErr) {
		t.Errorf("bf16 projection error %.3g with rounded weights, %.3g without: want more", roundW.ProjRelErr, plainW.ProjRelErr)
	}
	if !strings.Contains(res.Markdown(), "weights rounded to the storage precision") {
		t.Error("Markdown does not say the weights were rounded")
	}
}

func TestEvaluateRejects(t *testing.T) {
	m := tinyModel(t, tinyConfig, 1, 0.5)
	inputs := tinyInputs(4, 20, tinyConfig.VocabSize, 1)
	ctx := context.Background()
	for _, tc := range []struct {
		want   string
		inputs []Input
		edit   func(*Config)
	}{
		{"Layers: 3, the model has blocks 1..2", inputs, func(c *Config) { c.Layers = []int{3} }},
		{"want >= 2", inputs[:1], func(*Config) {}},
		{"text 1 (id 11): 0 tokens", []Input{inputs[0], {ID: 11}}, func(*Config) {}},
		{"BatchTokens: 4 is below the longest text", inputs, func(c *Config) { c.BatchTokens = 4 }},
		{"Trusted:", inputs, func(c *Config) { c.Trusted = "" }},
	} {
		cfg := testConfig()
		tc.edit(&cfg)
		_, err := Evaluate(ctx, m, tc.inputs, cfg, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
	// A cancelled context stops the run with its error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Evaluate(cctx, m, inputs, testConfig(), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
}

// TestMiniLMRealText: on the real all-MiniLM-L6-v2 and real sentences, GELO in float32 storage is
// equal to round-off (sentence-embedding cosine > 0.99999, final hidden max-abs error small next
// to the row norm), and in bf16 the error at kappa 1000 exceeds the one at kappa 10.
func TestMiniLMRealText(t *testing.T) {
	m, tok, _ := berttest.MiniLM(t)
	texts := []string{
		"The quick brown fox jumps over the lazy dog.",
		"A fast auburn fox leaped over a sleepy hound in the afternoon sun.",
		"The State of the Union address reports on the condition of the nation.",
		"Stock markets fell sharply after the central bank raised interest rates.",
	}
	inputs := make([]Input, len(texts))
	for i, s := range texts {
		inputs[i] = Input{ID: int64(i + 1), Tokens: tok.Encode(s, 256)}
	}
	cfg := testConfig()
	cfg.Precisions, cfg.Kappas = []string{FP32, BF16}, []float64{10, 1000}
	res, err := Evaluate(context.Background(), m, inputs, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	orth, _ := res.Find(FP32, "orthogonal")
	if v := orth.VsPlain; v.CosMin < 0.99999 || v.HiddenMaxAbs > 1e-4*res.MeanRowNorm || v.NNEqual != 1 {
		t.Errorf("fp32 orthogonal: cos min %.9f, hidden max abs %.3g (row norm %.3g), NN equality %v", v.CosMin, v.HiddenMaxAbs, res.MeanRowNorm, v.NNEqual)
	}
	k10, _ := res.Find(BF16, "kappa=10")
	k1000, _ := res.Find(BF16, "kappa=1000")
	if !(k1000.VsPlain.HiddenRelL2 > k10.VsPlain.HiddenRelL2) || !(k1000.VsPlain.CosMean < k10.VsPlain.CosMean) {
		t.Errorf("bf16: kappa 1000 rel L2 %.3g cos %.6f vs kappa 10 %.3g cos %.6f: want a larger error at kappa 1000",
			k1000.VsPlain.HiddenRelL2, k1000.VsPlain.CosMean, k10.VsPlain.HiddenRelL2, k10.VsPlain.CosMean)
	}
}

// TestRunSmallCorpus runs the whole command path (model, tokenizer and corpus from the cache) on
// a handful of texts.
func TestRunSmallCorpus(t *testing.T) {
	_, _, dir := berttest.MiniLM(t)
	corpusDir, err := corpus.DefaultCorpusDir()
	if err == nil {
		_, err = os.Stat(filepath.Join(corpusDir, "SOURCES.txt"))
	}
	if err != nil {
		if requireReal() {
			t.Fatalf("GELOATTACK_REQUIRE_REAL_STORE=1 but the corpus is missing: %v", err)
		}
		t.Skipf("corpus not downloaded (%v); run scripts/fetch-data.sh corpus", err)
	}
	cfg := DefaultConfig()
	cfg.ModelDir, cfg.TextsSource = dir, corpusDir
	cfg.Texts, cfg.MaxTokens, cfg.BatchTokens = 4, 32, 256
	cfg.Precisions, cfg.Orthogonal, cfg.Kappas = []string{FP16}, false, []float64{100}
	var progress bytes.Buffer
	res, err := Run(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if res.Texts != 4 || res.Model != dir || len(res.Rows) != 2 || res.Rows[1].VsPlain.NonFinite != 0 {
		t.Fatalf("result: %d texts, model %q, %d rows, %+v", res.Texts, res.Model, len(res.Rows), res.Rows)
	}
	if !strings.Contains(progress.String(), "equality: model") {
		t.Errorf("progress lacks the header line:\n%s", progress.String())
	}
	cfg.Texts = 1 << 30
	if _, err := Run(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "Texts:") {
		t.Errorf("too many texts: got %v", err)
	}
}
