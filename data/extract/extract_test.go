package extract

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/internal/safetensors"
)

// memSink keeps every text it is given.
type memSink struct {
	ids    []int64
	texts  []string
	tokens [][]int32
	rows   [][]float32
	embs   [][]float32
	failAt int // AddText fails on this call (1-based); 0 never
}

func (s *memSink) AddText(id int64, text string, hasText bool, tokenIDs []int32, rows, emb []float32) error {
	if s.failAt > 0 && len(s.ids)+1 == s.failAt {
		return errors.New("sink full")
	}
	s.ids = append(s.ids, id)
	s.texts = append(s.texts, text)
	s.tokens = append(s.tokens, slices.Clone(tokenIDs))
	s.rows = append(s.rows, slices.Clone(rows))
	s.embs = append(s.embs, slices.Clone(emb))
	return nil
}

// tinySetup gives the tiny test model with a toy tokenizer over its 20-token vocabulary.
func tinySetup(t *testing.T) (*Model, *wordpiece.Tokenizer) {
	t.Helper()
	m, err := LoadModel(writeTinyModel(t, tinyConfig, "", safetensors.F32, 3), blas.Default())
	if err != nil {
		t.Fatal(err)
	}
	vocab := map[string]int32{"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
	for i, w := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "##s", "##t", ".", ","} {
		vocab[w] = int32(5 + i)
	}
	tok, err := wordpiece.New(vocab, wordpiece.BertUncased())
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

var tinyTexts = []Text{
	{10, "a b c"}, {11, "d e f g h a b c d e f"}, {12, "as at."}, {13, "h"},
	{14, "a, b, c, d, e, f, g, h"}, {15, "zz"}, {16, "b b b"},
}

func TestRunMatchesSingleTextForward(t *testing.T) {
	m, tok := tinySetup(t)
	h := m.Hidden()
	for _, layer := range []int{0, 1, 2} {
		sink := &memSink{}
		// A budget of 16 tokens forces several batches of several texts.
		st, err := Run(context.Background(), m, tok, tinyTexts, Options{Layer: layer, BatchTokens: 16, MaxTokens: 10}, sink)
		if err != nil {
			t.Fatal(err)
		}
		if st.Texts != int64(len(tinyTexts)) || len(sink.ids) != len(tinyTexts) {
			t.Fatalf("layer %d: %d texts in stats, %d in sink, want %d", layer, st.Texts, len(sink.ids), len(tinyTexts))
		}
		if st.Truncated != 2 { // texts 11 and 14 exceed 10 tokens
			t.Errorf("layer %d: %d truncated, want 2", layer, st.Truncated)
		}
		ws, err := m.NewWorkspace(16, 16, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i, tx := range tinyTexts {
			if sink.ids[i] != tx.ID || sink.texts[i] != tx.Text {
				t.Fatalf("position %d: got text %d %q, want %d %q (input order)", i, sink.ids[i], sink.texts[i], tx.ID, tx.Text)
			}
			want := tok.Encode(tx.Text, 10)
			if !slices.Equal(sink.tokens[i], want) {
				t.Errorf("text %d: token ids %v, want %v", tx.ID, sink.tokens[i], want)
			}
			// The text alone through the encoder: packing with other texts must not change a value.
			hidden := make([]float32, len(want)*h)
			pooled := make([]float32, h)
			if err := m.Forward(context.Background(), ws, [][]int32{want}, layer, hidden, pooled); err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(sink.rows[i], hidden); d > 1e-5 || len(sink.rows[i]) != len(hidden) {
				t.Errorf("layer %d text %d: rows differ from the text alone by %g (len %d vs %d)", layer, tx.ID, d, len(sink.rows[i]), len(hidden))
			}
			if d := maxDiff(sink.embs[i], pooled); d > 1e-5 {
				t.Errorf("layer %d text %d: embedding differs from the text alone by %g", layer, tx.ID, d)
			}
		}
	}
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range min(len(a), len(b)) {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func TestRunOptions(t *testing.T) {
	m, tok := tinySetup(t)
	h := m.Hidden()
	ctx := context.Background()
	full := &memSink{}
	if _, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 2}, full); err != nil {
		t.Fatal(err)
	}

	// DropSpecial removes exactly the first and last row and id.
	drop := &memSink{}
	st, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 2, DropSpecial: true}, drop)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for i := range tinyTexts {
		n := len(full.tokens[i])
		if !slices.Equal(drop.tokens[i], full.tokens[i][1:n-1]) || maxDiff(drop.rows[i], full.rows[i][h:(n-1)*h]) != 0 || len(drop.rows[i]) != (n-2)*h {
			t.Errorf("text %d: drop-special did not remove exactly [CLS] and [SEP]", tinyTexts[i].ID)
		}
		if maxDiff(drop.embs[i], full.embs[i]) != 0 {
			t.Errorf("text %d: drop-special changed the sentence embedding", tinyTexts[i].ID)
		}
		rows += int64(n - 2)
	}
	if st.StoredRows != rows {
		t.Errorf("StoredRows = %d, want %d", st.StoredRows, rows)
	}

	// NormRMS: every stored row has unit RMS and points the same way as the raw row.
	rms := &memSink{}
	if _, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 2, Norm: NormRMS}, rms); err != nil {
		t.Fatal(err)
	}
	for i := range tinyTexts {
		for r := 0; r < len(rms.rows[i]); r += h {
			var ss, dot, rr float64
			for j := 0; j < h; j++ {
				a, b := float64(rms.rows[i][r+j]), float64(full.rows[i][r+j])
				ss += a * a
				dot += a * b
				rr += b * b
			}
			if math.Abs(ss/float64(h)-1) > 1e-4 || math.Abs(dot/math.Sqrt(ss*rr)-1) > 1e-6 {
				t.Fatalf("text %d row %d: mean square %g, cosine to raw %g", tinyTexts[i].ID, r/h, ss/float64(h), dot/math.Sqrt(ss*rr))
			}
		}
	}

	// MaxTexts keeps a prefix.
	few := &memSink{}
	if _, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 1, MaxTexts: 3}, few); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(few.ids, []int64{10, 11, 12}) {
		t.Errorf("MaxTexts 3 gave ids %v", few.ids)
	}

	bad := map[string]Options{
		"layer 3":          {Layer: 3},
		"max tokens 1":     {MaxTokens: 1},
		"max tokens 17":    {MaxTokens: 17},
		"budget below len": {MaxTokens: 10, BatchTokens: 9},
		"norm l2":          {Norm: "l2"},
		"negative texts":   {MaxTexts: -1},
	}
	for name, o := range bad {
		if _, err := Run(ctx, m, tok, tinyTexts, o, &memSink{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// A failing sink stops the run with its error, naming the text.
	if _, err := Run(ctx, m, tok, tinyTexts, Options{Layer: 1, BatchTokens: 16}, &memSink{failAt: 4}); err == nil || !strings.Contains(err.Error(), "sink full") || !strings.Contains(err.Error(), "id 13") {
		t.Errorf("failing sink: got %v", err)
	}
	// A cancelled context stops the run.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Run(cctx, m, tok, tinyTexts, Options{Layer: 1, BatchTokens: 16}, &memSink{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: got %v, want context.Canceled", err)
	}
}

// TestMiniLMRunReproducesPublished runs the whole pipeline (several texts per batch, the layer
// rows of one layer, the pooled embedding) and checks one published similarity through it.
func TestMiniLMRunReproducesPublished(t *testing.T) {
	m, tok := loadMiniLM(t)
	texts := []Text{{1, "The weather is lovely today."}, {2, "It's so sunny outside!"}, {3, "He drove to the stadium."}}
	sink := &memSink{}
	if _, err := Run(context.Background(), m, tok, texts, Options{Layer: 6, MaxTokens: 256, BatchTokens: 512}, sink); err != nil {
		t.Fatal(err)
	}
	if got := dot(sink.embs[0], sink.embs[1]); math.Abs(got-0.6660) >= 5e-4 {
		t.Errorf("cos = %.4f, published 0.6660", got)
	}
	// Layer 6 is the last layer, so the stored rows' mean, normalised, is the sentence embedding.
	h := m.Hidden()
	mean := make([]float64, h)
	n := len(sink.rows[2]) / h
	for r := 0; r < n; r++ {
		for j := 0; j < h; j++ {
			mean[j] += float64(sink.rows[2][r*h+j])
		}
	}
	var nrm float64
	for _, v := range mean {
		nrm += v * v
	}
	for j := range mean {
		if d := math.Abs(mean[j]/math.Sqrt(nrm) - float64(sink.embs[2][j])); d > 1e-5 {
			t.Fatalf("dim %d: pooled last-layer rows differ from the embedding by %g", j, d)
		}
	}
}

func TestReadSourceFiles(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "texts.txt")
	if err := os.WriteFile(plain, []byte("first text\n\n  \nsecond\r\nfirst text\nthird \xff bad utf8\nlast no newline"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Invalid UTF-8 is refused, naming the file, the line and the byte offset (line 6 starts at
	// offset 34 of the file; 0xff is its 7th byte)...
	_, err := ReadSource(plain, nil)
	if !errors.Is(err, ErrInvalidUTF8) || !strings.Contains(err.Error(), plain+":6: byte offset 6 of the line (offset 40 of the file)") ||
		!strings.Contains(err.Error(), "0xff") {
		t.Fatalf("invalid UTF-8: %v", err)
	}
	// ...or replaced and counted when asked.
	src, err := ReadSourceWith(plain, SourceOptions{ReplaceInvalidUTF8: true})
	if err != nil {
		t.Fatal(err)
	}
	if src.Replaced != 1 || !strings.Contains(src.Desc, "1 invalid UTF-8 sequences replaced") {
		t.Errorf("replaced %d, desc %q", src.Replaced, src.Desc)
	}
	wantIDs := []int64{1, 4, 6, 7} // blank lines 2-3 skipped, line 5 repeats line 1
	var ids []int64
	for _, x := range src.Texts {
		ids = append(ids, x.ID)
	}
	if !slices.Equal(ids, wantIDs) || src.Duplicates != 1 {
		t.Errorf("plain file: ids %v duplicates %d, want %v and 1", ids, src.Duplicates, wantIDs)
	}
	if src.Texts[1].Text != "second" || src.Texts[2].Text != "third \uFFFD bad utf8" {
		t.Errorf("plain file texts: %v", src.Texts)
	}
	if !strings.Contains(src.Desc, "sha256:") {
		t.Errorf("description %q names no hash", src.Desc)
	}

	jl := filepath.Join(dir, "texts.jsonl")
	if err := os.WriteFile(jl, []byte(`{"id": 42, "text": "forty-two"}`+"\n"+`{"text": "line two"}`+"\n\n"+`{"id": 7, "text": "seven"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err = ReadSource(jl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Texts) != 3 || src.Texts[0] != (Text{42, "forty-two"}) || src.Texts[1] != (Text{2, "line two"}) || src.Texts[2] != (Text{7, "seven"}) {
		t.Errorf("jsonl: %v", src.Texts)
	}
	for name, content := range map[string]string{
		"invalid utf-8":  `{"id": 1, "text": "a"}` + "\n" + "{\"text\": \"b\xc3\"}",
		"lone surrogate": `{"id": 1, "text": "a \ud800 b"}`,
		"dup id":         `{"id": 1, "text": "a"}` + "\n" + `{"id": 1, "text": "b"}`,
		"id clash line":  `{"id": 2, "text": "a"}` + "\n" + `{"text": "b"}`,
		"no text":        `{"id": 1}`,
		"unknown field":  `{"id": 1, "text": "a", "lang": "en"}`,
		"not json":       `hello`,
	} {
		p := filepath.Join(dir, "bad.jsonl")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSource(p, nil); err == nil {
			t.Errorf("jsonl %s: accepted", name)
		}
	}
	// A surrogate pair is one character; replacing counts the lone ones.
	if err := os.WriteFile(jl, []byte(`{"text": "pair \ud83d\ude00, escaped \\ud800"}`+"\n"+`{"text": "lone \udc00 \ud800"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadSource(jl, nil)
	if !errors.Is(err, ErrInvalidUTF8) || !strings.Contains(err.Error(), jl+":2: byte offset 15 of the line") || !strings.Contains(err.Error(), `\udc00`) {
		t.Fatalf("lone surrogate: %v", err)
	}
	if src, err = ReadSourceWith(jl, SourceOptions{ReplaceInvalidUTF8: true}); err != nil || src.Replaced != 2 ||
		src.Texts[0].Text != "pair \U0001F600, escaped \\ud800" || src.Texts[1].Text != "lone \uFFFD \uFFFD" {
		t.Fatalf("replaced lone surrogates: %v %+v", err, src)
	}
	if _, err := ReadSource(filepath.Join(dir, "missing.txt"), nil); err == nil {
		t.Error("missing file accepted")
	}
	if _, err := ReadSource(plain, []string{"fortunes"}); err == nil {
		t.Error("corpus selection on a plain file accepted")
	}
}

// writeCorpusDir lays out a miniature fetch-script directory.
func writeCorpusDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fdir := "fortunes/usr/share/games/fortunes/"
	write(fdir+"zen", "Be here now.\n%\n  \n%\nB\bBold _\bu_\bn_\bd_\be_\br.\n\t-- Someone\n%\nBe here now.\n")
	write(fdir+"art", "Art is long.\n%\nLife is short.\n")
	write(fdir+"art.dat", "binary index")
	write(fdir+"ascii-art", "(o_o)\n%\n")
	wdir := "wordnet/usr/share/wordnet/"
	header := "  1 This software and database is being provided to you, the LICENSEE, by  \n"
	write(wdir+"data.noun", header+"00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived or known or inferred to have its own distinct existence (living or nonliving)  \n"+
		"00005930 03 n 02 dwarf 0 midget 0 001 @ 00004475 n 0000 | a plant or animal that is atypically small  \n")
	write(wdir+"data.verb", header+"00001740 29 v 04 breathe 0 take_a_breath 0 respire 0 suspire 3 021 * 00005041 v 0000 | draw air into, and expel out of, the lungs  \n")
	write(wdir+"data.adj", header+"00001740 00 a 01 able(p) 0 005 = 05207437 n 0000 | (usually followed by `to') having the necessary means  \n")
	write(wdir+"data.adv", header)
	sdir := "sotu/package/data/"
	long := strings.Repeat("We the people hold these truths to be plain. ", 12)
	write(sdir+"1790_george_washington_n.txt", "Fellow-Citizens of the Senate. I embrace with great satisfaction the opportunity. "+long)
	write(sdir+"1790_george_washington_n.json", `{}`)
	write("SOURCES.txt", "debian:fortunes=1 sha256:00 -> fortunes/\nnpm:sotu sha512-00 -> sotu/\n")
	return dir
}

func TestReadCorpusDir(t *testing.T) {
	dir := writeCorpusDir(t)
	src, err := ReadSource(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]string{}
	for _, x := range src.Texts {
		byID[x.ID] = x.Text
	}
	want := map[int64]string{
		// fortunes: files sorted (art=1, zen=2); fortune 2 of zen is blank, 4 repeats 1.
		1_000_001_000_001: "Art is long.",
		1_000_001_000_002: "Life is short.",
		1_000_002_000_001: "Be here now.",
		1_000_002_000_003: "Bold under.\n\t-- Someone",
		2_001_000_001_740: "entity: that which is perceived or known or inferred to have its own distinct existence (living or nonliving)",
		2_001_000_005_930: "dwarf, midget: a plant or animal that is atypically small",
		2_002_000_001_740: "breathe, take a breath, respire, suspire: draw air into, and expel out of, the lungs",
		2_003_000_001_740: "able: (usually followed by `to') having the necessary means",
	}
	for id, w := range want {
		if byID[id] != w {
			t.Errorf("id %d: got %q, want %q", id, byID[id], w)
		}
	}
	if src.Duplicates != 1 {
		t.Errorf("duplicates = %d, want 1 (the repeated fortune)", src.Duplicates)
	}
	var sotu []string
	for id := int64(CorpusSOTU*idScale + 100_001); id < CorpusSOTU*idScale+100_100; id++ {
		if s, ok := byID[id]; ok {
			sotu = append(sotu, s)
		}
	}
	if len(sotu) < 2 || !strings.HasPrefix(sotu[0], "Fellow-Citizens of the Senate. I embrace") {
		t.Fatalf("sotu chunks: %q", sotu)
	}
	words := 0
	for _, c := range sotu {
		n := len(strings.Fields(c))
		words += n
		if n > sotuMaxWords || !strings.HasSuffix(c, ".") {
			t.Errorf("chunk of %d words, or not ending a sentence: %q", n, c)
		}
	}
	if words != 11+12*9 {
		t.Errorf("sotu chunks hold %d words, the address has %d", words, 11+12*9)
	}
	if len(src.Texts) != len(want)+len(sotu) || !strings.Contains(src.Desc, "sha512-00") {
		t.Errorf("%d texts (want %d), desc %q", len(src.Texts), len(want)+len(sotu), src.Desc)
	}
	// The order is the hash order, the same on every read, and a prefix mixes corpora.
	again, err := ReadSource(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Texts, src.Texts) {
		t.Error("two reads gave different orders")
	}
	if slices.IsSortedFunc(src.Texts, func(a, b Text) int { return cmpInt64(a.ID, b.ID) }) {
		t.Error("texts are in id order, not hash order")
	}

	only, err := ReadSource(dir, []string{"wordnet"})
	if err != nil {
		t.Fatal(err)
	}
	if len(only.Texts) != 4 {
		t.Errorf("wordnet only: %d texts, want 4", len(only.Texts))
	}
	if _, err := ReadSource(dir, []string{"bible"}); err == nil {
		t.Error("unknown corpus accepted")
	}
	if _, err := ReadSource(t.TempDir(), nil); err == nil {
		t.Error("empty directory accepted")
	}
}

func TestParseSynsetRejects(t *testing.T) {
	for _, l := range []string{
		"00001740 03 n 01 entity 0 003",     // no gloss
		"x 03 n 01 entity 0 | gloss",        // offset
		"00001740 03 n zz entity 0 | gloss", // word count
		"00001740 03 n 05 entity 0 | gloss", // more words than fields
		"00001740 03 n | gloss",             // too few fields
	} {
		if _, err := parseSynset(l, 1); err == nil {
			t.Errorf("%q: accepted", l)
		}
	}
}

// A corpus file read whole names the line and offset of its invalid UTF-8 too.
func TestReadSourceCorpusInvalidUTF8(t *testing.T) {
	dir := t.TempDir()
	cookies := filepath.Join(dir, "fortunes/usr/share/games/fortunes/cookies")
	if err := os.MkdirAll(filepath.Dir(cookies), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cookies, []byte("one\n%\ntwo \xfe\xfe three\n%\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadSource(dir, nil)
	if !errors.Is(err, ErrInvalidUTF8) || !strings.Contains(err.Error(), cookies+":3: byte offset 4 of the line (offset 10 of the file)") {
		t.Fatalf("fortune with invalid UTF-8: %v", err)
	}
	src, err := ReadSourceWith(dir, SourceOptions{ReplaceInvalidUTF8: true})
	if err != nil || src.Replaced != 1 || len(src.Texts) != 2 {
		t.Fatalf("replaced: %v %+v", err, src)
	}
}
