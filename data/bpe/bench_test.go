package bpe_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/data/bpe"
	"github.com/gelo-research/geloattack/data/corpus"
)

// BenchmarkEncode encodes the first 2,000 corpus texts per iteration with each real tokenizer
// (MB/s is of UTF-8 input). The per-piece cache is warm after the first iteration, as it is in a
// long extraction run.
func BenchmarkEncode(b *testing.B) {
	cache, err := corpus.DefaultCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	src, err := corpus.ReadSource(filepath.Join(cache, "corpus"), nil)
	if err != nil {
		b.Skipf("no corpus: %v", err)
	}
	texts := src.Texts[:min(2000, len(src.Texts))]
	size := 0
	for _, x := range texts {
		size += len(x.Text)
	}
	for _, name := range []string{"llama2", "llama3", "qwen3"} {
		b.Run(name, func(b *testing.B) {
			tok, err := bpe.Load(filepath.Join(cacheTokenizers(b), name, "tokenizer.json"))
			if err != nil {
				b.Skipf("no %s tokenizer: %v", name, err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				for _, x := range texts {
					if _, err := tok.Encode(x.Text, true); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(len(texts)*b.N)/b.Elapsed().Seconds(), "texts/s")
		})
	}
}

// BenchmarkEncodeLong encodes one 200 kB text: a SentencePiece tokenizer merges it as a single
// piece, so this shows the heap keeps BPE at O(n log n).
func BenchmarkEncodeLong(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4500)
	for _, name := range []string{"llama2", "llama3", "qwen3"} {
		b.Run(name, func(b *testing.B) {
			tok, err := bpe.Load(filepath.Join(cacheTokenizers(b), name, "tokenizer.json"))
			if err != nil {
				b.Skipf("no %s tokenizer: %v", name, err)
			}
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := tok.Encode(text, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func cacheTokenizers(b *testing.B) string {
	if d := os.Getenv(envTokenizers); d != "" {
		return d
	}
	cache, err := corpus.DefaultCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(cache, "tokenizers")
}
