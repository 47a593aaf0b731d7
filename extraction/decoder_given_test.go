package extraction

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/models/causallm"
)

// kernelCounter counts the fused kernels a backend hands out: whether a decoder on it ran.
type kernelCounter struct {
	engine.Backend
	n *int
}

func (k kernelCounter) Kernel(name string) any {
	*k.n++
	return k.Backend.Kernel(name)
}

func (k kernelCounter) Unwrap() engine.Backend { return k.Backend }

// A decoder given in the options is the one that runs (on its backend, twice, giving the bits of
// the run's own decoder); one of other weights is refused.
func TestRunDecoderGivenDecoder(t *testing.T) {
	m := decoderModel(t)
	texts := []corpus.Text{{ID: 1, Text: "hello"}, {ID: 2, Text: "a longer text of bytes"}}
	opt := DecoderOptions{Layer: 1, BatchTokens: 24}
	var own, given decSink
	if _, err := RunDecoder(context.Background(), m, byteTokenizer{bos: true}, texts, opt, &own); err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(cpu.Config{}) // GOMAXPROCS workers, as the run's own decoder

	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	calls := 0
	dc, err := causallm.NewDecoder(kernelCounter{be, &calls}, m)
	if err != nil {
		t.Fatal(err)
	}
	opt.Decoder = dc
	for run := range 2 {
		given, calls = decSink{}, 0
		if _, err := RunDecoder(context.Background(), m, byteTokenizer{bos: true}, texts, opt, &given); err != nil {
			t.Fatal(err)
		}
		if calls == 0 {
			t.Errorf("run %d: the given decoder's backend computed nothing", run)
		}
	}
	for i := range own.texts {
		if !slices.Equal(own.texts[i].rows, given.texts[i].rows) || !slices.Equal(own.texts[i].emb, given.texts[i].emb) {
			t.Errorf("text %d: the given decoder's rows differ from the run's own", i)
		}
	}
	other, err := causallm.NewCPUDecoder(decoderModel(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	opt.Decoder = other
	if _, err := RunDecoder(context.Background(), m, byteTokenizer{bos: true}, texts, opt, &given); err == nil || !strings.Contains(err.Error(), "other weights") {
		t.Errorf("a decoder of other weights: %v", err)
	}
}
