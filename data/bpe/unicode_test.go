package bpe_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
	"unicode"

	"github.com/gelo-research/geloattack/data/bpe"
)

// unicodeData loads, through node, the code-point ranges of properties of an unpacked
// @unicode/unicode-X package (scripts/fetch-tokenizers.sh): a set of code points per property
// path (such as "General_Category/Letter").
func unicodeData(t *testing.T, dir string, props []string) map[string][]bool {
	t.Helper()
	script := `
import path from "node:path";
import { pathToFileURL } from "node:url";
const [dir, ...props] = process.argv.slice(1);
const out = {};
for (const p of props) {
  const url = pathToFileURL(path.join(dir, p, "ranges.mjs")).href;
  out[p] = (await import(url)).default.map((r) => [r.begin, r.end]);
}
process.stdout.write(JSON.stringify(out));
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"--input-type=module", "-e", script, dir}, props...)
	out, err := exec.CommandContext(ctx, "node", args...).Output()
	if err != nil {
		t.Fatalf("node reading %s: %v", dir, err)
	}
	var ranges map[string][][2]int
	if err := json.Unmarshal(out, &ranges); err != nil {
		t.Fatal(err)
	}
	sets := map[string][]bool{}
	for p, rs := range ranges {
		set := make([]bool, unicode.MaxRune+1)
		for _, r := range rs {
			for c := r[0]; c < r[1]; c++ {
				set[c] = true
			}
		}
		sets[p] = set
	}
	return sets
}

// TestUnicodeTables checks every code point of the generated tables (unicode_tables.go) against
// the Unicode data they were generated from, when scripts/fetch-tokenizers.sh has put it in the
// cache; without it, a few known answers.
func TestUnicodeTables(t *testing.T) {
	tables, version, normVersion := bpe.UnicodeTables()
	known := []struct {
		table string
		r     rune
		want  bool
	}{
		{"L", 'a', true}, {"L", 'ſ', true}, {"L", 0x10D4A, true}, {"L", 0x1E5D0, true}, {"L", '1', false},
		{"N", '1', true}, {"N", 0x0663, true}, {"N", 0x2460, true}, {"N", 0x1E5F1, true}, {"N", 'a', false},
		{"White_Space", 0x85, true}, {"White_Space", 0xFEFF, false}, {"White_Space", 0x3000, true},
		{"White_Space", 0x180E, false}, {"White_Space", 0x200B, false},
		{"word", '_', true}, {"word", 0x0301, true}, {"word", 0x200D, true}, {"word", 0x2460, false},
		{"unassigned-9.0", 0x1DF9, true}, {"unassigned-9.0", 0x1E944, false}, {"unassigned-9.0", 'a', false},
	}
	for _, k := range known {
		if got := unicode.Is(tables[k.table], k.r); got != k.want {
			t.Errorf("%s has U+%04X: %v, want %v", k.table, k.r, got, k.want)
		}
	}
	if version != "16.0.0" || normVersion != "9.0.0" {
		t.Errorf("tables of Unicode %s and %s, want 16.0.0 and 9.0.0", version, normVersion)
	}

	dir := tokenizersDir(t)
	u16, u9 := filepath.Join(dir, "unicode-"+version), filepath.Join(dir, "unicode-"+normVersion)
	for _, d := range []string{u16, u9} {
		if _, err := os.Stat(filepath.Join(d, "package.json")); err != nil {
			skipOrFail(t, "no Unicode data in %s", d)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFail(t, "node is not on PATH")
	}
	data := unicodeData(t, u16, []string{"General_Category/Letter", "General_Category/Number",
		"Binary_Property/White_Space", "Binary_Property/Alphabetic", "General_Category/Mark",
		"General_Category/Decimal_Number", "General_Category/Connector_Punctuation", "Binary_Property/Join_Control"})
	data9 := unicodeData(t, u9, []string{"General_Category/Unassigned"})
	want := map[string]func(r rune) bool{
		"L":           func(r rune) bool { return data["General_Category/Letter"][r] },
		"N":           func(r rune) bool { return data["General_Category/Number"][r] },
		"White_Space": func(r rune) bool { return data["Binary_Property/White_Space"][r] },
		"word": func(r rune) bool {
			return data["Binary_Property/Alphabetic"][r] || data["General_Category/Mark"][r] ||
				data["General_Category/Decimal_Number"][r] || data["General_Category/Connector_Punctuation"][r] ||
				data["Binary_Property/Join_Control"][r]
		},
		"unassigned-9.0": func(r rune) bool { return data9["General_Category/Unassigned"][r] },
	}
	for name, in := range want {
		bad := 0
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if unicode.Is(tables[name], r) != in(r) {
				if bad++; bad <= 5 {
					t.Errorf("%s: U+%04X is in the table: %v, in the data: %v", name, r, !in(r), in(r))
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d code points differ from the data; regenerate with scripts/gen-unicode-tables.mjs", name, bad)
		}
	}
	// Oniguruma's \s is U+0009-U+000D, U+0085 and Zs, Zl, Zp: the White_Space table must be that
	// (the generator refuses data where it is not).
	for r := rune(0); r <= unicode.MaxRune; r++ {
		onig := r >= 9 && r <= 13 || r == 0x85 || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
		if onig != unicode.Is(tables["White_Space"], r) {
			t.Errorf("U+%04X: White_Space %v, Oniguruma's \\s %v", r, !onig, onig)
		}
	}
}
