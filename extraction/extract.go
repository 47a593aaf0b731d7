// Package extraction is the pipeline behind `geloattack store extract`: Run tokenizes texts,
// runs a BERT-family encoder (models/bert) in batches and hands per-token hidden states of one
// layer plus the model's own sentence embedding to a sink; RunDecoder is the same pipeline for
// Llama-family decoders (models/llama; see docs/decoders.md). It sits above data and models: the
// texts come from data/corpus, the models from models/.
package extraction

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/wordpiece"
	"github.com/gelo-research/geloattack/internal/progress"
	"github.com/gelo-research/geloattack/models/bert"
)

// Sink receives extracted texts in input order. Its method has the signature of the store
// writer's AddText, so a *store.Writer is a Sink. rows: (len(tokenIDs), D) row-major; emb: (E).
// The slices are only valid during the call.
type Sink interface {
	AddText(textID int64, text string, hasText bool, tokenIDs []int32, rows []float32, emb []float32) error
}

// Row normalisations applied to the stored hidden states (the store's "norm" field).
const (
	NormRaw = "raw" // the hidden states as the model computes them
	NormRMS = "rms" // each row x divided by sqrt(mean(x^2) + RMSEps), no learned weight
)

// RMSEps keeps NormRMS finite for an all-zero row.
const RMSEps = 1e-6

// Options configures Run.
type Options struct {
	// Layer is the hidden state stored per token: 0 = embedding output, 1..NumLayers = block output.
	Layer int
	// MaxTexts keeps only the first MaxTexts texts of the source (0: all).
	MaxTexts int
	// MaxTokens truncates each text to this many tokens, [CLS] and [SEP] included (0: the model's
	// max_position_embeddings).
	MaxTokens int
	// BatchTokens is the token budget of one forward batch (0: 4096).
	BatchTokens int
	// Workers is the number of goroutines for tokenization and the forward pass (0: GOMAXPROCS).
	Workers int
	// DropSpecial leaves the [CLS] and [SEP] rows out of the stored rows (they still take part in
	// the forward pass and in the sentence embedding).
	DropSpecial bool
	// Norm is NormRaw (default when empty) or NormRMS.
	Norm string
	// Progress, when not nil, receives a progress bar with tokens/s.
	Progress io.Writer
}

// Stats summarises a run.
type Stats struct {
	Texts, Tokens, StoredRows int64
	// Truncated counts texts cut at MaxTokens.
	Truncated int64
	Elapsed   time.Duration
}

// TokensPerSecond is the forward-pass throughput of the run (all tokens through the encoder).
func (s Stats) TokensPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Tokens) / s.Elapsed.Seconds()
}

// batchOut carries one forward batch from the compute goroutine to the writer.
type batchOut struct {
	lo, hi int       // text range
	hidden []float32 // (tokens, h)
	pooled []float32 // (texts, h)
	err    error
}

// Run tokenizes texts, runs the encoder over them in batches and hands every text to sink in input
// order with its token ids, the chosen layer's rows and the sentence embedding (the L2-normalised
// mean of the last layer over all its tokens). Texts are packed into batches of at most
// BatchTokens tokens without padding; the forward pass of one batch overlaps with writing the
// previous one. Cancelling ctx stops the run between batches with ctx's error.
func Run(ctx context.Context, m *bert.Model, tok *wordpiece.Tokenizer, texts []corpus.Text, opt Options, sink Sink) (Stats, error) {
	h := m.Hidden()
	if opt.Layer < 0 || opt.Layer > m.NumLayers() {
		return Stats{}, fmt.Errorf("extract: layer %d: the model has layers 0..%d", opt.Layer, m.NumLayers())
	}
	maxLen := opt.MaxTokens
	if maxLen == 0 {
		maxLen = m.MaxLen()
	}
	if maxLen < 2 || maxLen > m.MaxLen() {
		return Stats{}, fmt.Errorf("extract: max tokens %d: want 2..%d (the model's max_position_embeddings)", maxLen, m.MaxLen())
	}
	budget := opt.BatchTokens
	if budget == 0 {
		budget = 4096
	}
	if budget < maxLen {
		return Stats{}, fmt.Errorf("extract: batch budget %d tokens is below max tokens %d", budget, maxLen)
	}
	norm := opt.Norm
	if norm == "" {
		norm = NormRaw
	}
	if norm != NormRaw && norm != NormRMS {
		return Stats{}, fmt.Errorf("extract: norm %q: want %q or %q", norm, NormRaw, NormRMS)
	}
	if opt.MaxTexts < 0 {
		return Stats{}, fmt.Errorf("extract: max texts %d: want >= 0", opt.MaxTexts)
	}
	if opt.MaxTexts > 0 && opt.MaxTexts < len(texts) {
		texts = texts[:opt.MaxTexts]
	}
	workers := opt.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}

	// Tokenize everything first: it is cheap next to the encoder and gives the progress total.
	ids := make([][]int32, len(texts))
	truncated := make([]bool, len(texts))
	parallel(workers, len(texts), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			full := tok.Encode(texts[i].Text, 0)
			if len(full) > maxLen {
				truncated[i] = true
				full = append(full[:maxLen-1], tok.SEP())
			}
			ids[i] = full
		}
	})
	var st Stats
	for i := range ids {
		st.Tokens += int64(len(ids[i]))
		if truncated[i] {
			st.Truncated++
		}
	}
	st.Texts = int64(len(texts))

	// A nil Progress gives a bar that prints nothing.
	bar := progress.New(opt.Progress, fmt.Sprintf("extract layer %d", opt.Layer), "tok", st.Tokens)

	// Each worker makes single-threaded GEMM calls on its own block of rows, so OpenBLAS's own
	// threads would only oversubscribe the cores (the setting is process-wide; restored after).
	prevThreads := m.Lib().Threads()
	m.Lib().SetThreads(1)
	defer m.Lib().SetThreads(prevThreads)

	ws, err := m.NewWorkspace(budget, maxLen, workers)
	if err != nil {
		return Stats{}, err
	}
	// Two output buffers: the encoder fills one while the writer drains the other.
	free := make(chan *batchOut, 2)
	for i := 0; i < 2; i++ {
		free <- &batchOut{hidden: make([]float32, budget*h), pooled: make([]float32, (budget/2+1)*h)}
	}
	done := make(chan *batchOut, 2)
	ctx, cancel := context.WithCancel(ctx)
	// On every return the encoder goroutine is stopped and waited for, so that it never outlives
	// the call (and its workspace).
	defer func() {
		cancel()
		for range done {
		}
	}()
	start := time.Now()
	go func() {
		defer close(done)
		for lo := 0; lo < len(ids); {
			n, hi := 0, lo
			for hi < len(ids) && n+len(ids[hi]) <= budget {
				n += len(ids[hi])
				hi++
			}
			var b *batchOut
			select {
			case b = <-free:
			case <-ctx.Done():
				return
			}
			b.lo, b.hi = lo, hi
			b.err = m.Forward(ctx, ws, ids[lo:hi], opt.Layer, b.hidden, b.pooled)
			done <- b
			if b.err != nil {
				return
			}
			lo = hi
		}
	}()

	for b := range done {
		if b.err != nil {
			return st, fmt.Errorf("extract: texts %d..%d: %w", b.lo, b.hi-1, b.err)
		}
		row := 0
		for i := b.lo; i < b.hi; i++ {
			n := len(ids[i])
			rows := b.hidden[row*h : (row+n)*h]
			tokIDs := ids[i]
			row += n
			if opt.DropSpecial {
				rows, tokIDs = rows[h:(n-1)*h], tokIDs[1:n-1]
			}
			if norm == NormRMS {
				RMSNormalize(rows, h)
			}
			emb := b.pooled[(i-b.lo)*h : (i-b.lo+1)*h]
			if err := sink.AddText(texts[i].ID, texts[i].Text, true, tokIDs, rows, emb); err != nil {
				return st, fmt.Errorf("extract: text %d (id %d): %w", i, texts[i].ID, err)
			}
			st.StoredRows += int64(len(tokIDs))
		}
		bar.Add(int64(row))
		free <- b
	}
	st.Elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return st, err
	}
	bar.Finish()
	return st, nil
}

// RMSNormalize divides each row of x (rows of width h) by sqrt(mean(x^2) + RMSEps), the rows
// NormRMS hands the store; attacks that recompute a store's rows call it too.
func RMSNormalize(x []float32, h int) {
	for r := 0; r+h <= len(x); r += h {
		row := x[r : r+h]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(ss/float64(h)+RMSEps))
		for j := range row {
			row[j] *= inv
		}
	}
}
