package config

import (
	"strings"
	"testing"
)

// train.mix_on: auto by default, the three values parse and survive the resolved config's round
// trip, anything else is refused naming the key, its line and the values allowed; Diff ignores it
// (host and device mixing differ only in the summation order of U's sums, as devices do).
func TestMixOn(t *testing.T) {
	if d := Default(); d.Train.MixOn != "auto" {
		t.Fatalf("default train.mix_on %q, want auto", d.Train.MixOn)
	}
	for _, v := range []string{"auto", "host", "device"} {
		r, err := Parse("ok.yaml", []byte("train:\n  mix_on: "+v+"\n"))
		if err != nil || r.Train.MixOn != v {
			t.Fatalf("mix_on %s: %v, parsed %q", v, err, r.Train.MixOn)
		}
		out, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if r2, err := Parse("resolved.yaml", out); err != nil || r2.Train.MixOn != v {
			t.Errorf("round trip of mix_on %s: %v, %q", v, err, r2.Train.MixOn)
		}
	}
	for _, src := range []string{"train:\n  mix_on: gpu\n", "train:\n  mix_on: Device\n", "train:\n  mix_on: 1\n"} {
		_, err := Parse("bad.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "bad.yaml:2") || !strings.Contains(err.Error(), "train.mix_on") ||
			!strings.Contains(err.Error(), "host or device") {
			t.Errorf("%q: %v, want a refusal naming train.mix_on at line 2 and its values", src, err)
		}
	}
	a := Default()
	b := a
	b.Train.MixOn = "device"
	if d := Diff(a, b); d != "" {
		t.Errorf("mix_on change reported: %s", d)
	}
}
