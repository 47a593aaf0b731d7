package corpus

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
