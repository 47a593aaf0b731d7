package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/train"
)

// attack loads the blocks decode reads, places them on be and runs -generation, or the batches
// (into dir when it is not nil).
func (a *decodeArgs) attack(ctx context.Context, j *decodeJob, opt decode.Options, dir *decode.Dir, genOut *safefile.DirTx, files *safefile.Files, be engine.Backend) error {
	// Only the blocks the attack reads are loaded (and, for a bf16/f16 file, stay mapped as
	// stored): decode -blocks 0,1 of a Llama-3-8B touches 2 of its 32 blocks.
	m, err := hf.LoadWith(*a.modelDir, hf.LoadOptions{Lib: blas.Default(), Blocks: j.deepest + 1})
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	lm, err := decode.NewLlama(be, m, *a.maxTokens)
	if err != nil {
		return err
	}
	defer lm.Close()
	if j.keepWant > 0 && lm.Decoder().Converts() {
		lm.Decoder().KeepConverted(j.keep)
		fmt.Fprintf(os.Stderr, "decode: keeping %.2f of the %.2f GiB of float32 the 16-bit blocks convert to (the memory spare past the pre-flight); the rest converts every pass\n",
			float64(j.keep)/(1<<30), float64(j.keepWant)/(1<<30))
	}
	fmt.Fprintf(os.Stderr, "decode: %s (%s, %d blocks, d %d, vocab %d), %d texts of at most %d tokens, on %s\n",
		*a.modelDir, m.Cfg.Architecture, m.Cfg.Layers, m.Cfg.Hidden, m.Cfg.VocabSize, len(j.ids), *a.maxTokens, be.Name())
	defer func() {
		if peak, ok := device.PeakBytes(be); ok {
			fmt.Fprintf(os.Stderr, "decode: peak device memory %.2f GiB (weights in fp32, KV caches, one block's activations)\n", float64(peak)/(1<<30))
		}
	}()
	if *a.generation > 0 {
		return a.generate(ctx, lm, j, genOut, files)
	}
	if err := a.printBounds(opt, j.blocks, m.Cfg.Hidden); err != nil {
		return err
	}
	return a.runBatches(ctx, lm, j, opt, dir)
}

// generate runs -generation and writes its result into genOut (nil: nothing written).
func (a *decodeArgs) generate(ctx context.Context, lm *decode.Llama, j *decodeJob, genOut *safefile.DirTx, files *safefile.Files) error {
	g, err := decode.Generation(ctx, lm, j.ids, j.textIDs, j.sampler, j.split, *a.generation, *a.claimLead)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("decode: -generation %w: nothing kept", train.ErrInterrupted)
	}
	if err != nil {
		return err
	}
	fmt.Printf("generation: %d steps (n %.1f rows each): %d read right (%.3f), %d claimed (%d right); %.1f s\n",
		g.Steps, g.N, g.Correct, float64(g.Correct)/float64(g.Steps), g.Claims, g.ClaimsRight, g.Seconds)
	return writeGeneration(genOut, g, files)
}

// printBounds prints the recomputation bound Run will use at each attacked block, from the one
// function that computes it.
func (a *decodeArgs) printBounds(opt decode.Options, blocks []int, d int) error {
	rhos, err := decode.RecomputeBounds(opt, blocks, d)
	if err != nil {
		return fmt.Errorf("decode: -deployer-precision: %w", err)
	}
	bounds := make([]string, len(blocks))
	for i, l := range blocks {
		bounds[i] = fmt.Sprintf("block %d %.3g", l, rhos[l])
	}
	fmt.Fprintf(os.Stderr, "decode: recomputation error rho (deployer %s%s): %s\n", *a.precision,
		map[bool]string{true: ", -recompute-error", false: ""}[flagWasSet(a.fs, "recompute-error")], strings.Join(bounds, ", "))
	return nil
}

// runBatches decodes the batches with progress on stderr (-quiet: none): into dir, whose results
// then make the tables, or without one, printing the tables of what ran.
func (a *decodeArgs) runBatches(ctx context.Context, lm *decode.Llama, j *decodeJob, opt decode.Options, dir *decode.Dir) error {
	var progress io.Writer = os.Stderr
	if *a.quiet {
		progress = nil
	} else {
		opt.Progress = func(line string) { fmt.Fprintln(os.Stderr, "decode: "+line) }
	}
	if dir == nil {
		prog := decode.NewProgress(progress, *a.batches, 0)
		opt.OnBatch = func(r decode.BatchResult) error { prog.Batch(r); return nil }
		res, err := decode.Run(ctx, lm, j.ids, opt)
		if len(res) > 0 && (err == nil || ctx.Err() != nil) {
			printDecode(os.Stdout, res, *a.bagOnly)
			printTexts(os.Stdout, res, textsOf(j.tok), *a.redact)
		}
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("decode: %w after %d of %d batches (no -out: nothing kept beyond the table)", train.ErrInterrupted, len(res), *a.batches)
		}
		return err
	}
	prog := decode.NewProgress(progress, dir.Total(), dir.Done())
	opt.OnBatch = func(r decode.BatchResult) error { prog.Batch(r); return nil }
	runErr := dir.Run(ctx, lm, j.ids, opt)
	if runErr != nil && ctx.Err() == nil {
		return runErr
	}
	return finishDecode(dir, j.tok, *a.bagOnly, *a.redact, runErr)
}

// finishDecode writes the directory's summary from its results.jsonl and prints the tables; runErr
// is the run's cancellation, if it was cancelled, reported after the tables with how to continue.
func finishDecode(dir *decode.Dir, tok extraction.Tokenizer, bagOnly, redact bool, runErr error) error {
	sum, res, err := dir.WriteSummary(bagOnly)
	if err != nil {
		return err
	}
	if len(res) > 0 {
		printDecode(os.Stdout, res, bagOnly)
		printTexts(os.Stdout, res, textsOf(tok), redact)
	}
	fmt.Fprintf(os.Stderr, "decode: %d of %d batches in %s (%s, %s)\n", sum.Batches, sum.Planned, dir.Path(), decode.ResultsFile, decode.SummaryFile)
	if runErr != nil {
		return fmt.Errorf("decode: %w after %d of %d batches; they are in %s (continue with -resume and the same flags)",
			train.ErrInterrupted, sum.Batches, sum.Planned, filepath.Join(dir.Path(), decode.ResultsFile))
	}
	return nil
}

// mergeDecode is decode -merge: the shards' directories joined into out, and its tables printed.
// The texts come from modelDir's tokenizer, else the recorded model's; -redact needs neither.
func mergeDecode(out string, shards []string, modelDir string, redact bool, files *safefile.Files) error {
	if out == "" {
		return errors.New("decode: -merge needs -out DIR, the new directory of the joined run")
	}
	dir, err := decode.Merge(out, shards, files)
	if err != nil {
		return err
	}
	defer dir.Close()
	rec := dir.Record()
	bagOnly, _ := rec.Value("bag-only")
	var tok extraction.Tokenizer
	if !redact {
		if modelDir == "" {
			modelDir, _ = rec.Value("model")
		}
		if tok, err = recordedTokenizer(modelDir, rec); err != nil {
			return fmt.Errorf("decode: -merge: %w (-redact prints the tables without the texts)", err)
		}
	}
	return finishDecode(dir, tok, bagOnly == "true", redact, nil)
}

// recordedTokenizer opens modelDir's tokenizer and checks it is the one the record names.
func recordedTokenizer(modelDir string, rec decode.Record) (extraction.Tokenizer, error) {
	mc, err := hf.LoadConfig(modelDir)
	if err != nil {
		return nil, err
	}
	tok, err := openDecoderTokenizer(modelDir, mc.VocabSize)
	if err != nil {
		return nil, err
	}
	if want, _ := rec.Value("tokenizer"); tok.Hash() != want {
		return nil, fmt.Errorf("%s's tokenizer is %s, the run's was %s", modelDir, tok.Hash(), want)
	}
	return tok, nil
}

// writeGeneration writes -generation's result to generation.json in tx's directory (nil: nothing
// written) and puts the directory in place.
func writeGeneration(tx *safefile.DirTx, g *decode.GenerationResult, files *safefile.Files) error {
	if tx == nil {
		return nil
	}
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return fmt.Errorf("decode: encoding the generation result: %w", err)
	}
	if err := files.WriteFileAtomic(filepath.Join(tx.Path(), "generation.json"), append(b, '\n')); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	fmt.Fprintf(os.Stderr, "decode: wrote %s\n", filepath.Join(tx.Target(), "generation.json"))
	return nil
}
