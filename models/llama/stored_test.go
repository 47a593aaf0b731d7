package llama

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// layout is how storedCopy lays a model's tensors out in memory.
type layout int

const (
	backToBack layout = iota // one buffer in Tensors order, as models/hf's writer lays a file out
	apart                    // every tensor in its own buffer: q/k/v and gate/up not stacked
	offByOne                 // one buffer starting one byte into an allocation: F32 unaligned
)

// encode writes x as little-endian elements of dt.
func encode(x []float32, dt DType) []byte {
	var out []byte
	for _, v := range x {
		switch dt {
		case F32:
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		case F16:
			out = binary.LittleEndian.AppendUint16(out, numfmt.F32ToF16(v))
		case BF16:
			out = binary.LittleEndian.AppendUint16(out, numfmt.F32ToBF16(v))
		}
	}
	return out
}

// storedCopy writes blocks 0..blocks-1 of m as dt bytes in the given layout and assembles a model
// over them, and returns with it the float32 model of the same values (m's weights rounded to dt),
// the model converting the file up front would give, and whether the bytes were released.
func storedCopy(t *testing.T, m *Model, dt DType, lay layout, blocks int) (stored, upFront *Model, released *bool) {
	t.Helper()
	c := m.Cfg
	upFront, err := New(c, m.lib)
	if err != nil {
		t.Fatal(err)
	}
	bytesOf := map[[2]int][]byte{}
	var all []byte
	var spans [][3]int // part, block, offset into all
	for _, tn := range c.Tensors(c.Layers) {
		x := storage(t, m, tn.Part, tn.Block)
		r := storage(t, upFront, tn.Part, tn.Block)
		copy(r, x)
		switch dt {
		case F16:
			numfmt.RoundF16s(r)
		case BF16:
			numfmt.RoundBF16s(r)
		}
		b := encode(x, dt)
		if lay == apart {
			bytesOf[[2]int{int(tn.Part), tn.Block}] = b
			continue
		}
		spans = append(spans, [3]int{int(tn.Part), tn.Block, len(all)})
		all = append(all, b...)
	}
	if lay != apart {
		base := make([]byte, len(all)+8)
		if lay == offByOne {
			base = base[1:]
		}
		copy(base, all)
		for i, s := range spans {
			end := len(all)
			if i+1 < len(spans) {
				end = spans[i+1][2]
			}
			bytesOf[[2]int{s[0], s[1]}] = base[s[2]:end:end]
		}
	}
	closed := new(bool)
	stored, err = Assemble(c, m.lib, blocks, func(tn Tensor) (Stored, error) {
		return Stored{DType: dt, Raw: bytesOf[[2]int{int(tn.Part), tn.Block}]}, nil
	}, func() error {
		if *closed {
			t.Error("the bytes were released twice")
		}
		*closed = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stored.Close(); err != nil || !*closed {
			t.Errorf("Close: %v, bytes released %v", err, *closed)
		}
	})
	return stored, upFront, closed
}

// passes reads every weight m holds as float32 (whole, and a few rows of each matrix), keyed by
// part and block: what a forward pass computes from.
func passes(t *testing.T, m *Model) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for _, tn := range m.Cfg.Tensors(m.Blocks()) {
		rows, cols, err := m.Shape(tn.Part, tn.Block)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, rows*cols)
		if err := m.Read(tn.Part, tn.Block, x); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s/%d", tn.Part, tn.Block)
		out[key] = x
		if rows > 2 {
			r := make([]float32, 2*cols)
			if err := m.ReadRows(tn.Part, tn.Block, rows-2, rows, r); err != nil {
				t.Fatal(err)
			}
			out[key+"/last rows"] = r
		}
	}
	return out
}

// A model over stored weights reads, bit for bit, the float32 values of the file's, for F32, F16
// and BF16 bytes, stacked as the writer lays them out, apart, or unaligned: whole weights and row
// ranges (a forward pass computes from nothing else; models/causallm checks the passes). F16 and
// BF16 bytes are read as stored until Close; F32 ones are copied, and released by Assemble.
func TestStoredEqualsFloat32(t *testing.T) {
	c := testConfig()
	c.QKVBias, c.QKNorm = true, true
	m := randomModel(t, c, 21)
	for _, dt := range []DType{F32, F16, BF16} {
		for _, lay := range []layout{backToBack, apart, offByOne} {
			stored, upFront, released := storedCopy(t, m, dt, lay, c.Layers)
			want, got := passes(t, upFront), passes(t, stored)
			if len(got) != len(want) {
				t.Fatalf("%s layout %d: %d outputs, want %d", dt, lay, len(got), len(want))
			}
			for k, w := range want {
				if !slices.Equal(got[k], w) {
					t.Fatalf("%s layout %d: %s differs from the float32 model of the same values", dt, lay, k)
				}
			}
			stays := stored.blocks[1].gateUp.converts() && stored.embed.converts()
			if stays != (dt != F32) || *released != (dt == F32) {
				t.Errorf("%s layout %d: held as stored %v, bytes released %v", dt, lay, stays, *released)
			}
			if scratch := stored.ScratchBytes(true); (scratch == 0) != (dt == F32) {
				t.Errorf("%s layout %d: scratch %d bytes", dt, lay, scratch)
			}
		}
	}
}

// ScratchBytes counts each block matrix once when any block holds it as stored bytes (the
// decoder's per-pass buffers are shared by the blocks), the output projection with logits.
func TestScratchBytes(t *testing.T) {
	c := testConfig()
	c.VocabSize = 400
	m := randomModel(t, c, 22)
	stored, _, _ := storedCopy(t, m, BF16, backToBack, c.Layers)
	d, f, q, kv := c.Hidden, c.Intermediate, c.QDim(), c.KVDim()
	block := int64(4 * ((q+2*kv)*d + d*q + 3*f*d))
	if got := stored.ScratchBytes(false); got != block || c.ScratchBytes() != block {
		t.Errorf("ScratchBytes without logits %d (config %d), want %d", got, c.ScratchBytes(), block)
	}
	if got, want := stored.ScratchBytes(true), block+int64(4*c.VocabSize*d); got != want {
		t.Errorf("ScratchBytes with logits %d, want %d", got, want)
	}
	f32, _, _ := storedCopy(t, m, F32, backToBack, c.Layers)
	if got := f32.ScratchBytes(true); got != 0 {
		t.Errorf("a float32 model's ScratchBytes %d, want 0", got)
	}
}

// A model of the first blocks holds the full model's weights of those blocks and refuses what
// needs the rest: the final norm, later blocks.
func TestFirstBlocksOnly(t *testing.T) {
	c := testConfig()
	c.Layers = 3
	m := randomModel(t, c, 23)
	part, _, _ := storedCopy(t, m, F32, backToBack, 2)
	if part.Blocks() != 2 {
		t.Fatalf("Blocks %d, want 2", part.Blocks())
	}
	want, got := passes(t, m), passes(t, part)
	if got["down_proj/1"] == nil || got["down_proj/2"] != nil || got["norm/-1"] != nil {
		t.Fatalf("the 2-block model reads blocks other than 0 and 1: %d weights", len(got))
	}
	for k, g := range got {
		if !slices.Equal(g, want[k]) {
			t.Errorf("%s differs from the full model's", k)
		}
	}
	if err := part.Read(FinalNorm, -1, make([]float32, c.Hidden)); err == nil {
		t.Error("read the final norm of 2 of 3 blocks")
	}
	if err := part.Read(DownProj, 2, make([]float32, c.Hidden*c.Intermediate)); err == nil {
		t.Error("read block 2 of a 2-block model")
	}
	if _, err := Assemble(c, nil, 4, nil, nil); err == nil {
		t.Error("assembled 4 blocks of 3")
	}
}

// The accessors: Storage refuses a stored model's read-only bytes; Read, ReadRows and Shape give
// any weight as float32 (one embedding row without the table); a wrong size is an error.
func TestWeightAccessors(t *testing.T) {
	c := testConfig()
	c.QKVBias = true
	m := randomModel(t, c, 24)
	stored, _, _ := storedCopy(t, m, F32, apart, c.Layers)
	if _, err := stored.Storage(QProj, 0); err == nil {
		t.Error("Storage of a stored model")
	}
	for _, tn := range c.Tensors(c.Layers) {
		rows, cols, err := stored.Shape(tn.Part, tn.Block)
		if err != nil || rows*cols != tn.Elems() {
			t.Fatalf("%s of block %d: shape (%d, %d), %v; want %v", tn.Part, tn.Block, rows, cols, err, tn.Shape)
		}
		x := make([]float32, rows*cols)
		if err := stored.Read(tn.Part, tn.Block, x); err != nil || !slices.Equal(x, storage(t, m, tn.Part, tn.Block)) {
			t.Fatalf("%s of block %d: read back %v", tn.Part, tn.Block, err)
		}
	}
	row := make([]float32, c.Hidden)
	if err := stored.ReadRows(Embedding, -1, 96, 97, row); err != nil || !slices.Equal(row, storage(t, m, Embedding, -1)[96*c.Hidden:]) {
		t.Fatalf("embedding row 96: %v", err)
	}
	for name, err := range map[string]error{
		"row past the table": stored.ReadRows(Embedding, -1, 97, 98, row),
		"short destination":  stored.ReadRows(Embedding, -1, 0, 2, row),
		"q/k norm absent":    stored.Read(QNorm, 0, make([]float32, c.HeadDim)),
		"block past the end": stored.Read(AttnNorm, 2, row),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
