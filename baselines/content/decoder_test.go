package content

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/models/llama"
)

// byteTok is a decoder tokenizer for tests: BOS 256, then one id per byte.
type byteTok struct{}

func (byteTok) Encode(s string, add bool) ([]int, error) {
	var out []int
	if add {
		out = append(out, 256)
	}
	for _, c := range []byte(s) {
		out = append(out, int(c))
	}
	return out, nil
}
func (byteTok) VocabSize() int { return 257 }
func (byteTok) Hash() string   { return "test-bytes" }

// decoderMeta is the meta.json `store extract -model` writes for the test decoder at attn-input
// of block 1.
func decoderMeta(dtype string, drop bool) store.Meta {
	special := store.SpecialKept
	if drop {
		special = store.SpecialDropped
	}
	return store.Meta{D: 96, E: 96, Layer: 1, DType: dtype, Norm: store.NormRaw, SpecialTokens: special, MaxTokens: 64,
		Decoder: &store.DecoderMeta{Family: "llama", Architecture: "LlamaForCausalLM", Point: "attn-input", BOS: special, TokenizerHash: "test-bytes"}}
}

// testDecoder is a random-init Llama of 2 blocks at d 96 (Hugging Face's initializer_range 0.02,
// as `model init` writes) and its embedder for meta.
func testDecoder(t *testing.T, meta store.Meta) *Embedder {
	t.Helper()
	m, err := llama.Random(llama.Config{Architecture: "LlamaForCausalLM", VocabSize: 260, Hidden: 96, Intermediate: 256,
		Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 24, RMSEps: 1e-5, RopeTheta: 1e4, MaxPositions: 128}, 7, 0.02, nil)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := NewDecoderEmbedder(m, nil, byteTok{}, meta)
	if err != nil {
		t.Fatal(err)
	}
	return emb
}

// decoderSampler is a GELO sampler over the decoder's rows of 60 short texts of a few words each
// (the other texts of every example): 2 texts of up to 40 rows per example, every row observed.
func decoderSampler(t *testing.T, emb *Embedder, edit func(c *gelo.Config)) *gelo.Sampler {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 3))
	words := []string{"the", "cat", "sat", "on", "a", "rug", "we", "ate", "at", "noon"}
	texts := make([]string, 60)
	for i := range texts {
		w := make([]string, 2+rng.IntN(4))
		for j := range w {
			w[j] = words[rng.IntN(len(words))]
		}
		texts[i] = strings.Join(w, " ")
	}
	rows, err := emb.Embed(context.Background(), texts, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := data.NewMemCorpus(emb.D(), 1)
	for i := range texts {
		if err := c.Add(int64(i), rows.Text(i), []float32{0}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := gelo.DefaultConfig()
	cfg.Positives, cfg.TokensPerText, cfg.ValFrac = gelo.Fixed(2), gelo.Fixed(40), 0.5
	if edit != nil {
		edit(&cfg)
	}
	s, err := gelo.NewSampler(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runDecoder attacks victims made from pattern and values with the default fp32 bound (or
// precision's), returning the result.
func runDecoder(t *testing.T, emb *Embedder, s *gelo.Sampler, pattern string, values []string, victims int, absent bool, opt func(o *Options)) *Result {
	t.Helper()
	ctx := context.Background()
	tp, err := ParseTemplate("custom", pattern)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Embed(ctx, emb, tp, values, nil)
	if err != nil {
		t.Fatal(err)
	}
	rho, err := DefaultRecompute(emb, "fp32")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Template: tp, Candidates: c, Victims: victims, Split: data.Val, Seed: 5, Absent: absent, Recompute: rho}
	if opt != nil {
		opt(&o)
	}
	res, err := Run(ctx, s, emb, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// prefixPairs are PINs beside a five-digit extension of each: in a causal model the rows of
// "my PIN is 1603" are rows of "my PIN is 16037" bit for bit, and only the rows after the secret
// (" ok") tell them apart.
var prefixPairs = []string{"1603", "16037", "5821", "58213", "0475", "04755", "341", "3410", "8779", "87796"}

// pinTemplate has text after its slot, as a decoder needs.
const pinTemplate = "my PIN is {x} ok"

// Known answer: the decoder's slot rows run from the secret's first token to the end of the text,
// with the BOS row kept or dropped; a text whose suffix the truncation cuts, and a template whose
// slot is last, have no row after the secret and are refused.
func TestDecoderSlotRowsRunToTheEndOfTheText(t *testing.T) {
	tp, err := ParseTemplate("t", pinTemplate)
	if err != nil {
		t.Fatal(err)
	}
	for _, drop := range []bool{false, true} {
		emb := testDecoder(t, decoderMeta(store.Float32, drop))
		c, err := Embed(context.Background(), emb, tp, []string{"1603", "16037", "9"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		off := 1 // BOS, then "my PIN is " (10 bytes)
		if drop {
			off = 0
		}
		for i, v := range c.Values {
			want := [2]int{10 + off, 10 + off + len(v) + 3}
			if c.Slot[i] != want || c.Rows.Off[i+1]-c.Rows.Off[i] != want[1] {
				t.Errorf("drop BOS %v, %q: slot rows %v of %d, want %v to the end", drop, v, c.Slot[i], c.Rows.Off[i+1]-c.Rows.Off[i], want)
			}
		}
	}
	short := decoderMeta(store.Float32, false)
	short.MaxTokens = 15 // BOS + "my PIN is 1603": the suffix is cut off
	if _, err := Embed(context.Background(), testDecoder(t, short), tp, []string{"1603", "5821"}, nil); err == nil || !strings.Contains(err.Error(), "no token after the secret") {
		t.Errorf("a suffix cut by the truncation: %v", err)
	}
	last, _ := ParseTemplate("t", "my PIN is {x}")
	if _, err := Embed(context.Background(), testDecoder(t, short), last, []string{"1603", "5821"}, nil); err == nil || !strings.Contains(err.Error(), "no token after the secret") {
		t.Errorf("a template whose slot is last: %v", err)
	}
}

// A template whose slot is last (white space after it counts as nothing) is refused for a
// decoder before any victim is made, and accepted by an encoder.
func TestDecoderRefusesATemplateWhoseSlotIsLast(t *testing.T) {
	for _, p := range []string{"my PIN is {x}", "my PIN is {x} \n"} {
		tp, err := ParseTemplate("t", p)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckCausalTemplate(tp); err == nil || !strings.Contains(err.Error(), "ends with its slot") {
			t.Errorf("%q: %v", p, err)
		}
		if err := (&Embedder{fwd: &encoder{}}).CheckTemplate(tp); err != nil {
			t.Errorf("%q refused for an encoder: %v", p, err)
		}
	}
	emb := testDecoder(t, decoderMeta(store.Float32, true))
	s := decoderSampler(t, emb, nil)
	tp, _ := ParseTemplate("t", pinTemplate)
	c, err := Embed(context.Background(), emb, tp, prefixPairs, nil)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := ParseTemplate("t", "my PIN is {x}")
	_, err = Run(context.Background(), s, emb, Options{Template: last, Candidates: c, Victims: 1})
	if err == nil || !strings.Contains(err.Error(), "ends with its slot") {
		t.Errorf("Run with the slot last: %v", err)
	}
}

// Every victim's secret is recovered and claimed among candidates that hold its own prefix or
// extension: the secret "16037" contains every row of "1603" up to the secret's end, so the claim
// rests on the suffix rows (scoring the secret's own rows alone leaves "1603" within the bound,
// and nothing is claimed). Each claim took the end-of-text test over the whole vocabulary.
func TestDecoderClaimsAPresentSecretBesideItsPrefix(t *testing.T) {
	emb := testDecoder(t, decoderMeta(store.Float32, true))
	res := runDecoder(t, emb, decoderSampler(t, emb, nil), pinTemplate, prefixPairs, 12, false, nil)
	if !res.Causal || res.Claimed != 1 || res.ClaimedCorrect != 1 {
		logVictims(t, res)
		t.Fatalf("causal %v, claimed %.2f (right %.2f): want every victim claimed rightly", res.Causal, res.Claimed, res.ClaimedCorrect)
	}
	for _, v := range res.Victims {
		if v.End == nil || v.End.Tested != (byteTok{}).VocabSize() || v.End.Passing != 0 || v.End.Void != "" {
			t.Errorf("secret %s: end-of-text test %+v, want the whole vocabulary tested, none passing", v.Value, v.End)
		}
	}
}

// The secret removed from the candidates, its prefix or extension left among them, is never
// claimed, and every victim (each U_obs of full numerical rank n < d, every row observed) is
// proven "not among the candidates": "1603" fails for the secret "16037" by its suffix rows. If
// the suffix rows were not scored, "1603" would pass and this verdict could not be given.
func TestDecoderNeverClaimsAnAbsentSecretWhosePrefixIsACandidate(t *testing.T) {
	emb := testDecoder(t, decoderMeta(store.Float32, true))
	res := runDecoder(t, emb, decoderSampler(t, emb, nil), pinTemplate, prefixPairs, 12, true, nil)
	if res.Claimed != 0 {
		t.Errorf("claimed %.2f of the victims with every secret absent", res.Claimed)
	}
	for _, v := range res.Victims {
		if v.Rank != v.NObs {
			t.Fatalf("secret %s: rank %d of %d observed rows: the fixture lost a direction, so absence is not provable", v.Value, v.Rank, v.NObs)
		}
		if v.Verdict != VerdictAbsent {
			t.Errorf("secret %s (absent): verdict %q, guess %s (best score %.2f, bound %.2f); want %q", v.Value, v.Verdict, v.Guess,
				v.Outcomes[0].BestWrong, math.Log10(v.ResidualBound), VerdictAbsent)
		}
	}
}

// Repeated tokens: in "no no {x} no no" the text of "no" is the first 14 rows of the text of
// "no no", suffix rows included, so with the secret "no no" absent the candidate "no" passes,
// every other candidate fails and no edit-one neighbour of "no" is the secret: only the end-of-
// text test (the row of " " after "no no no no no" is the victim's next row) withdraws the claim.
// With the secret present, "no no" is ranked without a claim ("no" passes too) and every other
// secret is claimed rightly.
func TestDecoderEndOfTextTestWithdrawsARepeatedTokenPrefix(t *testing.T) {
	emb := testDecoder(t, decoderMeta(store.Float32, true))
	s := decoderSampler(t, emb, nil)
	values := []string{"no", "no no", "on", "nono", "o"}
	const pattern = "no no {x} no no"
	present := runDecoder(t, emb, s, pattern, values, 20, false, nil)
	absent := runDecoder(t, emb, s, pattern, values, 20, true, nil)
	ended := 0
	for i, v := range present.Victims {
		switch {
		case v.Claimed && v.Guess != v.Value:
			t.Errorf("secret %q: WRONG claim %q", v.Value, v.Guess)
		case v.Value == "no no" && v.Verdict != VerdictRanked:
			t.Errorf("secret %q, whose text holds all of the text of \"no\": verdict %q, want %q", v.Value, v.Verdict, VerdictRanked)
		case v.Value != "no no" && !v.Claimed:
			t.Errorf("secret %q: verdict %q, want a claim", v.Value, v.Verdict)
		}
		a := absent.Victims[i]
		if a.Claimed {
			t.Errorf("secret %q absent: claimed %q (end %+v)", a.Value, a.Guess, a.End)
		}
		if a.Value == "no no" {
			if !a.EndWithdrawn || a.End == nil || a.End.Passing < 1 || a.End.Closest != ' ' || a.Guess != "no" {
				t.Errorf("secret \"no no\" absent: guess %q, end-of-text test %+v (withdrawn %v); want the claim of \"no\" withdrawn, the next token \" \" passing", a.Guess, a.End, a.EndWithdrawn)
			}
			ended++
		}
	}
	if ended == 0 {
		t.Fatal("no victim had the secret \"no no\": the end-of-text test is not exercised")
	}
}

// The deployer-precision path: victims' rows a bf16 deployer might have mixed (the fp32 rows
// rounded to bf16, relative error <= 2^-8). Under the fp32 bound every present secret fails its
// own test and is declared "not among the candidates", a wrong absolute verdict; under
// -deployer-precision bf16 (rho for one block at d 96) no present secret is, no claim is wrong,
// and with the secrets absent nothing is claimed.
func TestDecoderHonoursTheDeployerPrecision(t *testing.T) {
	emb := testDecoder(t, decoderMeta(store.Float32, true))
	s := decoderSampler(t, emb, nil)
	bf16 := func(precision string) func(o *Options) {
		return func(o *Options) {
			o.Deployer = func(ctx context.Context, texts []string) (*Rows, error) {
				r, err := emb.Embed(ctx, texts, 0, 0, nil)
				if err == nil {
					roundTo(r.Data, gelo.ObserveBF16)
				}
				return r, err
			}
			var err error
			if o.Recompute, err = DefaultRecompute(emb, precision); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r := runDecoder(t, emb, s, pinTemplate, prefixPairs, 8, false, bf16("fp32")); r.Absent != 1 {
		t.Fatalf("bf16 rows under the fp32 bound: 'not among' for %.2f of the present secrets, want all (else the bf16 bound below is not tested)", r.Absent)
	}
	r := runDecoder(t, emb, s, pinTemplate, prefixPairs, 8, false, bf16("bf16"))
	if r.Absent != 0 || (r.Claimed > 0 && r.ClaimedCorrect != 1) || r.Recompute.Precision != "bf16" || r.Recompute.Blocks != 1 || r.Recompute.Width != 96 {
		logVictims(t, r)
		t.Errorf("bf16 bound: not among %.2f, claimed %.2f (right %.2f), recompute %+v; want no 'not among', no wrong claim, rho of bf16 through 1 block at d 96",
			r.Absent, r.Claimed, r.ClaimedCorrect, r.Recompute)
	}
	if r := runDecoder(t, emb, s, pinTemplate, prefixPairs, 8, true, bf16("bf16")); r.Claimed != 0 {
		t.Errorf("bf16 bound, secrets absent: claimed %.2f", r.Claimed)
	}
}

// The end-of-text test proves nothing where the row after the claimed text may be missing from
// U_obs, and then withdraws the claim; a decision that is not a claim passes through.
func TestEndVoidWithdrawsWhatItCannotTest(t *testing.T) {
	cfg := gelo.DefaultConfig()
	cfg.TokensPerText = gelo.Fixed(20)
	if v := EndVoid(cfg, 19); v != "" {
		t.Errorf("19 rows in windows of 20, all observed: void %q", v)
	}
	for name, edit := range map[string]func(c *gelo.Config){
		"window as short as the text": func(c *gelo.Config) { c.TokensPerText = gelo.Fixed(19) },
		"rows dropped":                func(c *gelo.Config) { c.ObsRows = 0.99 },
		"random rows":                 func(c *gelo.Config) { c.TokenSampling = gelo.TokenRandom },
	} {
		c := cfg
		edit(&c)
		v := EndVoid(c, 19)
		if v == "" {
			t.Errorf("%s: not void", name)
		}
		dec, err := CheckEnd(nil, Decision{Verdict: VerdictClaim}, nil, v)
		if err != nil || dec.Verdict != VerdictRanked || !dec.EndWithdrawn || dec.End.Void != v {
			t.Errorf("%s: %+v, %v; want the claim withdrawn with the reason", name, dec, err)
		}
	}
	if dec, err := CheckEnd(nil, Decision{Verdict: VerdictAbsent}, nil, "x"); err != nil || dec.Verdict != VerdictAbsent || dec.End != nil {
		t.Errorf("not a claim: %+v, %v", dec, err)
	}
}

func logVictims(t *testing.T, res *Result) {
	t.Helper()
	for _, v := range res.Victims {
		t.Logf("secret %s (absent %v): %s %s, rank %d, best wrong %.2f, bound %.2f, neighbours %+v, end %+v",
			v.Value, v.SecretAbsent, v.Verdict, v.Guess, v.Outcomes[0].Rank, v.Outcomes[0].BestWrong, math.Log10(v.ResidualBound), v.Neighbours, v.End)
	}
}
