package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// A result's figures can be infinite (a margin with nothing to separate, a one-step text's lead)
// or NaN (a figure not measured), which JSON numbers cannot hold. Such a figure is written as
// null, as readers of decode's JSON have always seen it, and its value is kept beside it in a
// "nonfinite" object ({"bag_margin": "+Inf"}), so that a result read back (an output directory's
// results.jsonl, outdir.go) is the result written, bit for bit, and a summary computed from the
// file is the one computed in memory.

// floatField is a figure that may be non-finite, by its JSON key.
type floatField struct {
	key string
	p   *float64
}

// floatFields are r's figures that may be non-finite.
func (r *BatchResult) floatFields() []floatField {
	return []floatField{{"bag_margin", &r.BagMargin}, {"order_margin", &r.OrderMargin}, {"bag_margin_topk", &r.BagMarginTopK},
		{"bag_rank_recall", &r.BagRankRecall}, {"bag_rank_recall_topk", &r.BagRankRecallTopK}, {"exact", &r.Exact}, {"token_accuracy", &r.TokenAcc}}
}

// floatFields are t's figures that may be non-finite.
func (t *Text) floatFields() []floatField {
	return []floatField{{"excess", &t.Excess}, {"lead", &t.Lead}}
}

// finite is &x, or nil for an infinite or NaN x.
func finite(x float64) *float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	return &x
}

// nonFinite is the side object of fields' non-finite values ("+Inf", "-Inf", "NaN"), nil when
// every one is finite.
func nonFinite(fields []floatField) map[string]string {
	var m map[string]string
	for _, f := range fields {
		if finite(*f.p) == nil {
			if m == nil {
				m = map[string]string{}
			}
			m[f.key] = strconv.FormatFloat(*f.p, 'g', -1, 64)
		}
	}
	return m
}

// restore sets each of fields from its JSON value (nil: null) or, for a null, from side; a null
// the side object does not name reads as NaN (a file from before the side object).
func restore(fields []floatField, values []*float64, side map[string]string) error {
	for k := range side {
		if !containsKey(fields, k) {
			return fmt.Errorf("nonfinite: %q is not a figure that can be non-finite", k)
		}
	}
	for i, f := range fields {
		s, inSide := side[f.key]
		switch {
		case values[i] != nil && inSide:
			return fmt.Errorf("nonfinite: %q is %v and %s", f.key, *values[i], s)
		case values[i] != nil:
			*f.p = *values[i]
		case inSide:
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || finite(v) != nil {
				return fmt.Errorf("nonfinite: %q: %q is not +Inf, -Inf or NaN", f.key, s)
			}
			*f.p = v
		default:
			*f.p = math.NaN()
		}
	}
	return nil
}

// containsKey says fields has one of JSON key k.
func containsKey(fields []floatField, k string) bool {
	for _, f := range fields {
		if f.key == k {
			return true
		}
	}
	return false
}

// strictUnmarshal decodes b into v refusing keys v does not have: a line of another file is not
// read as a result with its figures zero.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the object")
	}
	return nil
}

// marshalFigures encodes plain, a copy of a result whose type has no MarshalJSON, as
// encoding/json does but for fields, plain's figures that may be non-finite: they come last, in
// fields' order, each a number or null, and then the "nonfinite" side object of the nulls (left
// out when there are none). That is the layout a struct embedding plain beside one *float64 per
// figure gave, which results.jsonl has always held; fields is the one list of those figures.
func marshalFigures(plain any, fields []floatField) ([]byte, error) {
	side := nonFinite(fields)
	figures := make([]member, len(fields))
	for i, f := range fields {
		raw, err := json.Marshal(finite(*f.p)) // a number, or null
		if err != nil {
			return nil, err
		}
		figures[i] = member{f.key, raw}
		*f.p = 0 // encoding/json refuses Inf and NaN; the key is dropped below
	}
	b, err := json.Marshal(plain)
	if err != nil {
		return nil, err
	}
	ms, err := members(b)
	if err != nil {
		return nil, err
	}
	ms = slices.DeleteFunc(ms, func(m member) bool { return containsKey(fields, m.key) })
	ms = append(ms, figures...)
	if side != nil {
		raw, err := json.Marshal(side)
		if err != nil {
			return nil, err
		}
		ms = append(ms, member{"nonfinite", raw})
	}
	return object(ms)
}

// member is one key of a JSON object and its value.
type member struct {
	key string
	raw json.RawMessage
}

// members are the members of the JSON object b, in order.
func members(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	var ms []member
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		ms = append(ms, member{key.(string), raw}) // an object's keys are strings
	}
	return ms, nil
}

// object encodes ms as one JSON object, in their order.
func object(ms []member) ([]byte, error) {
	out := []byte{'{'}
	for i, m := range ms {
		key, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, key...), ':'), m.raw...)
	}
	return append(out, '}'), nil
}

// unmarshalFigures decodes what marshalFigures wrote into plain, a pointer to a zero result of a
// type without UnmarshalJSON whose figures that may be non-finite are fields, refusing a key plain
// does not have; what names the result in a decoding error.
func unmarshalFigures(b []byte, plain any, fields []floatField, what string) error {
	var members map[string]json.RawMessage
	if err := strictUnmarshal(b, &members); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var side map[string]string
	if raw, ok := members["nonfinite"]; ok {
		if err := json.Unmarshal(raw, &side); err != nil {
			return fmt.Errorf("%s: nonfinite: %w", what, err)
		}
		delete(members, "nonfinite")
	}
	rest, err := json.Marshal(members)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, f := range fields {
		*f.p = math.NaN() // JSON holds no NaN: a figure still NaN after decoding was null or absent
	}
	if err := strictUnmarshal(rest, plain); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	values := make([]*float64, len(fields))
	for i, f := range fields {
		if !math.IsNaN(*f.p) {
			values[i] = finite(*f.p)
		}
	}
	return restore(fields, values, side)
}

// MarshalJSON writes an infinite Excess or Lead (a text of one step: nothing left out, or nothing
// certified) as null, its value in "nonfinite".
func (t Text) MarshalJSON() ([]byte, error) {
	type plain Text
	p := plain(t)
	return marshalFigures(&p, (*Text)(&p).floatFields())
}

// UnmarshalJSON reads what MarshalJSON wrote, the non-finite figures included.
func (t *Text) UnmarshalJSON(b []byte) error {
	type plain Text
	*t = Text{}
	return unmarshalFigures(b, (*plain)(t), t.floatFields(), "decoded text")
}

// MarshalJSON writes an infinite margin (nothing to separate) and a figure not measured (NaN:
// the order margin skipped, exact and token accuracy with BagOnly) as null, its value in
// "nonfinite".
func (r BatchResult) MarshalJSON() ([]byte, error) {
	type plain BatchResult
	p := plain(r)
	return marshalFigures(&p, (*BatchResult)(&p).floatFields())
}

// UnmarshalJSON reads what MarshalJSON wrote, the non-finite figures included; a key that is not
// a result's is refused.
func (r *BatchResult) UnmarshalJSON(b []byte) error {
	type plain BatchResult
	*r = BatchResult{}
	return unmarshalFigures(b, (*plain)(r), r.floatFields(), "batch result")
}
