package termtext

import "testing"

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, ü and 中文\n\tend", "plain text, ü and 中文\n\tend"},
		{"\x1b[2Jcleared", `\x1b[2Jcleared`},
		{"\x1b]0;title\x07", `\x1b]0;title\a`},
		{"abc\u202edcba", `abc\u202edcba`},
		{"\ufeffname", `\ufeffname`},
		{"bad \xff byte", `bad \xff byte`},
		{"cr\rlf", `cr\rlf`},
		{"c1 \u009b", `c1 \u009b`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
