package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gelo-research/geloattack/internal/shard"
)

// Setting is one option of a run as its output directory records it: a name (the flag's, or what
// a derived value is: "tokens_sha256") and its value as text.
type Setting struct {
	Name, Value string
}

// Record is what an output directory's options.json says of the run writing it: its batches, its
// shard, and every other option that decides the results, in the order the command lists them.
// A resume must give the same record and the shards of a merge the same but for the shard, so a
// directory never holds batches of two different runs.
type Record struct {
	Batches  int
	Shard    Shard
	Settings []Setting
}

// check refuses a record no run has: no batches, a shard out of range, a name twice.
func (r Record) check() error {
	if r.Batches < 1 {
		return fmt.Errorf("decode: record: %d batches, want >= 1", r.Batches)
	}
	if r.Shard.Count < 1 || r.Shard.Index < 0 || r.Shard.Index >= r.Shard.Count {
		return fmt.Errorf("decode: record: shard %s, want i/N with 0 <= i < N", r.Shard)
	}
	seen := map[string]bool{"batches": true, "shard": true}
	for _, s := range r.Settings {
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("decode: record: option %q is empty or named twice", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// Value is the recorded value of option name, and whether it is recorded.
func (r Record) Value(name string) (string, bool) {
	for _, s := range r.Settings {
		if s.Name == name {
			return s.Value, true
		}
	}
	return "", false
}

// encode writes r as options.json: batches, shard, then the options in order, one a line.
func (r Record) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"batches\": %d,\n  \"shard\": %q,\n  \"options\": {", r.Batches, r.Shard.String())
	for i, s := range r.Settings {
		k, _ := json.Marshal(s.Name) // a string always encodes
		v, _ := json.Marshal(s.Value)
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    %s: %s", k, v)
	}
	b.WriteString("\n  }\n}\n")
	return b.Bytes()
}

// parseRecord reads options.json (path names it in errors).
func parseRecord(path string, b []byte) (Record, error) {
	var v struct {
		Batches int             `json:"batches"`
		Shard   string          `json:"shard"`
		Options json.RawMessage `json:"options"`
	}
	if err := strictUnmarshal(b, &v); err != nil {
		return Record{}, fmt.Errorf("decode: %s: not a decode's options record: %w", path, err)
	}
	sh, err := shard.Parse(v.Shard)
	if err != nil {
		return Record{}, fmt.Errorf("decode: %s: %w", path, err)
	}
	r := Record{Batches: v.Batches, Shard: sh}
	// The options are read in their order: an object's keys, each a string value.
	dec := json.NewDecoder(bytes.NewReader(v.Options))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return Record{}, fmt.Errorf("decode: %s: \"options\" is not an object", path)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return Record{}, fmt.Errorf("decode: %s: options: %w", path, err)
		}
		var val string
		if err := dec.Decode(&val); err != nil {
			return Record{}, fmt.Errorf("decode: %s: option %q: want a string: %w", path, k, err)
		}
		r.Settings = append(r.Settings, Setting{Name: k.(string), Value: val})
	}
	if err := r.check(); err != nil {
		return Record{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return r, nil
}

// errDiffer reports records of two different runs.
var errDiffer = errors.New("the options differ")

// diff names the first option in which had (on disk) and now differ, and how many differ in all;
// nil when they are the same.
func diff(had, now Record) error {
	var lines []string
	add := func(name, h, n string) {
		lines = append(lines, fmt.Sprintf("%s: %s on disk, %s now", name, h, n))
	}
	if had.Batches != now.Batches {
		add("batches", fmt.Sprint(had.Batches), fmt.Sprint(now.Batches))
	}
	if had.Shard != now.Shard {
		add("shard", had.Shard.String(), now.Shard.String())
	}
	for _, s := range now.Settings {
		h, ok := had.Value(s.Name)
		switch {
		case !ok:
			add(s.Name, "not recorded", fmt.Sprintf("%q", s.Value))
		case h != s.Value:
			add(s.Name, fmt.Sprintf("%q", h), fmt.Sprintf("%q", s.Value))
		}
	}
	for _, s := range had.Settings {
		if _, ok := now.Value(s.Name); !ok {
			add(s.Name, fmt.Sprintf("%q", s.Value), "not an option")
		}
	}
	switch len(lines) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: %s", errDiffer, lines[0])
	}
	return fmt.Errorf("%w: %s (and %d more: %s)", errDiffer, lines[0], len(lines)-1, strings.Join(lines[1:], "; "))
}
