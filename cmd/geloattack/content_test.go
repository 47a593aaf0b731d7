package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/internal/numfmt"
	"github.com/gelo-research/geloattack/models/hf"
)

// contentStore returns the small real store and the model directory, skipping when either is
// absent unless GELOATTACK_REQUIRE_REAL_STORE=1 (as TestRealStoreEndToEnd does).
func contentStore(t *testing.T) (storeDir, modelDir string) {
	t.Helper()
	storeDir = os.Getenv("GELOATTACK_SMALL_STORE")
	if storeDir == "" {
		if cache, err := corpus.DefaultCacheDir(); err == nil {
			storeDir = filepath.Join(cache, "stores", "small-minilm-l3")
		}
	}
	modelDir, _ = corpus.DefaultModelDir()
	for _, p := range []string{filepath.Join(storeDir, "meta.json"), filepath.Join(modelDir, "config.json")} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("GELOATTACK_REQUIRE_REAL_STORE") == "1" {
				t.Fatalf("%s is missing: %v", p, err)
			}
			t.Skipf("no %s (build it with scripts/build-small-store.sh)", p)
		}
	}
	return storeDir, modelDir
}

// recoverJSON runs `geloattack recover` with args and decodes its -out result.
func recoverJSON(t *testing.T, args ...string) *content.Result {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	b, err := cli(t, append([]string{"recover", "-quiet", "-out", out}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("recover %v: %v\n%s", args, err, b)
	}
	var r content.Result
	if err := json.Unmarshal(mustRead(t, out), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestContentRecoversAPINAmong100 is the CI test of issue 19 on real hidden states: with every row
// observed in float32 and n < d, the secret PIN of every victim is ranked first among 100
// candidates, and the attack claims it.
func TestContentRecoversAPINAmong100(t *testing.T) {
	st, model := contentStore(t)
	r := recoverJSON(t, "-store", st, "-model", model, "-candidates", "100", "-victims", "4",
		"-positives", "4", "-tokens-per-text", "64", "-shield-scale", "1")
	s := r.Summaries[0]
	if s.Score != "slot_worst" || s.Recovery != 1 || r.Claimed != 1 || r.ClaimedCorrect != 1 {
		t.Fatalf("recovery %v (score %s), claimed %v (right %v); want 1, 1, 1", s.Recovery, s.Score, r.Claimed, r.ClaimedCorrect)
	}
	if r.RankMax >= r.D || s.Margin[0] < 3 {
		t.Fatalf("rank max %d of d %d, smallest margin %.2f decades: want rank < d and a margin of >= 3 decades", r.RankMax, r.D, s.Margin[0])
	}
}

// TestContentFullRankIsNotADefence: 420 gaussian shield rows give U full numerical rank d, so
// rowspace(U) is all of R^d and the residual ranks at chance; but with every row observed a row
// of X has leverage <= 1 while the wrong candidates' secret rows do not, so the leverage ranks the
// secret first (issue 28). Nothing is claimed past full rank (issue 36: an absent near-duplicate
// passes the leverage test too): every victim is "ranked first, not claimed", never "not among".
func TestContentFullRankIsNotADefence(t *testing.T) {
	st, model := contentStore(t)
	r := recoverJSON(t, "-store", st, "-model", model, "-candidates", "100", "-victims", "4",
		"-positives", "4", "-tokens-per-text", "64", "-shield-rows", "420")
	if r.FullRank != 1 || r.RankMin != r.D {
		t.Fatalf("full rank %v, rank min %d of d %d: the defence cell did not reach full rank", r.FullRank, r.RankMin, r.D)
	}
	byName := map[string]content.Summary{}
	for _, s := range r.Summaries {
		byName[s.Score] = s
	}
	if s := byName["slot_worst"]; s.Recovery > 0.25 {
		t.Errorf("residual recovery %v with U of full rank (chance %v): it should be void", s.Recovery, s.Chance)
	}
	if s := byName["leverage"]; s.Recovery != 1 {
		t.Errorf("leverage recovery %v past full rank with weak shields, want 1", s.Recovery)
	}
	for _, v := range r.Victims {
		if v.Verdict != content.VerdictRanked || v.Measure != "leverage" || v.Guess != v.Value {
			t.Errorf("victim %d (secret %s): verdict %q by %s, guess %s; want %q by leverage, the secret",
				v.Example, v.Value, v.Verdict, v.Measure, v.Guess, content.VerdictRanked)
		}
	}
}

// TestContentSecretAbsentIsNeverClaimed removes each victim's secret from the candidates: below
// full rank the attack must answer "not among the candidates" (no candidate is contained), past
// full rank likewise or "ranked first, not claimed"; never a claim.
func TestContentSecretAbsentIsNeverClaimed(t *testing.T) {
	st, model := contentStore(t)
	for _, extra := range [][]string{nil, {"-shield-rows", "420"}} {
		args := append([]string{"-store", st, "-model", model, "-candidates", "100", "-victims", "4",
			"-positives", "4", "-tokens-per-text", "64", "-absent"}, extra...)
		r := recoverJSON(t, args...)
		if r.Claimed != 0 {
			t.Errorf("%v: claimed %v with the secret absent", extra, r.Claimed)
		}
		if extra == nil && r.Absent != 1 {
			t.Errorf("below full rank: 'not among the candidates' for %v of the victims, want all", r.Absent)
		}
	}
}

// TestContentRefusesAStoreOfAnotherLayer changes a copy of the store's meta.json to claim layer
// 2: the re-computed rows no longer match the stored ones and the attack refuses.
func TestContentRefusesAStoreOfAnotherLayer(t *testing.T) {
	st, model := contentStore(t)
	dir := t.TempDir()
	for _, f := range []string{"tokens.arrow", "texts.arrow", "meta.json"} {
		b := mustRead(t, filepath.Join(st, f))
		if f == "meta.json" {
			b = []byte(strings.Replace(string(b), `"layer": 3,`, `"layer": 2,`, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cli(t, "recover", "-quiet", "-store", dir, "-model", model, "-candidates", "10", "-victims", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "differs from the re-computed row") {
		t.Fatalf("a store relabelled as layer 2 was accepted: %v\n%s", err, out)
	}
}

// TestContentBaselineAttackSelectsRecover checks that `baseline -attack content` is the recover
// command (its flags, its errors) and that bad flags are named.
func TestContentBaselineAttackSelectsRecover(t *testing.T) {
	for _, args := range [][]string{
		{"baseline", "-attack", "content", "-victims", "0"},
		{"baseline", "-attack=content", "-victims", "0"},
	} {
		out, err := cli(t, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), `"0" for flag -victims`) {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	out, err := cli(t, "recover", "-template", "no slot here", "-store", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "{x}") {
		t.Fatalf("template without a slot: %v\n%s", err, out)
	}
	out, _ = cli(t, "recover", "-h").CombinedOutput()
	for _, w := range []string{"-claim-gap", "-grid", "-set", "slot_worst", "rowspace(U_obs)", "-deployer-precision", "-recompute-error", "-suffix", "END of the text", "end-of-text test",
		content.VerdictRanked, content.VerdictAbsent} {
		if !strings.Contains(string(out), w) {
			t.Fatalf("recover -h lacks %q:\n%s", w, out)
		}
	}
}

// TestRecoverNamesTheRecomputationBound: the run's first line says which recomputation error is in
// force (the store's float16 rounding on both sides makes the fp32 default 2^-10 and a little
// more, whatever the kernel), -deployer-precision bf16 widens it, -recompute-error overrides it,
// and an unknown precision is refused with the flag named.
func TestRecoverNamesTheRecomputationBound(t *testing.T) {
	st, model := contentStore(t)
	base := []string{"-store", st, "-model", model, "-candidates", "10", "-victims", "1"}
	fp32 := recoverJSON(t, base...)
	bf16 := recoverJSON(t, append(base, "-deployer-precision", "bf16")...)
	given := recoverJSON(t, append(base, "-recompute-error", "0.002")...)
	if r := fp32.Recompute; r.Precision != "fp32" || !(r.Rho > 0x1p-10 && r.Rho < 0x1p-10*1.1) || r.StoreRoundoff != 0x1p-11 || r.Blocks != 3 {
		t.Errorf("fp32 default: %+v, want deployer fp32 through 3 blocks, rho just above 2^-10", r)
	}
	if bf16.Recompute.Rho <= fp32.Recompute.Rho || bf16.Recompute.Precision != "bf16" {
		t.Errorf("bf16: rho %v against fp32's %v", bf16.Recompute.Rho, fp32.Recompute.Rho)
	}
	if given.Recompute.Rho != 0.002 || given.Recompute.Precision != "" {
		t.Errorf("-recompute-error 0.002: %+v", given.Recompute)
	}
	out, err := cli(t, append([]string{"recover", "-quiet"}, base...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(out), "\n"); !strings.HasPrefix(first, "recomputation error rho") || !strings.Contains(first, "deployer fp32") {
		t.Errorf("first line %q: want the recomputation error in force", first)
	}
	b, err := cli(t, append([]string{"recover", "-quiet", "-deployer-precision", "fp8"}, base...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "-deployer-precision") {
		t.Errorf("-deployer-precision fp8: %v\n%s", err, b)
	}
}

// nearDuplicateSet writes a candidate file of four PINs and a five-digit extension of each, pairs
// whose rows lie closest together of a mixed 3/4/5-digit set on the small store: with one of a
// pair the secret and removed (-absent), the other is a prefix or an extension of it, and passes
// the residual test under a wide enough bound (bf16 observation of a bf16 deployer's rows, 1e-1.66:
// "5821" for the secret "58213" reaches 1e-1.86).
func nearDuplicateSet(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "near.txt")
	if err := os.WriteFile(p, []byte("5821\n58213\n341\n3410\n8779\n87796\n0475\n04755\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRecoverNeverClaimsAnAbsentNearDuplicate removes each victim's secret from a set that keeps
// its prefix or extension, in fp32, bf16 and fp16 observation and at each deployer precision's
// bound: no claim, ever. Where the prefix passes the residual test and leads (bf16 observation,
// bf16 deployer; without the neighbour test 2 of these 8 victims were claimed, both wrong), the
// claim is withdrawn because a neighbour of the prefix (the secret, an append) passes too.
func TestRecoverNeverClaimsAnAbsentNearDuplicate(t *testing.T) {
	st, model := contentStore(t)
	set := "file:" + nearDuplicateSet(t)
	for _, obs := range []string{"none", "bf16", "fp16"} {
		for _, dep := range []string{"fp32", "bf16", "fp16"} {
			r := recoverJSON(t, "-store", st, "-model", model, "-set", set, "-template", "pin", "-victims", "8", "-absent",
				"-observe-dtype", obs, "-deployer-precision", dep)
			if r.Claimed != 0 {
				for _, v := range r.Victims {
					if v.Claimed {
						t.Errorf("observe %s, deployer %s: claimed %s for the absent secret %s (neighbours %+v)", obs, dep, v.Guess, v.Value, v.Neighbours)
					}
				}
			}
			t.Logf("observe %s, deployer %s: claims withdrawn by a neighbour %.2f, not among %.2f", obs, dep, r.Withdrawn, r.Absent)
		}
	}
}

// TestRecoverWithdrawsAClaimThatANeighbourMatches widens the bound (-recompute-error 0.2, bound
// 1e-1.2) so that the prefix or extension left among the candidates passes the residual test and
// leads the rest: without the neighbour test it was claimed (4 of these 8 victims, all wrong).
// Every such claim must be withdrawn, the secret itself the closest neighbour, so the test fails
// if the neighbour test is left out.
func TestRecoverWithdrawsAClaimThatANeighbourMatches(t *testing.T) {
	st, model := contentStore(t)
	r := recoverJSON(t, "-store", st, "-model", model, "-set", "file:"+nearDuplicateSet(t), "-template", "pin", "-victims", "8", "-absent",
		"-recompute-error", "0.2")
	if r.Claimed != 0 {
		t.Errorf("claimed %.2f of the victims with every secret absent", r.Claimed)
	}
	if r.Withdrawn == 0 {
		t.Fatalf("no claim withdrawn: the wide bound no longer lets a near-duplicate pass, the test checks nothing")
	}
	for _, v := range r.Victims {
		if v.Withdrawn && (v.Neighbours == nil || v.Neighbours.Closest != v.Value || v.Neighbours.Passing < 1 || v.Verdict != content.VerdictRanked) {
			t.Errorf("victim %d: claim of %s withdrawn, verdict %q, neighbours %+v; want the absent secret %s the closest neighbour", v.Example, v.Guess, v.Verdict, v.Neighbours, v.Value)
		}
	}
}

// TestRecoverClaimsAPresentSecretPastItsNeighbours: with the secret among the same candidates
// (fp32, default bound) every victim is claimed, rightly, after its neighbours were embedded and
// every one of them failed the residual test: the neighbour test is not "never claim".
func TestRecoverClaimsAPresentSecretPastItsNeighbours(t *testing.T) {
	st, model := contentStore(t)
	r := recoverJSON(t, "-store", st, "-model", model, "-set", "file:"+nearDuplicateSet(t), "-template", "pin", "-victims", "8")
	if r.Claimed != 1 || r.ClaimedCorrect != 1 {
		t.Fatalf("claimed %.2f (right %.2f), want every victim claimed rightly", r.Claimed, r.ClaimedCorrect)
	}
	for _, v := range r.Victims {
		if n := v.Neighbours; n == nil || n.Tested < 50 || n.Passing != 0 || !(n.Score > n.Bound) {
			t.Errorf("victim %d (%s): neighbours %+v; want 50 or more tested, every one beyond the bound", v.Example, v.Value, n)
		}
	}
}

// decoderRecoverFixture writes a random-init Llama-2-shaped decoder with weights of dtype (hf.F32,
// hf.BF16: a bf16 deployer then runs the file's own weights, which the bf16 bound assumes; 2
// blocks, d 128, the lm tests' byte-fallback tokenizer), a float16 store of its attn-input rows at
// block 1 with the BOS rows dropped (`store extract -model`), and a candidate file of PINs beside
// a five-digit extension of each. It returns the model directory, the store and the candidate file.
func decoderRecoverFixture(t *testing.T, dtype string) (modelDir, storeDir, set string) {
	t.Helper()
	dir := t.TempDir()
	writeTinyLM(t, dir, "1") // tokenizer.json and texts.txt
	modelDir = filepath.Join(dir, "model")
	if _, err := hf.Init(hf.InitOptions{Like: "llama2-7b", Layers: 2, Hidden: 128, Vocab: 300, Seed: 4, DType: dtype, Out: modelDir,
		Tokenizer: filepath.Join(dir, "tokenizer.json")}); err != nil {
		t.Fatal(err)
	}
	storeDir = filepath.Join(dir, "store")
	err := runDecoderExtract(context.Background(), decoderExtract{modelDir: modelDir, texts: filepath.Join(dir, "texts.txt"), out: storeDir,
		dtype: store.Float16, norm: store.NormRaw, point: "attn-input", layer: 1, maxTokens: 64, dropSpecial: true}, openDecoderTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	set = filepath.Join(dir, "pairs.txt")
	if err := os.WriteFile(set, []byte("1603\n16037\n5821\n58213\n0475\n04755\n341\n3410\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return modelDir, storeDir, set
}

// `recover -model` on a decoder directory and its store (issue 36 item 1c): a template whose slot
// is last is refused, naming -suffix; with -suffix every victim's secret is claimed rightly
// beside its prefix or extension, each claim after the end-of-text test; with the secrets absent
// nothing is claimed; -deployer-precision bf16 sets rho through the store's block, and claims
// nothing wrong.
func TestRecoverAttacksADecoderStore(t *testing.T) {
	md, st, set := decoderRecoverFixture(t, hf.F32)
	base := []string{"-store", st, "-model", md, "-template", "my PIN is {x}", "-set", "file:" + set, "-victims", "6",
		"-positives", "2", "-tokens-per-text", "48", "-quiet"}
	out, err := cli(t, append([]string{"recover"}, base...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "ends with its slot") || !strings.Contains(string(out), "-suffix") {
		t.Fatalf("a template whose slot is last: %v\n%s", err, out)
	}
	// The grid's dates cell fills "I was born on {x}": without -suffix it would end with the slot.
	grid := append(append([]string{"recover"}, base...), "-template", "my PIN is {x} ok", "-grid")
	if out, err := cli(t, grid...).CombinedOutput(); err == nil || !strings.Contains(string(out), "I was born on {x}") {
		t.Fatalf("-grid with the dates cell's template ending in its slot: %v\n%s", err, out)
	}
	base = append(base, "-suffix", " ok")
	r := recoverJSON(t, base...)
	if !r.Causal || r.Template.Pattern != "my PIN is {x} ok" || r.Claimed != 1 || r.ClaimedCorrect != 1 {
		t.Fatalf("causal %v, template %q, claimed %.2f (right %.2f): want every victim claimed rightly", r.Causal, r.Template.Pattern, r.Claimed, r.ClaimedCorrect)
	}
	for _, v := range r.Victims {
		if v.End == nil || v.End.Tested < 259 || v.End.Passing != 0 {
			t.Errorf("secret %s: end-of-text test %+v, want the vocabulary tested and none passing", v.Value, v.End)
		}
	}
	if r := recoverJSON(t, append(base, "-absent")...); r.Claimed != 0 {
		t.Errorf("secrets absent: claimed %.2f", r.Claimed)
	}
	bf := recoverJSON(t, append(base, "-deployer-precision", "bf16")...)
	if rc := bf.Recompute; rc.Precision != "bf16" || rc.Blocks != 1 || rc.Width != 128 || rc.StoreRoundoff != 0x1p-11 || bf.Absent != 0 || (bf.Claimed > 0 && bf.ClaimedCorrect != 1) {
		t.Errorf("bf16: recompute %+v, not among %.2f, claimed %.2f (right %.2f)", rc, bf.Absent, bf.Claimed, bf.ClaimedCorrect)
	}
	table, err := cli(t, append([]string{"recover"}, base...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(table), "decoder rows: each candidate scored on its rows from the secret to the end of the text") {
		t.Errorf("the table does not say how a decoder is scored:\n%s", table)
	}
}

// Verify's tolerance is the store's own bound (item 2 of issue 36's follow-up): rows an fp32
// forward computed, rounded to bf16 as `store extract -precision bf16` rounds its GEMMs' results,
// pass under meta.json's compute_precision bf16 (the bf16 deployer's recomputation bound) and are
// refused as another model's under an fp32 declaration (the fp32 bound, which bf16's rounding
// exceeds). The store is the decoder fixture's first texts with these rows, float32 so that
// nothing else rounds them.
func TestVerifyToleratesTheStoresDeclaredPrecision(t *testing.T) {
	md, src, _ := decoderRecoverFixture(t, hf.F32)
	ctx := context.Background()
	st, err := store.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var texts []string
	for i := 0; i < st.NumTexts() && len(texts) < 4; i++ {
		if x, ok := st.Text(i); ok && st.NumTokens(i) <= 64 {
			texts = append(texts, x)
		}
	}
	for _, c := range []struct {
		prec string
		pass bool
	}{{store.PrecisionBF16, true}, {"", false}, {store.PrecisionFP32, false}} {
		meta := st.Meta()
		meta.DType, meta.ComputePrecision, meta.NumTexts, meta.NumTokens = store.Float32, c.prec, 0, 0
		emb, err := openDecoderEmbedder(md, meta)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := emb.Embed(ctx, texts, 0, 0, nil) // the fp32 rows, as the store's pass keeps them
		if err != nil {
			t.Fatal(err)
		}
		numfmt.RoundBF16s(rows.Data)
		dir := filepath.Join(t.TempDir(), "store")
		w, err := store.Create(dir, meta)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range texts {
			if err := w.AddTextAt(int64(i), x, true, rows.Pos[i], rows.IDs[i], rows.Text(i), make([]float32, meta.E)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		bf, err := store.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		bound, err := emb.VerifyBound(bf.Meta())
		if err != nil {
			t.Fatal(err)
		}
		worst, err := emb.Verify(ctx, bf, len(texts))
		bf.Close()
		t.Logf("compute_precision %q: bf16-rounded rows lie %.3g from the recomputation, bound %.3g (%s)", c.prec, worst, bound.Rho, bound.Source())
		switch {
		case c.pass && (err != nil || !(worst > 0)):
			t.Errorf("compute_precision %q: %v (worst %.3g); want the bf16-rounded rows accepted, and not bit-equal", c.prec, err, worst)
		case !c.pass && (err == nil || !strings.Contains(err.Error(), "differs from the re-computed row") || !strings.Contains(err.Error(), "compute_precision fp32")):
			t.Errorf("compute_precision %q: %v; want the bf16-rounded rows refused under the fp32 bound, naming it", c.prec, err)
		}
	}
}
