package llama

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"strings"
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

// passes runs m through every kind of pass and returns every tap's rows and the logits, keyed by
// pass: a packed batch of 100 tokens (row-split GEMMs where there are more rows than outputs) and
// of 20 (column split), on 1 and 3 workers, then token by token through a KV cache and a batch of
// alternatives after it.
func passes(t *testing.T, m *Model) map[string][]float32 {
	t.Helper()
	c := m.Cfg
	ctx := context.Background()
	out := map[string][]float32{}
	record := func(pass string) Tap {
		return func(p Point, l int, x []float32) error {
			out[pass+"/"+p.String()+"/"+string(rune('0'+l))] = slices.Clone(x)
			return nil
		}
	}
	full := m.Blocks() == c.Layers
	for _, workers := range []int{1, 3} {
		for _, seqs := range [][][]int32{{ids(1, c.VocabSize, 60), ids(2, c.VocabSize, 40)}, {ids(3, c.VocabSize, 20)}} {
			n, longest := 0, 0
			for _, s := range seqs {
				n, longest = n+len(s), max(longest, len(s))
			}
			ws, err := m.NewWorkspace(n, longest, workers)
			if err != nil {
				t.Fatal(err)
			}
			pass := "forward " + string(rune('0'+workers)) + string(rune('a'+len(seqs)))
			var lg []float32
			if full {
				lg = make([]float32, n*c.VocabSize)
			}
			if err := m.Forward(ctx, ws, seqs, record(pass), lg); err != nil {
				t.Fatal(err)
			}
			out[pass+"/logits"] = lg
		}
	}
	ws, err := m.NewWorkspace(16, 16, 2)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(16)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids(4, c.VocabSize, 6) {
		if err := m.ForwardNext(ctx, ws, cache, []int32{id}, record("next"+string(rune('0'+i))), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.ForwardAlternatives(ctx, ws, cache, []int32{0, 5, 96, 5, 40}, record("alternatives")); err != nil {
		t.Fatal(err)
	}
	return out
}

// A model over stored weights gives, bit for bit, what the float32 model of the same values
// gives, for F32, F16 and BF16 bytes, stacked as the writer lays them out, apart, or unaligned:
// in every pass (packed batches split by rows or columns, 1 or 3 workers, KV cache, alternatives)
// and at every tap and logit. F16 and BF16 bytes are read as stored (through a scratch) until
// Close; F32 ones are copied, and released by Assemble.
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

// The scratch a workspace converts through is what ScratchBytes says: the largest block matrix
// without logits, the output projection too with them.
func TestScratchBytes(t *testing.T) {
	c := testConfig()
	c.VocabSize = 400 // an output projection (400 x 48) larger than gate/up (160 x 48)
	m := randomModel(t, c, 22)
	stored, _, _ := storedCopy(t, m, BF16, backToBack, c.Layers)
	if got, want := stored.ScratchBytes(false), int64(4*2*c.Intermediate*c.Hidden); got != want || c.ScratchBytes() != want {
		t.Errorf("ScratchBytes without logits %d, want %d (gate/up)", got, want)
	}
	ws, err := stored.NewWorkspace(8, 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	seq := [][]int32{ids(5, c.VocabSize, 8)}
	if err := stored.Forward(context.Background(), ws, seq, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := 4 * int64(cap(ws.conv)); got != stored.ScratchBytes(false) {
		t.Errorf("workspace scratch %d bytes after a pass without logits, ScratchBytes %d", got, stored.ScratchBytes(false))
	}
	if err := stored.Forward(context.Background(), ws, seq, nil, make([]float32, 8*c.VocabSize)); err != nil {
		t.Fatal(err)
	}
	if got, want := 4*int64(cap(ws.conv)), stored.ScratchBytes(true); got != want || want != int64(4*c.VocabSize*c.Hidden) {
		t.Errorf("workspace scratch %d bytes after a pass with logits, ScratchBytes %d", got, want)
	}
}

// A model of the first blocks gives the full model's rows up to its last block's output, its
// cache holds its blocks only, and it refuses what needs the rest: logits, the final norm.
func TestFirstBlocksOnly(t *testing.T) {
	c := testConfig()
	c.Layers = 3
	m := randomModel(t, c, 23)
	part, _, _ := storedCopy(t, m, F32, backToBack, 2)
	if part.Blocks() != 2 {
		t.Fatalf("Blocks %d, want 2", part.Blocks())
	}
	want, got := passes(t, m), passes(t, part)
	for k, g := range got {
		if strings.HasSuffix(k, "/logits") {
			if g != nil {
				t.Errorf("%s: logits from 2 of 3 blocks", k)
			}
			continue
		}
		if !slices.Equal(g, want[k]) {
			t.Errorf("%s differs from the full model's", k)
		}
	}
	for _, k := range []string{"forward 1b/residual/2", "next0/residual/2", "alternatives/attn-input/1"} {
		if got[k] == nil {
			t.Errorf("no %s from the 2-block model", k)
		}
	}
	if got["forward 1b/attn-input/2"] != nil || got["forward 1b/residual/3"] != nil {
		t.Error("the 2-block model tapped block 2")
	}
	cache, err := part.NewCache(4)
	if err != nil || len(cache.k) != 2 {
		t.Fatalf("cache of %d layers (%v), want 2", len(cache.k), err)
	}
	ws, _ := part.NewWorkspace(4, 4, 1)
	if err := part.Forward(context.Background(), ws, [][]int32{{1, 2}}, nil, make([]float32, 2*c.VocabSize)); err == nil || !strings.Contains(err.Error(), "logits") {
		t.Errorf("logits of 2 of 3 blocks: %v", err)
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
