package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/shard"
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

// decodeArgs holds the flags of `geloattack decode`, as defineDecodeArgs defines them on fs.
type decodeArgs struct {
	fs *flag.FlagSet

	cfgPath, modelDir, texts, corpora, blocksFlag, splitName    *string
	out, shardFlag, precision, depTexts, depRows                *string
	device                                                      *string
	maxTexts, maxTokens, batches, beam, rankBagN, maxSteps      *int
	generation                                                  *int
	branch, claimLead, orderTopK, rho                           *float64
	joint, rank, noOrder, bagOnly, resume, merge, redact, quiet *bool
	replace                                                     func() (bool, error)
}

// defineDecodeArgs defines the flags of `geloattack decode` on fs.
func defineDecodeArgs(fs *flag.FlagSet) *decodeArgs {
	defTexts, _ := corpus.DefaultCorpusDir()
	a := &decodeArgs{
		fs:         fs,
		cfgPath:    fs.String("config", "", "run config whose sampler settings are the deployer's (empty: the embedded quickstart's)"),
		modelDir:   fs.String("model", "", "decoder directory (config.json, model.safetensors, tokenizer.json): model init's or a user's (required)"),
		texts:      fs.String("texts", defTexts, "SOURCE of the victims' texts, as store extract reads it (a scripts/fetch-data.sh directory, .jsonl, or one text per line)"),
		corpora:    fs.String("corpora", "", "comma-separated corpora of a fetch-script SOURCE directory; empty: all present"),
		maxTexts:   intFlag(fs, "max-texts", 200, field.Bounds{Int: true, Min: 8, Max: 1 << 20}, "texts of SOURCE the batches are drawn from (the first N in its order)"),
		maxTokens:  intFlag(fs, "max-tokens", 16, field.Bounds{Int: true, Min: 2, Max: 4096}, "cut every text to its first T tokens, BOS included"),
		blocksFlag: fs.String("blocks", "0,1", "blocks whose U the attacker sees and scores: 0 (the bag) and at least one more (the order)"),
		batches:    intFlag(fs, "batches", 4, field.Bounds{Int: true, Min: 1, Max: 1 << 20}, "batches to decode (each its own example of the split's stream)"),
		splitName:  fs.String("split", "val", "split the batches' texts come from: train or val"),
		beam:       intFlag(fs, "beam", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 16, Zero: "4 per text"}, "live prefixes kept at each step"),
		branch:     fs.Float64("branch", 1, "per prefix, keep the certified extensions within this many decades of its best one"),
		claimLead:  fs.Float64("claim-lead", 1, "decades by which every step of a claimed text must lead the best extension left out"),
		joint:      fs.Bool("joint", false, "rank a prefix's extensions, and measure a claim's lead, by the sum of the attacked blocks' excesses (>= 1) instead of the worst block's; certification unchanged"),
		rank:       fs.Bool("rank", false, "search by ranking alone where certification fails (rows dropped, thin margins): the bag is the certified one where every row is observed and block 0 certifies some token, else the n_obs best block-0 tokens; prefixes are kept by mean step score; claims keep their rule, so uncertified texts are never claimed"),
		rankBagN:   intFlag(fs, "rank-bag", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "the whole bag"}, "with -rank, keep only the N best tokens of the bag (the attacker's budget where the bag is loose: past full rank it can hold thousands of tokens, each a candidate pass per prefix and step); a cut bag forbids claims"),
		orderTopK:  fs.Float64("order-topk", 0, "rank extensions by top-k containment (summed over the attacked blocks >= 1) instead of the excess, k = F x the block's rank for F one of 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 0.9375 (0: the excess); certification and claims still rest on the excess"),
		maxSteps:   intFlag(fs, "max-steps", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "n_obs or the model's context, the less"}, "longest text the search reads, in tokens: the attacker's assumption on prompt length (a -rank search past full rank otherwise runs on to the model's context)"),
		noOrder:    fs.Bool("no-order-margin", false, "skip the order margin's passes along the true texts (about half the candidate passes; only an evaluation knowing the truth runs them): its column shows -"),
		bagOnly:    fs.Bool("bag-only", false, "read the bag (block 0) and stop: no order search and no candidate passes (full rank at d 4096 would take hours); exact and token accuracy show -"),
		generation: intFlag(fs, "generation", 0, field.Bounds{Int: true, Min: 1, Max: 1 << 20, Zero: "decode prompts"}, "observe this many generation steps (one row of block 0 plus shields each) instead"),
		out:        fs.String("out", "", "output directory (new or empty, or with -resume this run's): options.json, results.jsonl (a line per batch as it finishes), timing.jsonl, then summary.json and results.json (with -generation: generation.json); empty: nothing written"),
		resume:     fs.Bool("resume", false, "continue the decode in -out: the batches in its results.jsonl are kept and the rest run; refused when -out's options.json records other options"),
		shardFlag:  fs.String("shard", "", "decode only shard i of N (i/N): the batches b with b mod N = i, into -out; join the shards' directories with -merge"),
		merge:      fs.Bool("merge", false, "join the -out directories named after the flags (the shards of one decode) into -out, a new directory, and print the table (the texts from -model's tokenizer, else the recorded model's)"),
		redact:     fs.Bool("redact", false, "leave the true and decoded texts out of the table (results.jsonl keeps their token ids)"),
		quiet:      fs.Bool("quiet", false, "no progress on stderr: neither each stage of a batch nor the batches done with the ETA"),
		precision:  fs.String("deployer-precision", fptol.PrecisionFP32, "the deployer's declared compute precision, fp32, bf16 or fp16: every absolute test allows the recomputation error rho = fptol.Recompute(precision, block, d) between the deployer's rows and the attacker's"),
		rho:        new(float64),
		depTexts:   fs.String("deployer-texts", "", "write the texts decode would attack (token ids, as JSON lines) to this file for an external deployer (bench/torch_deploy.py --tokens FILE) and stop"),
		depRows:    fs.String("deployer-rows", "", "attack the rows an external deployer computed (bench/torch_deploy.py --out DIR, attn-input rows of every attacked block, BOS kept) instead of the model's own forward; -deployer-precision defaults to the deployer's dtype"),
		replace:    invalidUTF8Flag(fs),
		device:     addDecoderDeviceFlag(fs),
	}
	floatVar(fs, a.rho, "recompute-error", 0, field.Bounds{Min: 0, Max: 1, MinOpen: true, MaxOpen: true},
		"recomputation error rho at every attacked block: the attacker's own bound on ||x_att - x_dep|| / ||x_dep||; left out: from -deployer-precision")
	addSamplerOverrides(fs, "texts per batch", "tokens-per-text")
	return a
}

// decodeFlags defines the flags of `geloattack decode` and returns what runs it.
func decodeFlags(fs *flag.FlagSet) runFunc {
	a := defineDecodeArgs(fs)
	return a.run
}

// run runs decode -merge, or the decode a's flags describe: every refusal that needs no
// weights first (prepare), then the deployer's rows and the output directory, then the weights and
// the attack.
func (a *decodeArgs) run(ctx context.Context, args []string) error {
	files := new(safefile.Files)
	if *a.merge {
		if len(args) == 0 {
			return &argsError{"decode -merge: name the shards' output directories"}
		}
		return mergeDecode(*a.out, args, *a.modelDir, *a.redact, files)
	}
	if len(args) > 0 {
		return &argsError{fmt.Sprintf("unexpected argument %q: only decode -merge takes words (the shards' directories)", args[0])}
	}
	j, err := a.prepare(ctx)
	if err != nil {
		return err
	}
	if *a.depTexts != "" {
		return writeDeployerTexts(*a.depTexts, j.tok, j.ids, j.textIDs)
	}
	// The deployer's rows are read, and the output directory opened (its options checked on
	// -resume), before the weights: every refusal comes before the long load.
	dep, err := a.deployer(ctx, j.blocks)
	if err != nil {
		return err
	}
	opt := a.options(j, dep)
	var dir *decode.Dir
	if *a.out != "" && *a.generation == 0 {
		if dir, err = a.openDir(j, opt, files); err != nil {
			return err
		}
		defer dir.Close()
		if dir.Done() == dir.Total() {
			return finishDecode(dir, j.tok, *a.bagOnly, *a.redact, nil) // nothing left to run: no weights needed
		}
	}
	var genOut *safefile.DirTx // -generation's directory, checked before the work
	if *a.out != "" && *a.generation > 0 {
		if genOut, err = files.BeginDir(*a.out); err != nil {
			return fmt.Errorf("decode: -out: %w", err)
		}
		defer genOut.Abort()
	}
	// The device last: everything above refuses without it, and a GPU that cannot run the decoder
	// is refused (or, for auto, left for the CPU) before the weights are read.
	runtime.LockOSThread() // a CUDA context is current per OS thread: keep the decoder's calls on one
	defer runtime.UnlockOSThread()
	be, err := openDecoderDevice(*a.device, func(line string) { fmt.Fprintln(os.Stderr, "decode: "+line) })
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	defer device.Close(be)
	return a.attack(ctx, j, opt, dir, genOut, files, be)
}

// checkFlags checks the flags that need nothing read: those that go together, -out, -split and
// -blocks.
func (a *decodeArgs) checkFlags() (*decodeJob, error) {
	if *a.modelDir == "" {
		return nil, errors.New("decode: -model DIR is required (a decoder directory; geloattack model init makes one)")
	}
	if err := checkDecoderDevice(*a.device); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if !(*a.branch > 0) || math.IsInf(*a.branch, 0) || !(*a.claimLead > 0) || math.IsInf(*a.claimLead, 0) {
		return nil, fmt.Errorf("decode: -branch %v and -claim-lead %v: want positive numbers of decades", *a.branch, *a.claimLead)
	}
	if *a.rankBagN > 0 && !*a.rank {
		return nil, fmt.Errorf("decode: -rank-bag %d needs -rank (the certified search tries the whole certified bag)", *a.rankBagN)
	}
	shard, err := longRunFlags(*a.out, *a.resume, *a.shardFlag, *a.generation)
	if err != nil {
		return nil, err
	}
	if err := checkOutDir(*a.out, map[string]string{"texts": *a.texts, "config": *a.cfgPath}); err != nil {
		return nil, err
	}
	split, err := data.ParseSplit(*a.splitName)
	if err != nil {
		return nil, fmt.Errorf("-split: %w", err)
	}
	var blocks []int
	for _, s := range strings.Split(*a.blocksFlag, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("-blocks %q: %q is not a block number", *a.blocksFlag, s)
		}
		blocks = append(blocks, b)
	}
	return &decodeJob{shard: shard, split: split, blocks: blocks}, nil
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
