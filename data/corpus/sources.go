// Package corpus reads the texts that extraction and the language-model task consume: text
// files (one text per line, or JSON lines) and the corpora that scripts/fetch-data.sh downloads
// (fortunes, WordNet glosses, State of the Union chunks), and locates the download cache.
package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// Text is one input text and its stable text_id.
type Text struct {
	ID   int64
	Text string
}

// Source is a list of texts in the order extraction takes them, with a description for the
// store's meta.json.
type Source struct {
	Texts []Text
	// Desc names where the texts came from (package versions and hashes, or a file and its sha256).
	Desc string
	// Duplicates is how many texts were dropped because an earlier text had the same content.
	Duplicates int
	// Replaced is how many invalid UTF-8 sequences were replaced with U+FFFD
	// (SourceOptions.ReplaceInvalidUTF8; without it, invalid UTF-8 is refused).
	Replaced int
}

// Bytes is the size of the texts' contents.
func (s *Source) Bytes() int64 {
	var n int64
	for _, t := range s.Texts {
		n += int64(len(t.Text))
	}
	return n
}

// SourceOptions configures ReadSourceWith.
type SourceOptions struct {
	// Corpora are the corpora of a fetch-script directory to read (nil: all present).
	Corpora []string
	// ReplaceInvalidUTF8 replaces each run of invalid UTF-8 bytes, and each unpaired surrogate
	// escape of a .jsonl text, with U+FFFD and counts them in Source.Replaced (and its Desc),
	// instead of refusing the file.
	ReplaceInvalidUTF8 bool
}

// ErrInvalidUTF8 is wrapped by the refusal of a text that is not valid UTF-8; the error names the
// file, the line and the byte offset.
var ErrInvalidUTF8 = errors.New("invalid UTF-8")

// Text ids of the fetch-script corpus directory are Corpus*1e12 + a per-corpus id, so the corpus
// of any text_id can be read off its decimal digits.
const (
	idScale       = 1_000_000_000_000
	CorpusFortune = 1 // fortunes: file index (1-based, sorted names) * 1e6 + fortune index (1-based)
	CorpusWordNet = 2 // WordNet 3.0 glosses: part of speech (1 n, 2 v, 3 a, 4 r) * 1e9 + synset offset
	CorpusSOTU    = 3 // State of the Union chunks: file index (1-based, sorted names) * 1e5 + chunk (1-based)
)

// CorpusNames are the corpus sub-directories a fetch-script directory may hold, in id order.
var CorpusNames = []string{"fortunes", "wordnet", "sotu"}

// ReadSource reads the texts of a source path:
//   - a directory made by scripts/fetch-data.sh (fortunes/, wordnet/, sotu/ and SOURCES.txt): texts
//     of the corpora named in corpora (nil: all present), ordered by a stable hash of their text
//     id so that every prefix (what -max-texts keeps) is a uniform mix of the corpora;
//   - a file ending in .jsonl: one JSON object per line, {"id": <int64, optional>, "text": "..."},
//     in file order; a missing id is the 1-based line number;
//   - any other file: one text per line, in file order, text_id = 1-based line number.
//
// Blank texts are skipped (their ids stay unused); texts whose content repeats an earlier text are
// dropped and counted, because identical texts would give identical rows under two ids. A text
// that is not valid UTF-8 is refused, naming the file, the line and the byte offset
// (ErrInvalidUTF8): a tokenizer would read it as something else than what the file holds.
func ReadSource(path string, corpora []string) (*Source, error) {
	return ReadSourceWith(path, SourceOptions{Corpora: corpora})
}

// ReadSourceWith is ReadSource with options: the corpora, and whether invalid UTF-8 is replaced
// (and counted) rather than refused.
func ReadSourceWith(path string, opt SourceOptions) (*Source, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("texts: %w", err)
	}
	u := &utf8Policy{replace: opt.ReplaceInvalidUTF8}
	var src *Source
	if fi.IsDir() {
		src, err = readCorpusDir(path, opt.Corpora, u)
	} else {
		if len(opt.Corpora) > 0 {
			return nil, fmt.Errorf("texts: %s is a file; corpus selection applies only to a fetch-script directory", path)
		}
		src, err = readTextFile(path, u)
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		src.dedupe() // a corpus directory dedupes in id order before shuffling
	}
	if src.Replaced = u.replaced; u.replaced > 0 {
		src.Desc += fmt.Sprintf(" (%d invalid UTF-8 sequences replaced with U+FFFD)", u.replaced)
	}
	return src, nil
}

// utf8Policy is what a source does with invalid UTF-8: refuse it, or replace and count it.
type utf8Policy struct {
	replace  bool
	replaced int
}

// check returns b as a string when it is valid UTF-8. Otherwise it refuses it, naming the first
// invalid byte through where (its offset in b -> "file:line: ... offset"), or, when replacing,
// returns b with each run of invalid bytes replaced by U+FFFD and counts the runs.
func (u *utf8Policy) check(b []byte, where func(off int) string) (string, error) {
	if utf8.Valid(b) {
		return string(b), nil
	}
	first, runs := invalidRuns(b)
	if !u.replace {
		return "", fmt.Errorf("%s: %w: byte 0x%02x", where(first), ErrInvalidUTF8, b[first])
	}
	u.replaced += runs
	return strings.ToValidUTF8(string(b), "\uFFFD"), nil
}

// invalidRuns is the offset of the first byte of b that starts no valid UTF-8 sequence, and the
// number of runs of such bytes (what strings.ToValidUTF8 replaces one each).
func invalidRuns(b []byte) (first, runs int) {
	first = -1
	in := false
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		bad := r == utf8.RuneError && size == 1
		if bad && !in {
			runs++
			if first < 0 {
				first = i
			}
		}
		in = bad
		i += size
	}
	return first, runs
}

// inFile locates offset off of a file's contents raw by line: "path:line: byte offset c of the
// line (offset off of the file)", lines and offsets as an editor counts them (1-based lines,
// 0-based byte offsets).
func inFile(path string, raw []byte) func(off int) string {
	return func(off int) string {
		line := 1 + bytes.Count(raw[:off], []byte("\n"))
		col := off - (bytes.LastIndexByte(raw[:off], '\n') + 1)
		return fmt.Sprintf("%s:%d: byte offset %d of the line (offset %d of the file)", path, line, col, off)
	}
}

// inLine locates offset off of line number line, which starts at offset start of the file.
func inLine(path string, line int, start int64) func(off int) string {
	return func(off int) string {
		return fmt.Sprintf("%s:%d: byte offset %d of the line (offset %d of the file)", path, line, off, start+int64(off))
	}
}

// loneSurrogate is the offset in a JSON text of the first \u escape of a UTF-16 surrogate that
// is not part of a pair (encoding/json decodes it to U+FFFD without a word), and how many there
// are; first is -1 when there is none.
func loneSurrogate(js []byte) (first, n int) {
	first = -1
	// escape is the code unit of the \uXXXX escape at i, if there is one.
	escape := func(i int) (rune, bool) {
		if i+6 > len(js) || js[i] != '\\' || js[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(js[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i+1 < len(js); i++ {
		if js[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		if !ok {
			i++ // \" \\ \n ...: the escaped character starts nothing
			continue
		}
		at := i
		i += 5
		if !utf16.IsSurrogate(r) {
			continue
		}
		if lo, ok := escape(i + 1); r < 0xDC00 && ok && lo >= 0xDC00 && lo <= 0xDFFF {
			i += 6 // a high surrogate and its low one
			continue
		}
		if first < 0 {
			first = at
		}
		n++
	}
	return first, n
}

// dedupe drops texts whose (trimmed) content equals an earlier one, keeping the order.
func (s *Source) dedupe() {
	seen := make(map[string]struct{}, len(s.Texts))
	out := s.Texts[:0]
	for _, t := range s.Texts {
		k := strings.TrimSpace(t.Text)
		if _, dup := seen[k]; dup {
			s.Duplicates++
			continue
		}
		seen[k] = struct{}{}
		out = append(out, t)
	}
	s.Texts = out
}

// readTextFile reads a plain (one text per line) or .jsonl file, streamed line by line under the
// texts kind's line limit (internal/safefile): a FIFO, a device or a file without newlines is
// refused, not read until memory runs out.
func readTextFile(path string, u *utf8Policy) (*Source, error) {
	lr, err := safefile.Lines(path, safefile.Texts)
	if err != nil {
		return nil, fmt.Errorf("texts: %w", err)
	}
	defer lr.Close()
	h := sha256.New()
	jsonl := strings.HasSuffix(path, ".jsonl")
	ids := make(map[int64]int)
	var texts []Text
	var start int64 // the line's offset in the file
	for {
		b, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("texts: %w", err)
		}
		line := lr.Line()
		h.Write(b)
		where := inLine(path, line, start)
		start += int64(len(b))
		b = bytes.TrimRight(b, "\r\n")
		s, err := u.check(b, where)
		if err != nil {
			return nil, fmt.Errorf("texts: %w", err)
		}
		t := Text{ID: int64(line), Text: s}
		if jsonl {
			if len(bytes.TrimSpace(b)) == 0 {
				continue
			}
			if off, n := loneSurrogate(b); n > 0 {
				if !u.replace {
					return nil, fmt.Errorf("texts: %s: %w: an unpaired surrogate escape %s", where(off), ErrInvalidUTF8, b[off:off+6])
				}
				u.replaced += n // encoding/json decodes each to U+FFFD
			}
			var rec struct {
				ID   *int64  `json:"id"`
				Text *string `json:"text"`
			}
			dec := json.NewDecoder(strings.NewReader(s))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rec); err != nil {
				return nil, fmt.Errorf("texts: %s:%d: %w", path, line, err)
			}
			if rec.Text == nil {
				return nil, fmt.Errorf("texts: %s:%d: no \"text\" field", path, line)
			}
			t.Text = *rec.Text
			if rec.ID != nil {
				t.ID = *rec.ID
			}
		}
		if prev, dup := ids[t.ID]; dup {
			return nil, fmt.Errorf("texts: %s:%d: id %d already used on line %d", path, line, t.ID, prev)
		}
		ids[t.ID] = line
		if strings.TrimSpace(t.Text) != "" {
			texts = append(texts, t)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return &Source{Texts: texts, Desc: fmt.Sprintf("file:%s sha256:%s", abs, hex.EncodeToString(h.Sum(nil)))}, nil
}

// readCorpusDir reads the corpora of a fetch-script directory.
func readCorpusDir(dir string, corpora []string, u *utf8Policy) (*Source, error) {
	if len(corpora) == 0 {
		for _, c := range CorpusNames {
			if _, err := os.Stat(filepath.Join(dir, c)); err == nil {
				corpora = append(corpora, c)
			}
		}
		if len(corpora) == 0 {
			return nil, fmt.Errorf("texts: directory %s holds none of %s: not made by scripts/fetch-data.sh", dir, strings.Join(CorpusNames, ", "))
		}
	}
	var texts []Text
	for _, c := range corpora {
		var (
			ts  []Text
			err error
		)
		sub := filepath.Join(dir, c)
		switch c {
		case "fortunes":
			ts, err = readFortunes(u, filepath.Join(sub, "usr/share/games/fortunes"))
		case "wordnet":
			ts, err = readWordNet(u, filepath.Join(sub, "usr/share/wordnet"))
		case "sotu":
			ts, err = readSOTU(u, filepath.Join(sub, "package/data"))
		default:
			return nil, fmt.Errorf("texts: unknown corpus %q (want %s)", c, strings.Join(CorpusNames, ", "))
		}
		if err != nil {
			return nil, fmt.Errorf("texts: corpus %s: %w", c, err)
		}
		if len(ts) == 0 {
			return nil, fmt.Errorf("texts: corpus %s in %s has no texts", c, dir)
		}
		texts = append(texts, ts...)
	}
	// Canonical order first (so dedupe keeps the lower id), then the stable hash order.
	slices.SortFunc(texts, func(a, b Text) int { return cmpInt64(a.ID, b.ID) })
	src := &Source{Texts: texts}
	src.dedupe()
	sort.SliceStable(src.Texts, func(i, j int) bool {
		hi, hj := mix64(uint64(src.Texts[i].ID)), mix64(uint64(src.Texts[j].ID))
		if hi != hj {
			return hi < hj
		}
		return src.Texts[i].ID < src.Texts[j].ID
	})
	desc := "dir:" + dir + " corpora:" + strings.Join(corpora, ",")
	if raw, err := safefile.Read(filepath.Join(dir, "SOURCES.txt"), safefile.Provenance); err == nil {
		desc += " [" + strings.Join(strings.Split(strings.TrimSpace(string(raw)), "\n"), "; ") + "]"
	}
	src.Desc = desc
	return src, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// mix64 is the splitmix64 finaliser: a fixed bijective scramble, so the order it induces is the
// same on every machine and version.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// readFortunes reads fortune-mod cookie files: texts separated by lines holding only "%".
// The .dat indexes, the .u8 links and ascii-art (pictures, not text) are skipped; overstrike
// sequences (char, backspace) used for bold and underline are removed.
func readFortunes(u *utf8Policy, dir string) ([]Text, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || strings.HasSuffix(n, ".dat") || strings.HasSuffix(n, ".u8") || n == "ascii-art" {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var texts []Text
	for fi, n := range names {
		path := filepath.Join(dir, n)
		raw, err := safefile.Read(path, safefile.CorpusFile)
		if err != nil {
			return nil, err
		}
		content, err := u.check(raw, inFile(path, raw))
		if err != nil {
			return nil, err
		}
		k := 0
		for _, chunk := range splitFortunes(content) {
			k++
			t := strings.TrimSpace(removeOverstrike(chunk))
			if t == "" {
				continue
			}
			texts = append(texts, Text{ID: CorpusFortune*idScale + int64(fi+1)*1_000_000 + int64(k), Text: t})
		}
	}
	return texts, nil
}

// splitFortunes splits a cookie file at lines that are exactly "%".
func splitFortunes(s string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(s) {
		if strings.TrimRight(line, "\r\n") == "%" {
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}

// removeOverstrike deletes "x\b" pairs (terminal overstriking), keeping what was struck over.
func removeOverstrike(s string) string {
	if !strings.Contains(s, "\b") {
		return s
	}
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\b' {
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			continue
		}
		out = append(out, r)
	}
	return string(out)
}

// wordNetPOS are the WordNet data files with the part-of-speech digit of their text ids.
var wordNetPOS = []struct {
	file string
	code int64
}{{"data.noun", 1}, {"data.verb", 2}, {"data.adj", 3}, {"data.adv", 4}}

// readWordNet reads WordNet 3.0 synsets from the data.* files: text = the synset's lemmas (with
// spaces for underscores, adjective position markers removed), ": ", the gloss.
func readWordNet(u *utf8Policy, dir string) ([]Text, error) {
	var texts []Text
	for _, p := range wordNetPOS {
		ts, err := readWordNetFile(u, filepath.Join(dir, p.file), p.code)
		if err != nil {
			return nil, err
		}
		texts = append(texts, ts...)
	}
	return texts, nil
}

// readWordNetFile reads one data.* file, whose synsets have part-of-speech digit pos.
func readWordNetFile(u *utf8Policy, path string, pos int64) ([]Text, error) {
	lr, err := safefile.Lines(path, safefile.Texts)
	if err != nil {
		return nil, err
	}
	defer lr.Close()
	var texts []Text
	var start int64 // the line's offset in the file
	for {
		b, err := lr.Next()
		if err == io.EOF {
			return texts, nil
		}
		if err != nil {
			return nil, err
		}
		where := inLine(path, lr.Line(), start)
		start += int64(len(b))
		l, err := u.check(bytes.TrimRight(b, "\r\n"), where)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(l, "  ") { // license header
			continue
		}
		t, err := parseSynset(l, pos)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", filepath.Base(path), lr.Line(), err)
		}
		texts = append(texts, t)
	}
}

// parseSynset parses one data-file line: "offset lex_filenum ss_type w_cnt (word lex_id){w_cnt} ... | gloss".
func parseSynset(l string, pos int64) (Text, error) {
	head, gloss, ok := strings.Cut(l, " | ")
	if !ok {
		return Text{}, fmt.Errorf("no gloss separator \" | \"")
	}
	f := strings.Fields(head)
	if len(f) < 4 {
		return Text{}, fmt.Errorf("synset line has %d fields before the gloss", len(f))
	}
	off, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || off < 0 || off >= 1_000_000_000 {
		return Text{}, fmt.Errorf("synset offset %q", f[0])
	}
	n, err := strconv.ParseInt(f[3], 16, 32)
	if err != nil || n < 1 || 4+2*int(n) > len(f) {
		return Text{}, fmt.Errorf("word count %q", f[3])
	}
	words := make([]string, 0, n)
	for i := 0; i < int(n); i++ {
		w := f[4+2*i]
		if j := strings.IndexByte(w, '('); j > 0 && strings.HasSuffix(w, ")") {
			w = w[:j] // adjective markers (a), (p), (ip)
		}
		words = append(words, strings.ReplaceAll(w, "_", " "))
	}
	return Text{
		ID:   CorpusWordNet*idScale + pos*1_000_000_000 + off,
		Text: strings.Join(words, ", ") + ": " + strings.TrimSpace(gloss),
	}, nil
}

// SOTU chunk sizes, in words: sentences are added to a chunk until it has at least sotuMinWords;
// a chunk never grows past sotuMaxWords unless a single sentence is longer.
const (
	sotuMinWords = 40
	sotuMaxWords = 120
)

// readSOTU reads the State of the Union addresses (one file per address, YEAR_NAME_PARTY.txt) and
// cuts each into chunks of whole sentences.
func readSOTU(u *utf8Policy, dir string) ([]Text, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var texts []Text
	for fi, n := range names {
		raw, err := safefile.Read(n, safefile.CorpusFile)
		if err != nil {
			return nil, err
		}
		content, err := u.check(raw, inFile(n, raw))
		if err != nil {
			return nil, err
		}
		for ci, c := range chunkSentences(splitSentences(content), sotuMinWords, sotuMaxWords) {
			texts = append(texts, Text{ID: CorpusSOTU*idScale + int64(fi+1)*100_000 + int64(ci+1), Text: c})
		}
	}
	return texts, nil
}

// splitSentences cuts text after ".", "!" or "?" (and any closing quotes or brackets) that is
// followed by whitespace and then an upper-case letter, digit or opening quote. Abbreviations
// ("Mr. Adams") are cut too; chunking whole sentences makes that harmless.
func splitSentences(s string) []string {
	s = strings.Join(strings.Fields(s), " ")
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r != '.' && r != '!' && r != '?' {
			continue
		}
		j := i
		for j < len(s) && strings.ContainsRune("\"')]”’", rune(s[j])) {
			j++
		}
		if j+1 < len(s) && s[j] == ' ' {
			next, _ := utf8.DecodeRuneInString(s[j+1:])
			if unicode.IsUpper(next) || unicode.IsDigit(next) || next == '"' || next == '\'' || next == '“' {
				out = append(out, s[start:j])
				start = j + 1
				i = j + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

// chunkSentences groups consecutive sentences into chunks of about minWords..maxWords words.
func chunkSentences(sents []string, minWords, maxWords int) []string {
	var out []string
	var cur []string
	words := 0
	for _, s := range sents {
		w := len(strings.Fields(s))
		if words > 0 && words+w > maxWords {
			out = append(out, strings.Join(cur, " "))
			cur, words = cur[:0], 0
		}
		cur = append(cur, s)
		words += w
		if words >= minWords {
			out = append(out, strings.Join(cur, " "))
			cur, words = cur[:0], 0
		}
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, " "))
	}
	return out
}
