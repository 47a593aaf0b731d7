package engine

import (
	"fmt"
	"slices"
	"testing"
)

// layoutTable registers a table whose decay alternates, as a model's does (norm weights between
// linear layers), with sizes that are not multiples of anything a kernel might block by.
func layoutTable() (*Params, []string) {
	table := []struct {
		name  string
		shape []int
	}{
		{"in_proj.weight", []int{5, 3}},
		{"cls", []int{5}},
		{"l0.attn_norm.weight", []int{5}},
		{"l0.q_proj.weight", []int{5, 5}},
		{"l0.k_proj.weight", []int{5, 5}},
		{"l0.mlp_norm.weight", []int{5}},
		{"l0.up_proj.weight", []int{7, 5}},
		{"norm.weight", []int{5}},
		{"head.weight", []int{3, 5}},
		{"log_tau", []int{1}},
	}
	ps := NewParams()
	names := make([]string, len(table))
	for i, p := range table {
		ps.Add(p.name, p.shape, DefaultDecay(p.name, p.shape))
		names[i] = p.name
	}
	return ps, names
}

// noMemBackend allocates nothing and records the size and decay of every AdamW call; any other
// method reaches the nil embedded Backend and panics.
type noMemBackend struct {
	Backend
	calls []string // "n@decay" per AdamW call
}

// noMemStorage claims n elements and holds none.
type noMemStorage struct {
	be *noMemBackend
	n  int
}

func (s noMemStorage) Backend() Backend { return s.be }
func (s noMemStorage) Len() int         { return s.n }

func (b *noMemBackend) Alloc(n int) (Storage, error) { return noMemStorage{b, n}, nil }

func (b *noMemBackend) AdamW(p, _, _, _ *Tensor, s AdamWStep) {
	b.calls = append(b.calls, fmt.Sprintf("%d@%g", p.Size(), s.Decay))
}

// TestParamsLayoutDecayedFirst checks the layout rule: decayed parameters first, then the rest,
// each class in registration order, tiling the buffer; Views and Lookup keep registration order.
func TestParamsLayoutDecayedFirst(t *testing.T) {
	ps, names := layoutTable()
	if err := ps.Alloc(&noMemBackend{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, v := range ps.Views() {
		if v.Name != names[i] {
			t.Fatalf("view %d is %s, want %s (registration order)", i, v.Name, names[i])
		}
		if tv, ok := ps.Lookup(v.Name); !ok || tv != v.Tensor || tv.Offset() != v.Offset {
			t.Errorf("Lookup(%s) does not give the view's tensor at offset %d", v.Name, v.Offset)
		}
	}
	byOffset := slices.Clone(ps.Views())
	slices.SortFunc(byOffset, func(a, b ParamView) int { return a.Offset - b.Offset })
	next := 0
	for _, v := range byOffset {
		if v.Offset != next {
			t.Fatalf("%s at %d, want %d: views do not tile the buffer", v.Name, v.Offset, next)
		}
		next += v.Size
		got = append(got, fmt.Sprint(v.Decay, " ", v.Name))
	}
	var want []string
	for _, decay := range []bool{true, false} {
		for _, v := range ps.Views() {
			if v.Decay == decay {
				want = append(want, fmt.Sprint(decay, " ", v.Name))
			}
		}
	}
	if next != ps.Len() || !slices.Equal(got, want) {
		t.Errorf("buffer order %v (%d of %d elements), want %v", got, next, ps.Len(), want)
	}
}

// TestAdamWLaunchCount: one AdamW call per decay class present, whatever the registration order.
func TestAdamWLaunchCount(t *testing.T) {
	cfg := AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.25}
	mixed, _ := layoutTable()
	onlyDecayed, onlyPlain := NewParams(), NewParams()
	onlyDecayed.Add("a.weight", []int{2, 3}, true)
	onlyDecayed.Add("b.weight", []int{3, 2}, true)
	onlyPlain.Add("a", []int{4}, false)
	onlyPlain.Add("b", []int{5}, false)
	var decayed int
	for _, v := range mixed.Views() {
		if v.Decay {
			decayed += v.Size
		}
	}
	for _, tc := range []struct {
		name string
		ps   *Params
		want func(*Params) []string
	}{
		{"mixed", mixed, func(p *Params) []string {
			return []string{fmt.Sprintf("%d@0.25", decayed), fmt.Sprintf("%d@0", p.Len()-decayed)}
		}},
		{"decayed only", onlyDecayed, func(p *Params) []string { return []string{fmt.Sprintf("%d@0.25", p.Len())} }},
		{"plain only", onlyPlain, func(p *Params) []string { return []string{fmt.Sprintf("%d@0", p.Len())} }},
	} {
		be := &noMemBackend{}
		if err := tc.ps.Alloc(be); err != nil {
			t.Fatal(err)
		}
		opt, err := NewAdamW(tc.ps, cfg)
		if err != nil {
			t.Fatal(err)
		}
		opt.Step()
		if want := tc.want(tc.ps); !slices.Equal(be.calls, want) {
			t.Errorf("%s: AdamW calls %v, want %v", tc.name, be.calls, want)
		}
	}
}
