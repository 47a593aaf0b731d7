package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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

// MarshalJSON writes an infinite Excess or Lead (a text of one step: nothing left out, or nothing
// certified) as null, its value in "nonfinite".
func (t Text) MarshalJSON() ([]byte, error) {
	type plain Text
	return json.Marshal(struct {
		plain
		Excess    *float64          `json:"excess"`
		Lead      *float64          `json:"lead"`
		NonFinite map[string]string `json:"nonfinite,omitempty"`
	}{plain(t), finite(t.Excess), finite(t.Lead), nonFinite(t.floatFields())})
}

// UnmarshalJSON reads what MarshalJSON wrote, the non-finite figures included.
func (t *Text) UnmarshalJSON(b []byte) error {
	type plain Text
	var v struct {
		plain
		Excess    *float64          `json:"excess"`
		Lead      *float64          `json:"lead"`
		NonFinite map[string]string `json:"nonfinite"`
	}
	if err := strictUnmarshal(b, &v); err != nil {
		return fmt.Errorf("decoded text: %w", err)
	}
	*t = Text(v.plain)
	return restore(t.floatFields(), []*float64{v.Excess, v.Lead}, v.NonFinite)
}

// MarshalJSON writes an infinite margin (nothing to separate) and a figure not measured (NaN:
// the order margin skipped, exact and token accuracy with BagOnly) as null, its value in
// "nonfinite".
func (r BatchResult) MarshalJSON() ([]byte, error) {
	type plain BatchResult
	return json.Marshal(struct {
		plain
		BagMargin     *float64          `json:"bag_margin"`
		OrderMargin   *float64          `json:"order_margin"`
		BagMarginTopK *float64          `json:"bag_margin_topk"`
		RankRecall    *float64          `json:"bag_rank_recall"`
		RecallTopK    *float64          `json:"bag_rank_recall_topk"`
		Exact         *float64          `json:"exact"`
		TokenAcc      *float64          `json:"token_accuracy"`
		NonFinite     map[string]string `json:"nonfinite,omitempty"`
	}{plain(r), finite(r.BagMargin), finite(r.OrderMargin), finite(r.BagMarginTopK), finite(r.BagRankRecall), finite(r.BagRankRecallTopK),
		finite(r.Exact), finite(r.TokenAcc), nonFinite(r.floatFields())})
}

// UnmarshalJSON reads what MarshalJSON wrote, the non-finite figures included; a key that is not
// a result's is refused.
func (r *BatchResult) UnmarshalJSON(b []byte) error {
	type plain BatchResult
	var v struct {
		plain
		BagMargin     *float64          `json:"bag_margin"`
		OrderMargin   *float64          `json:"order_margin"`
		BagMarginTopK *float64          `json:"bag_margin_topk"`
		RankRecall    *float64          `json:"bag_rank_recall"`
		RecallTopK    *float64          `json:"bag_rank_recall_topk"`
		Exact         *float64          `json:"exact"`
		TokenAcc      *float64          `json:"token_accuracy"`
		NonFinite     map[string]string `json:"nonfinite"`
	}
	if err := strictUnmarshal(b, &v); err != nil {
		return fmt.Errorf("batch result: %w", err)
	}
	*r = BatchResult(v.plain)
	return restore(r.floatFields(), []*float64{v.BagMargin, v.OrderMargin, v.BagMarginTopK, v.RankRecall, v.RecallTopK, v.Exact, v.TokenAcc}, v.NonFinite)
}
