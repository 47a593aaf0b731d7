package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/engine/blas"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/shard"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/gelo-research/geloattack/runner"
	"github.com/gelo-research/geloattack/train"
)

var cmdDecode = &Command{
	Name:      "decode",
	UsageLine: "-model DIR [-texts SOURCE] [-blocks 0,1] [-batches N] [-out DIR [-resume] [-shard i/N]] [sampler overrides] [flags]\n       geloattack decode -merge -out DIR SHARD_DIR...\n       geloattack baseline -attack decode [the same flags]",
	Short:     attackSummary("decode"),
	Long: "Prompt decoding (docs/prompt-decoding.md). Texts of SOURCE, tokenized by the model's tokenizer.json\n" +
		"(BOS as its post-processor adds it) and cut to -max-tokens, are drawn into batches of -positives\n" +
		"texts as the sampler draws them; the deployer's forward pass gives each block's attention input\n" +
		"RMSNorm(h_l)·g_l, and GELO mixes it per block with fresh shields and a fresh A (the config's sampler\n" +
		"with the override flags). The attacker, who has the weights, sees U_l of the -blocks it names: it\n" +
		"tests every vocabulary row of block 0 (position-free) against U_0 for the bag of tokens, then reads\n" +
		"each text in order, extending prefixes by bag tokens whose rows at the other blocks lie in their U_l\n" +
		"(residual below full rank, leverage past it; baselines/membership). It claims a text only when\n" +
		"every step was certified and led what it left out by -claim-lead decades. Reported per batch and\n" +
		"in total: exact texts, token accuracy, bag precision and recall, rank beside n and d, margins,\n" +
		"claims, candidate forward passes per second; under the table each true text beside the text decoded\n" +
		"closest to it, as the tokenizer decodes them (-redact hides them). -generation N instead observes N\n" +
		"decoding steps, each one new row of block 0 plus shields.\n\n" +
		"Long runs: -out DIR records the options (options.json) and appends each batch's result to\n" +
		"DIR/results.jsonl as it finishes (its wall time to timing.jsonl); the table, DIR/summary.json and\n" +
		"DIR/results.json are computed from results.jsonl at the end. A line per batch on stderr gives the\n" +
		"batches done, the time elapsed and the ETA (-quiet: none). Ctrl-C stops after the current step\n" +
		"and keeps the finished batches (a second Ctrl-C ends at once); -resume continues a stopped or killed\n" +
		"run to the bytes an uninterrupted one writes, refusing a DIR whose options.json differs (naming\n" +
		"the option). -shard i/N decodes the batches b with b mod N = i (a cluster job array), and\n" +
		"geloattack decode -merge -out DIR SHARD_DIR... joins the shards into the directory one run writes.",
	Flags:            decodeFlags,
	Args:             true,
	SavesOnInterrupt: true,
}

// decodeFlags defines the flags of `geloattack decode` and returns what runs it.
func decodeFlags(fs *flag.FlagSet) runFunc {
	defTexts, _ := corpus.DefaultCorpusDir()
	var (
		cfgPath    = fs.String("config", "", "run config whose sampler settings are the deployer's (empty: the embedded quickstart's)")
		modelDir   = fs.String("model", "", "decoder directory (config.json, model.safetensors, tokenizer.json): model init's or a user's (required)")
		texts      = fs.String("texts", defTexts, "SOURCE of the victims' texts, as store extract reads it (a scripts/fetch-data.sh directory, .jsonl, or one text per line)")
		corpora    = fs.String("corpora", "", "comma-separated corpora of a fetch-script SOURCE directory; empty: all present")
		maxTexts   = intFlag(fs, "max-texts", 200, field.Bounds{Int: true, Min: 8, Max: 1 << 20}, "texts of SOURCE the batches are drawn from (the first N in its order)")
		maxTokens  = intFlag(fs, "max-tokens", 16, field.Bounds{Int: true, Min: 2, Max: 4096}, "cut every text to its first T tokens, BOS included")
		blocksFlag = fs.String("blocks", "0,1", "blocks whose U the attacker sees and scores: 0 (the bag) and at least one more (the order)")
		batches    = intFlag(fs, "batches", 4, field.Bounds{Int: true, Min: 1, Max: 1 << 20}, "batches to decode (each its own example of the split's stream)")
		splitName  = fs.String("split", "val", "split the batches' texts come from: train or val")
		beam       = intFlag(fs, "beam", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 16, Zero: "4 per text"}, "live prefixes kept at each step")
		branch     = fs.Float64("branch", 1, "per prefix, keep the certified extensions within this many decades of its best one")
		claimLead  = fs.Float64("claim-lead", 1, "decades by which every step of a claimed text must lead the best extension left out")
		joint      = fs.Bool("joint", false, "rank a prefix's extensions, and measure a claim's lead, by the sum of the attacked blocks' excesses (>= 1) instead of the worst block's; certification unchanged")
		rank       = fs.Bool("rank", false, "search by ranking alone where certification fails (rows dropped, thin margins): the bag is the certified one where every row is observed and block 0 certifies some token, else the n_obs best block-0 tokens; prefixes are kept by mean step score; claims keep their rule, so uncertified texts are never claimed")
		rankBagN   = intFlag(fs, "rank-bag", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "the whole bag"}, "with -rank, keep only the N best tokens of the bag (the attacker's budget where the bag is loose: past full rank it can hold thousands of tokens, each a candidate pass per prefix and step); a cut bag forbids claims")
		orderTopK  = fs.Float64("order-topk", 0, "rank extensions by top-k containment (summed over the attacked blocks >= 1) instead of the excess, k = F x the block's rank for F one of 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 0.9375 (0: the excess); certification and claims still rest on the excess")
		maxSteps   = intFlag(fs, "max-steps", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "n_obs or the model's context, the less"}, "longest text the search reads, in tokens: the attacker's assumption on prompt length (a -rank search past full rank otherwise runs on to the model's context)")
		noOrder    = fs.Bool("no-order-margin", false, "skip the order margin's passes along the true texts (about half the candidate passes; only an evaluation knowing the truth runs them): its column shows -")
		bagOnly    = fs.Bool("bag-only", false, "read the bag (block 0) and stop: no order search and no candidate passes (full rank at d 4096 would take hours); exact and token accuracy show -")
		generation = intFlag(fs, "generation", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "decode prompts"}, "observe this many generation steps (one row of block 0 plus shields each) instead")
		out        = fs.String("out", "", "output directory (new or empty, or with -resume this run's): options.json, results.jsonl (a line per batch as it finishes), timing.jsonl, then summary.json and results.json (with -generation: generation.json); empty: nothing written")
		resume     = fs.Bool("resume", false, "continue the decode in -out: the batches in its results.jsonl are kept and the rest run; refused when -out's options.json records other options")
		shardFlag  = fs.String("shard", "", "decode only shard i of N (i/N): the batches b with b mod N = i, into -out; join the shards' directories with -merge")
		merge      = fs.Bool("merge", false, "join the -out directories named after the flags (the shards of one decode) into -out, a new directory, and print the table (the texts from -model's tokenizer, else the recorded model's)")
		redact     = fs.Bool("redact", false, "leave the true and decoded texts out of the table (results.jsonl keeps their token ids)")
		quiet      = fs.Bool("quiet", false, "no progress on stderr: neither each stage of a batch nor the batches done with the ETA")
		precision  = fs.String("deployer-precision", fptol.PrecisionFP32, "the deployer's declared compute precision, fp32, bf16 or fp16: every absolute test allows the recomputation error rho = fptol.Recompute(precision, block, d) between the deployer's rows and the attacker's")
		rho        = new(float64)
		depTexts   = fs.String("deployer-texts", "", "write the texts decode would attack (token ids, as JSON lines) to this file for an external deployer (bench/torch_deploy.py --tokens FILE) and stop")
		depRows    = fs.String("deployer-rows", "", "attack the rows an external deployer computed (bench/torch_deploy.py --out DIR, attn-input rows of every attacked block, BOS kept) instead of the model's own forward; -deployer-precision defaults to the deployer's dtype")
		replace    = invalidUTF8Flag(fs)
	)
	floatVar(fs, rho, "recompute-error", 0, field.Bounds{Min: 0, Max: 1, MinOpen: true, MaxOpen: true},
		"recomputation error rho at every attacked block: the attacker's own bound on ||x_att - x_dep|| / ||x_dep||; left out: from -deployer-precision")
	addSamplerOverrides(fs, "texts per batch", "tokens-per-text")
	return func(ctx context.Context, args []string) error {
		files := new(safefile.Files)
		if *merge {
			if len(args) == 0 {
				return &argsError{"decode -merge: name the shards' output directories"}
			}
			return mergeDecode(*out, args, *modelDir, *redact, files)
		}
		if len(args) > 0 {
			return &argsError{fmt.Sprintf("unexpected argument %q: only decode -merge takes words (the shards' directories)", args[0])}
		}
		if *modelDir == "" {
			return errors.New("decode: -model DIR is required (a decoder directory; geloattack model init makes one)")
		}
		if !(*branch > 0) || math.IsInf(*branch, 0) || !(*claimLead > 0) || math.IsInf(*claimLead, 0) {
			return fmt.Errorf("decode: -branch %v and -claim-lead %v: want positive numbers of decades", *branch, *claimLead)
		}
		if *rankBagN > 0 && !*rank {
			return fmt.Errorf("decode: -rank-bag %d needs -rank (the certified search tries the whole certified bag)", *rankBagN)
		}
		shard, err := longRunFlags(*out, *resume, *shardFlag, *generation)
		if err != nil {
			return err
		}
		if err := checkOutDir(*out, map[string]string{"texts": *texts, "config": *cfgPath}); err != nil {
			return err
		}
		split, err := data.ParseSplit(*splitName)
		if err != nil {
			return fmt.Errorf("-split: %w", err)
		}
		var blocks []int
		for _, s := range strings.Split(*blocksFlag, ",") {
			b, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("-blocks %q: %q is not a block number", *blocksFlag, s)
			}
			blocks = append(blocks, b)
		}
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		sc, err := samplerOf(ctx, fs, cfg.Sampler)
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		replaceUTF8, err := replace()
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if !hf.IsDecoderDir(*modelDir) {
			return fmt.Errorf("decode: %s is not a decoder directory (config.json with a Llama/Mistral/Qwen2/Qwen3ForCausalLM architecture)", *modelDir)
		}
		// What config.json, the weight files' headers, the flags, the tokenizer and the texts can
		// refuse is refused before the weights are read: the model alone against the memory first,
		// then the directory, then everything.
		mc, err := hf.LoadConfig(*modelDir)
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		deepest := 0
		for _, b := range blocks {
			if b < 0 || b >= mc.Layers {
				return fmt.Errorf("decode: -blocks %q: block %d: the model has blocks 0..%d", *blocksFlag, b, mc.Layers-1)
			}
			deepest = max(deepest, b)
		}
		if *maxTokens > mc.MaxLen() {
			return fmt.Errorf("decode: -max-tokens %d: the model reads at most %d tokens (max_position_embeddings or sliding_window)", *maxTokens, mc.MaxLen())
		}
		if err := checkSetSize(sc, *maxTokens, mc.Hidden); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		plan := decodePlan{cfg: mc, sc: sc, maxTokens: *maxTokens, beam: *beam, rankBag: *rankBagN, blocks: blocks, deepest: deepest,
			bagOnly: *bagOnly, model: *depTexts == ""}
		if _, err := plan.budget(*modelDir).Check(); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if _, err := hf.Check(*modelDir); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		tok, err := openDecoderTokenizer(*modelDir, mc.VocabSize)
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		var corpusList []string
		if *corpora != "" {
			corpusList = strings.Split(*corpora, ",")
		}
		src, err := corpus.ReadSourceWith(*texts, corpus.SourceOptions{Corpora: corpusList, ReplaceInvalidUTF8: replaceUTF8})
		if err != nil {
			return fmt.Errorf("decode: %w", utf8Hint(err))
		}
		plan.vocab, plan.src, plan.texts = tok.VocabSize(), src, min(*maxTexts, len(src.Texts))
		if err := preflight("decode", plan.budget(*modelDir)); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		var ids [][]int
		var textIDs []int64 // the source's ids, so the split is the stores' and a trained decoder's
		for _, t := range src.Texts {
			if len(ids) == *maxTexts {
				break
			}
			enc, err := tok.Encode(t.Text, true)
			if err != nil {
				return fmt.Errorf("decode: text %d: %w", t.ID, err)
			}
			if len(enc) < 2 {
				continue
			}
			ids = append(ids, enc[:min(len(enc), *maxTokens)])
			textIDs = append(textIDs, t.ID)
		}
		if len(ids) < 8 {
			return fmt.Errorf("decode: %s gave %d texts of at least 2 tokens, want at least 8", *texts, len(ids))
		}
		if *depTexts != "" {
			return writeDeployerTexts(*depTexts, tok, ids, textIDs)
		}
		// The deployer's rows are read, and the output directory opened (its options checked on
		// -resume), before the weights: every refusal comes before the long load.
		var dep decode.Deployer
		if *depRows != "" {
			rows, err := deployer.ReadRows(ctx, *depRows, deployer.AttnInput, blocks)
			if err != nil {
				return fmt.Errorf("decode: -deployer-rows: %w", err)
			}
			if err := rows.Info.CheckModel(*modelDir); err != nil {
				return fmt.Errorf("decode: -deployer-rows: %w", err)
			}
			if !flagWasSet(fs, "deployer-precision") {
				*precision = rows.Info.DType
			}
			fmt.Fprintf(os.Stderr, "decode: the deployer's rows: %s, from %s\n", rows.Info.Stack(), *depRows)
			dep = deployerRows{rows}
		}
		opt := decode.Options{Sampler: sc, Split: split, Batches: *batches, Blocks: blocks,
			DeployerPrecision: *precision, Recompute: *rho, Deployer: dep,
			Beam: *beam, Branch: *branch, ClaimLead: *claimLead, TextIDs: textIDs, Rank: *rank, RankBag: *rankBagN, OrderTopK: *orderTopK, MaxSteps: *maxSteps, Joint: *joint, NoOrderMargin: *noOrder, BagOnly: *bagOnly}
		var dir *decode.Dir
		if *out != "" && *generation == 0 {
			rec, err := decodeRecord(decodeRun{modelDir: *modelDir, tok: tok, ids: ids, textIDs: textIDs, maxTexts: *maxTexts, maxTokens: *maxTokens,
				depRows: *depRows, opt: opt, shard: shard, files: files})
			if err != nil {
				return err
			}
			if dir, err = decode.OpenDir(*out, rec, *resume, files); err != nil {
				return err
			}
			defer dir.Close()
			for _, n := range dir.Notes {
				fmt.Fprintln(os.Stderr, "decode: "+n)
			}
			if dir.Done() > 0 {
				fmt.Fprintf(os.Stderr, "decode: resuming: %d of the %d batches of shard %s already in %s\n", dir.Done(), dir.Total(), shard, filepath.Join(*out, decode.ResultsFile))
			}
			if dir.Done() == dir.Total() {
				return finishDecode(dir, tok, *bagOnly, *redact, nil) // nothing left to run: no weights needed
			}
		}
		var genOut *safefile.DirTx // -generation's directory, checked before the work
		if *out != "" && *generation > 0 {
			if genOut, err = files.BeginDir(*out); err != nil {
				return fmt.Errorf("decode: -out: %w", err)
			}
			defer genOut.Abort()
		}
		// Pre-load checks go here (issue 39 item 1: the memory estimate by part and every argument
		// against the model): everything above refuses without the weights, and nothing below runs
		// without them.
		// Only the blocks the attack reads are loaded (and, for a bf16/f16 file, stay mapped as
		// stored): decode -blocks 0,1 of a Llama-3-8B touches 2 of its 32 blocks.
		m, err := hf.LoadWith(*modelDir, hf.LoadOptions{Lib: blas.Default(), Blocks: deepest + 1})
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		lm, err := decode.NewLlama(m, *maxTokens)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "decode: %s (%s, %d blocks, d %d, vocab %d), %d texts of at most %d tokens\n",
			*modelDir, m.Cfg.Architecture, m.Cfg.Layers, m.Cfg.Hidden, m.Cfg.VocabSize, len(ids), *maxTokens)
		if *generation > 0 {
			g, err := decode.Generation(ctx, lm, ids, textIDs, sc, split, *generation, *claimLead)
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
		// The header prints the bound Run will use, from the one function that computes it.
		rhos, err := decode.RecomputeBounds(opt, blocks, m.Cfg.Hidden)
		if err != nil {
			return fmt.Errorf("decode: -deployer-precision: %w", err)
		}
		bounds := make([]string, len(blocks))
		for i, l := range blocks {
			bounds[i] = fmt.Sprintf("block %d %.3g", l, rhos[l])
		}
		fmt.Fprintf(os.Stderr, "decode: recomputation error rho (deployer %s%s): %s\n", *precision,
			map[bool]string{true: ", -recompute-error", false: ""}[flagWasSet(fs, "recompute-error")], strings.Join(bounds, ", "))
		var progress io.Writer = os.Stderr
		if *quiet {
			progress = nil
		} else {
			opt.Progress = func(line string) { fmt.Fprintln(os.Stderr, "decode: "+line) }
		}
		if dir == nil {
			prog := decode.NewProgress(progress, *batches, 0)
			opt.OnBatch = func(r decode.BatchResult) error { prog.Batch(r); return nil }
			res, err := decode.Run(ctx, lm, ids, opt)
			if len(res) > 0 && (err == nil || ctx.Err() != nil) {
				printDecode(os.Stdout, res, *bagOnly)
				printTexts(os.Stdout, res, textsOf(tok), *redact)
			}
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("decode: %w after %d of %d batches (no -out: nothing kept beyond the table)", train.ErrInterrupted, len(res), *batches)
			}
			return err
		}
		prog := decode.NewProgress(progress, dir.Total(), dir.Done())
		opt.OnBatch = func(r decode.BatchResult) error { prog.Batch(r); return nil }
		runErr := dir.Run(ctx, lm, ids, opt)
		if runErr != nil && ctx.Err() == nil {
			return runErr
		}
		return finishDecode(dir, tok, *bagOnly, *redact, runErr)
	}
}

// longRunFlags checks -out, -resume and -shard together and returns the shard.
func longRunFlags(out string, resume bool, shardFlag string, generation int) (decode.Shard, error) {
	part := shard.All()
	if shardFlag != "" {
		var err error
		if part, err = shard.Parse(shardFlag); err != nil {
			return part, fmt.Errorf("decode: -shard: %w", err)
		}
	}
	switch {
	case (resume || shardFlag != "") && out == "":
		return part, errors.New("decode: -resume and -shard need -out DIR (the directory whose results.jsonl they continue or fill)")
	case (resume || shardFlag != "") && generation > 0:
		return part, errors.New("decode: -resume and -shard apply to prompt decoding's batches, not -generation")
	}
	return part, nil
}

// checkOutDir refuses, before any work, an -out whose parent directory does not exist and an -out
// that is one of the command's inputs (ins: flag name -> path). Whether the directory itself may
// be written (new, empty, or this run's on -resume) decode.OpenDir decides.
func checkOutDir(out string, ins map[string]string) error {
	if out == "" {
		return nil
	}
	for flag, in := range ins {
		if in != "" && sameFile(out, in) {
			return fmt.Errorf("decode: -out %s is the file -%s reads: refusing to write over an input", out, flag)
		}
	}
	parent := filepath.Dir(filepath.Clean(out))
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		return fmt.Errorf("decode: -out %s: directory %s does not exist; create it first", out, parent)
	}
	if strings.HasSuffix(out, ".json") {
		// -out named a JSON file before it named a directory: a script's old -out is refused, not
		// turned into a directory of that name.
		return fmt.Errorf("decode: -out %s: -out names an output directory (%s, %s, %s ...), not a JSON file", out,
			decode.ResultsFile, decode.SummaryFile, decode.ResultsJSON)
	}
	return nil
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

// deployerRows adapts an external deployer's rows to decode.Deployer.
type deployerRows struct{ r *deployer.Rows }

// Rows returns text id's rows at block l, checked against the attacker's tokens.
func (d deployerRows) Rows(id int64, toks []int, l int) ([]float32, error) {
	return d.r.Text(id, toks, l)
}

// writeDeployerTexts writes the texts decode attacks as an external deployer's input: each text's
// source id, token ids, and how many leading tokens are the tokenizer's special prefix.
func writeDeployerTexts(path string, tok extraction.Tokenizer, ids [][]int, textIDs []int64) error {
	prefix, err := tok.Encode("", true)
	if err != nil {
		return fmt.Errorf("decode: -deployer-texts: %w", err)
	}
	texts := make([]deployer.Text, len(ids))
	for i, t := range ids {
		toks := make([]int32, len(t))
		for j, v := range t {
			toks[j] = int32(v)
		}
		bos := 0
		if len(t) > len(prefix) && slices.Equal(t[:len(prefix)], prefix) {
			bos = len(prefix)
		}
		texts[i] = deployer.Text{ID: textIDs[i], Tokens: toks, BOS: bos}
	}
	var buf bytes.Buffer
	if err := deployer.WriteTexts(&buf, texts); err != nil {
		return fmt.Errorf("decode: -deployer-texts %s: %w", path, err)
	}
	if err := checkpoints.WriteFileAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("decode: -deployer-texts: %w", err)
	}
	fmt.Fprintf(os.Stderr, "decode: wrote %d texts for the deployer to %s\n", len(texts), path)
	return nil
}

// maxSetElems bounds the GELO example decode draws per attacked block, whatever the memory: the
// n x n mixing matrix A and the (shields, d) shield rows each hold at most 2^32 elements (16 GiB
// in float32), so a -shield-rows or -positives of the flags' own ranges cannot ask for terabytes
// even with GELOATTACK_SKIP_PREFLIGHT set.
const maxSetElems = 1 << 32

// checkSetSize refuses a sampler whose example of texts cut to maxTokens tokens would hold more
// than maxSetElems shield elements (shields x d) or mixing-matrix elements (n x n).
func checkSetSize(sc gelo.Config, maxTokens, d int) error {
	n, clean := setSize(sc, maxTokens)
	k := n - clean
	if e := int64(k) * int64(d); e > maxSetElems {
		return fmt.Errorf("-shield-rows (or shield_frac) %d x d %d = %d shield elements a block: over the limit of 2^32; fewer shields, or a smaller model", k, d, e)
	}
	if e := int64(n) * int64(n); e > maxSetElems {
		return fmt.Errorf("set size n = %d positives x %d tokens + %d shields = %d: the n x n mixing matrix would hold %d elements, over the limit of 2^32 (n <= 65536); fewer -positives, -max-tokens or shields",
			int(sc.Positives.Max), maxTokens, k, n, e)
	}
	return nil
}

// setSize is the largest set an example of texts cut to maxTokens tokens holds, and its clean rows.
func setSize(sc gelo.Config, maxTokens int) (n, clean int) {
	sc.TokensPerText = gelo.Fixed(float64(maxTokens))
	return sc.MaxN(), int(sc.Positives.Max) * maxTokens
}

// decodePlan is what decode is about to do, for its resource pre-flight.
type decodePlan struct {
	cfg                      llama.Config
	sc                       gelo.Config
	vocab, texts             int            // the tokenizer's ids; the texts decoded (0 before they are read)
	src                      *corpus.Source // nil before the texts are read
	maxTokens, beam, rankBag int
	blocks                   []int
	deepest                  int
	bagOnly, model           bool // model: the weights are loaded (not -deployer-texts)
}

// budget estimates decode by part: the weights of the blocks it loads (0..deepest, as stored in
// the files: runner.StoredWeights), the tokenizer and the
// texts, and with the model: the forward pass's workspace (candidate batches of 256 rows against
// prefixes of -max-tokens), the live prefixes' KV caches (twice the beam, and one per text), the
// texts' rows at every attacked block, the GELO example of each block (the mixing matrix, its
// generator's QR and the rows), the membership spaces, block 0's scores of the whole vocabulary,
// and the order search's candidate rows (the bag: the whole vocabulary past full rank, or
// -rank-bag).
func (p decodePlan) budget(modelDir string) runner.Budget {
	c := p.cfg
	b := runner.Budget{What: "decode -model " + modelDir,
		Reduce: "-max-texts, -max-tokens, -positives, -shield-rows or -shield-frac, -beam, -blocks, or -bag-only, or use a smaller model"}
	if p.src != nil {
		b.Add(runner.TokenizerPart(p.vocab), runner.TextsPart(len(p.src.Texts), p.src.Bytes()))
	}
	if !p.model {
		return b // -deployer-texts: the weights are not read
	}
	d, nb := int64(c.Hidden), int64(len(p.blocks))
	n, _ := setSize(p.sc, p.maxTokens)
	n64, m := int64(n), int64(min(n, c.Hidden))
	positives := int64(p.sc.Positives.Max)
	beam := int64(p.beam)
	if beam == 0 {
		beam = 4 * max(positives, 1)
	}
	b.Add(runner.StoredWeights(modelDir, c, p.deepest+1)...)
	b.Add(
		runner.Part{Name: "workspace", Bytes: causallm.WorkspaceBytes(c, max(p.maxTokens, 256), p.maxTokens, runtime.GOMAXPROCS(0))},
		runner.Part{Name: fmt.Sprintf("texts' rows (%d texts x %d tokens x d %d at %d blocks)", p.texts, p.maxTokens, d, nb),
			Bytes: runner.Product(4, nb, int64(p.texts), int64(p.maxTokens), d)},
		runner.Part{Name: fmt.Sprintf("GELO examples (n %d at %d blocks)", n, nb),
			Bytes: runner.Product(nb, 4*n64*n64+16*n64*d) + 24*n64*n64},
		runner.Part{Name: "membership spaces", Bytes: runner.Product(8, nb, m*m+2*n64*m)},
		runner.Part{Name: fmt.Sprintf("vocabulary scores (%d tokens)", c.VocabSize), Bytes: 64*int64(c.VocabSize) + 20*2048*d},
	)
	if !p.bagOnly {
		cands := int64(c.VocabSize)
		if p.rankBag > 0 {
			cands = min(cands, int64(p.rankBag))
		}
		prefixes := 2*beam + positives
		b.Add(runner.Part{Name: fmt.Sprintf("KV caches (%d prefixes of %d tokens)", prefixes, p.maxTokens),
			Bytes: runner.Product(prefixes, c.CacheBytes(p.maxTokens))},
			runner.Part{Name: fmt.Sprintf("candidate rows (%d candidates, blocks 1..%d)", cands, p.deepest),
				Bytes: runner.Product(cands, d, 4*int64(p.deepest+1)+16)})
	}
	return b
}
