// Package content is the sensitive-content recovery attack (issue 19): a victim text made from a
// template with a secret slot ("my PIN is {x}") sits inside an ordinary GELO example; the attacker
// knows the model, the layer and the template, computes the hidden states of every candidate fill
// with the same forward pass as the store's, and ranks the candidates by how well their rows lie in
// rowspace(U_obs). Since rowspace(A [H; S]) = rowspace([H; S]) for any invertible A, the secret's
// rows are contained exactly (to the observed precision) whenever U's numerical rank is below d.
package content

import (
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// Slot is the placeholder a template's secret goes into.
const Slot = "{x}"

// Template is a prompt with exactly one secret slot.
type Template struct {
	// Name identifies the template (pin, name, birth, or "custom").
	Name string `json:"name"`
	// Pattern is the text with Slot marking where the secret goes, e.g. "my PIN is {x}".
	Pattern string `json:"pattern"`
}

// Built-in templates, one per built-in candidate set.
var (
	TemplatePIN   = Template{Name: "pin", Pattern: "my PIN is {x}"}
	TemplateName  = Template{Name: "name", Pattern: "my name is {x}"}
	TemplateBirth = Template{Name: "birth", Pattern: "I was born on {x}"}
)

// ParseTemplate checks that pattern holds Slot exactly once.
func ParseTemplate(name, pattern string) (Template, error) {
	if c := strings.Count(pattern, Slot); c != 1 {
		return Template{}, fmt.Errorf("template %q: holds %s %d times, want exactly once", pattern, Slot, c)
	}
	return Template{Name: name, Pattern: pattern}, nil
}

// Fill puts x into the slot.
func (t Template) Fill(x string) string { return strings.Replace(t.Pattern, Slot, x, 1) }

// Prefix and Suffix are the template's text before and after the slot.
func (t Template) Prefix() string { return t.Pattern[:strings.Index(t.Pattern, Slot)] }

// Suffix is the template's text after the slot.
func (t Template) Suffix() string { return t.Pattern[strings.Index(t.Pattern, Slot)+len(Slot):] }

// PINs returns the 10^4 four-digit PINs 0000..9999.
func PINs() []string {
	out := make([]string, 10000)
	for i := range out {
		out[i] = fmt.Sprintf("%04d", i)
	}
	return out
}

// Dates returns every day from January 1 of year from to December 31 of year to, written as
// "March 5, 1987" (about 36,525 for a century).
func Dates(from, to int) ([]string, error) {
	if from > to || from < 1 || to > 9999 {
		return nil, fmt.Errorf("dates: years %d..%d, want 1 <= from <= to <= 9999", from, to)
	}
	var out []string
	for t := time.Date(from, 1, 1, 0, 0, 0, 0, time.UTC); t.Year() <= to; t = t.AddDate(0, 0, 1) {
		out = append(out, t.Format("January 2, 2006"))
	}
	return out, nil
}

// WordNetDir is where scripts/fetch-data.sh unpacks WordNet below the corpus directory.
const WordNetDir = "wordnet/usr/share/wordnet"

// Names reads person names from WordNet's data.noun (corpus directory as scripts/fetch-data.sh
// leaves it): the single-word, capitalised lemmas of the noun.person lexicographer file (18),
// which are given names and surnames (Aaron, Abelard, ..., Zworykin; 3,886 in WordNet 3.0),
// sorted and without repeats. The list is pinned by the fetch script's WordNet package.
func Names(corpusDir string) ([]string, error) {
	path := filepath.Join(corpusDir, WordNetDir, "data.noun")
	lr, err := safefile.Lines(path, safefile.Texts)
	if err != nil {
		return nil, fmt.Errorf("names: %w (fetch WordNet with scripts/fetch-data.sh corpus)", err)
	}
	defer lr.Close()
	seen := map[string]bool{}
	for {
		b, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("names: reading %s: %w", path, err)
		}
		// offset lex_filenum ss_type w_cnt word lex_id ...
		fields := strings.Fields(string(b))
		if len(fields) < 5 || fields[1] != "18" || fields[2] != "n" {
			continue
		}
		if w := fields[4]; isName(w) {
			seen[w] = true
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("names: %s holds no noun.person names", path)
	}
	out := make([]string, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	slices.Sort(out)
	return out, nil
}

// isName reports an ASCII word of one capital followed by lower-case letters.
func isName(w string) bool {
	if len(w) < 2 || w[0] < 'A' || w[0] > 'Z' {
		return false
	}
	for _, r := range w[1:] {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// ReadCandidates reads a user file of candidates, one per line; blank lines and lines starting with
// '#' are skipped, surrounding space is trimmed, repeats are refused (they would make the secret's
// rank ambiguous).
func ReadCandidates(path string) ([]string, error) {
	lr, err := safefile.Lines(path, safefile.Candidates)
	if err != nil {
		return nil, fmt.Errorf("candidates file: %w", err)
	}
	defer lr.Close()
	var out []string
	seen := map[string]int{}
	for {
		b, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("candidates file: %w", err)
		}
		line := lr.Line()
		s := strings.TrimFunc(string(b), unicode.IsSpace)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if prev, ok := seen[s]; ok {
			return nil, fmt.Errorf("candidates file %s:%d: %q repeats line %d", path, line, s, prev)
		}
		seen[s] = line
		out = append(out, s)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("candidates file %s: %d candidates, want at least 2", path, len(out))
	}
	return out, nil
}

// Subset returns k of the candidates chosen uniformly without replacement by a seeded stream, in
// their original order (all of them when k <= 0 or k >= len(cands)).
func Subset(cands []string, k int, seed uint64) []string {
	if k <= 0 || k >= len(cands) {
		return cands
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ec7e75))
	idx := rng.Perm(len(cands))[:k]
	slices.Sort(idx)
	out := make([]string, k)
	for i, j := range idx {
		out[i] = cands[j]
	}
	return out
}
