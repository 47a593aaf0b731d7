package engine_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// TestBufferOutlivesTapes: a buffer starts zeroed, takes rows from a tape's
// tensors with CopyRows, keeps them across Tape.Reset while later steps
// reuse the arena, serves as an op input (without a gradient) and is
// refused by a tape of another backend.
func TestBufferOutlivesTapes(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	buf, err := engine.NewBuffer(be, "kc", 6, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := buf.ToHost(); !slices.Equal(got, make([]float32, 18)) || buf.Name() != "kc" || !slices.Equal(buf.Shape(), []int{6, 3}) {
		t.Fatalf("new buffer %v holds %v: want (6, 3) zeros", buf, got)
	}
	tp := engine.NewTape(be)
	step := func(first float32) *engine.Tensor { // (2, 3) rows first, first+1, ...
		x := make([]float32, 6)
		for i := range x {
			x[i] = first + float32(i)
		}
		return tp.Input(x, 2, 3)
	}
	if err := engine.CopyRows(buf, 0, step(1), 0, 2); err != nil { // rows 0, 1
		t.Fatal(err)
	}
	tp.Reset()
	if err := engine.CopyRows(buf, 2, step(7), 1, 1); err != nil { // row 2 = the step's row 1
		t.Fatal(err)
	}
	tp.Reset()
	step(-100) // the arena's memory, rewritten
	want := []float32{1, 2, 3, 4, 5, 6, 10, 11, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := buf.ToHost(); !slices.Equal(got, want) {
		t.Fatalf("buffer after two steps and resets: %v, want %v", got, want)
	}

	sum := tp.Add(buf, tp.Input(make([]float32, 18), 6, 3))
	if err := tp.Err(); err != nil || !slices.Equal(sum.ToHost(), want) || sum.RequiresGrad() || buf.RequiresGrad() {
		t.Fatalf("buffer as an op input: %v, err %v, gradient %v", sum.ToHost(), err, sum.RequiresGrad())
	}

	clone, err := engine.NewBuffer(be, "kc clone", 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.CopyRows(clone, 1, buf, 0, 3); err != nil {
		t.Fatal(err)
	}
	if got := clone.ToHost(); !slices.Equal(got, append([]float32{0, 0, 0}, want[:9]...)) {
		t.Fatalf("clone of the first 3 rows at row 1: %v", got)
	}

	other, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otp := engine.NewTape(other)
	otp.Add(buf, otp.Input(make([]float32, 18), 6, 3))
	if err := otp.Err(); err == nil || !strings.Contains(err.Error(), "kc (6, 3) is on backend") {
		t.Fatalf("buffer on another backend's tape: %v, want an error naming it", err)
	}
}

// TestBufferRefusals: NewBuffer and CopyRows refuse what they cannot do,
// naming it.
func TestBufferRefusals(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, c := range []struct {
		be    engine.Backend
		shape []int
		want  string
	}{
		{nil, []int{2}, "no backend"},
		{be, nil, "no shape"},
		{be, []int{3, 0}, "empty dimension"},
		{be, []int{3, -1}, "negative dimension"},
		{be, []int{1, 1, 1, 1, 1}, "rank 5"},
	} {
		if _, err := engine.NewBuffer(c.be, "b", c.shape...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewBuffer %v: %v, want an error containing %q", c.shape, err, c.want)
		}
	}

	other, err := cpu.New(cpu.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	mk := func(be engine.Backend, rows, cols int) *engine.Tensor {
		b, err := engine.NewBuffer(be, "b", rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := mk(be, 4, 3), mk(be, 5, 3)
	for _, c := range []struct {
		name         string
		dst          *engine.Tensor
		dstRow       int
		src          *engine.Tensor
		srcRow, rows int
		want         string
	}{
		{"past dst", a, 2, b, 0, 3, "out of range"},
		{"past src", a, 0, b, 3, 3, "out of range"},
		{"negative", a, -1, b, 0, 1, "out of range"},
		{"widths", a, 0, mk(be, 4, 2), 0, 1, "one width"},
		{"backends", a, 0, mk(other, 4, 3), 0, 1, "on backend"},
		{"overlap", a, 1, a, 0, 2, "share memory"},
		{"nil", nil, 0, a, 0, 1, "nil tensor"},
	} {
		if err := engine.CopyRows(c.dst, c.dstRow, c.src, c.srcRow, c.rows); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CopyRows %s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if err := engine.CopyRows(a, 2, a, 0, 2); err != nil {
		t.Errorf("CopyRows of disjoint rows of one buffer: %v", err)
	}
}

// TestBufferRows: a view of a buffer's rows reads and writes the buffer's memory (CopyFrom, an op
// input, CopyRows into it) and leaves the other rows alone; out-of-range rows and a parameter
// are refused.
func TestBufferRows(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	buf, err := engine.NewBuffer(be, "resid", 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	mid, err := engine.BufferRows(buf, 1, 2) // rows 1, 2
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mid.Shape(), []int{2, 2}) || mid.RequiresGrad() {
		t.Fatalf("view %v: want (2, 2) without a gradient", mid)
	}
	if err := mid.CopyFrom([]float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.ToHost(), []float32{0, 0, 1, 2, 3, 4, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("buffer after writing rows 1..2 through the view: %v, want %v", got, want)
	}
	tp := engine.NewTape(be)
	y := tp.Add(mid, tp.Input([]float32{10, 20, 30, 40}, 2, 2)) // (2, 2) on the tape
	if err := engine.CopyRows(mid, 0, y, 0, 2); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.ToHost(), []float32{0, 0, 11, 22, 33, 44, 0, 0}; !slices.Equal(got, want) || tp.Err() != nil {
		t.Fatalf("buffer after an op's output went back through the view: %v (err %v), want %v", got, tp.Err(), want)
	}
	for _, r := range [][2]int{{3, 2}, {-1, 1}, {0, 0}} {
		if _, err := engine.BufferRows(buf, r[0], r[1]); err == nil {
			t.Errorf("rows %d..%d of 4: no error", r[0], r[0]+r[1]-1)
		}
	}
	p := engine.NewParams()
	w := p.Add("w", []int{2, 2}, false)
	if err := p.Alloc(be); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.BufferRows(w, 0, 1); err == nil {
		t.Error("a parameter's rows: no error")
	}
	if _, err := engine.BufferRows(nil, 0, 1); err == nil {
		t.Error("nil: no error")
	}
}
