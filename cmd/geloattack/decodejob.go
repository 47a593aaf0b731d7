package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/gelo-research/geloattack/runner"
)

// decodeJob is what prepare makes of decode's flags, config, model config, tokenizer and texts,
// before any weight is read.
type decodeJob struct {
	shard       decode.Shard
	split       data.Split
	blocks      []int // the attacked blocks, as -blocks lists them
	deepest     int   // the last block the forward pass computes
	sampler     gelo.Config
	replaceUTF8 bool // -invalid-utf8 replace
	model       llama.Config
	tok         extraction.Tokenizer
	ids         [][]int // the texts' tokens, BOS included, cut to -max-tokens
	textIDs     []int64 // the source's ids, so the split is the stores' and a trained decoder's
	// keep is the float32 the decoder may keep of converted 16-bit block weights (the memory
	// spare past the plan's budget), and keepWant all of it.
	keep, keepWant int64
}

// prepare refuses what config.json, the weight files' headers, the flags, the tokenizer and the
// texts can refuse before the weights are read: the model alone against the memory first, then
// the directory, then everything.
func (a *decodeArgs) prepare(ctx context.Context) (*decodeJob, error) {
	j, err := a.checkFlags()
	if err != nil {
		return nil, err
	}
	plan, err := a.checkModel(ctx, j)
	if err != nil {
		return nil, err
	}
	if err := a.readTexts(j, plan); err != nil {
		return nil, err
	}
	return j, nil
}

// checkModel resolves the sampler (the config's, with the override flags) and checks the model's
// config.json against the flags and the memory, and its directory.
func (a *decodeArgs) checkModel(ctx context.Context, j *decodeJob) (decodePlan, error) {
	cfg, err := loadConfig(*a.cfgPath)
	if err != nil {
		return decodePlan{}, err
	}
	if j.sampler, err = samplerOf(ctx, a.fs, cfg.Sampler); err != nil {
		return decodePlan{}, fmt.Errorf("decode: %w", err)
	}
	if j.replaceUTF8, err = a.replace(); err != nil {
		return decodePlan{}, fmt.Errorf("decode: %w", err)
	}
	if !hf.IsDecoderDir(*a.modelDir) {
		return decodePlan{}, fmt.Errorf("decode: %s is not a decoder directory (config.json with a Llama/Mistral/Qwen2/Qwen3ForCausalLM architecture)", *a.modelDir)
	}
	mc, err := hf.LoadConfig(*a.modelDir)
	if err != nil {
		return decodePlan{}, fmt.Errorf("decode: %w", err)
	}
	j.model = mc
	for _, b := range j.blocks {
		if b < 0 || b >= mc.Layers {
			return decodePlan{}, fmt.Errorf("decode: -blocks %q: block %d: the model has blocks 0..%d", *a.blocksFlag, b, mc.Layers-1)
		}
		j.deepest = max(j.deepest, b)
	}
	if *a.maxTokens > mc.MaxLen() {
		return decodePlan{}, fmt.Errorf("decode: -max-tokens %d: the model reads at most %d tokens (max_position_embeddings or sliding_window)", *a.maxTokens, mc.MaxLen())
	}
	if err := checkSetSize(j.sampler, *a.maxTokens, mc.Hidden); err != nil {
		return decodePlan{}, fmt.Errorf("decode: %w", err)
	}
	plan := decodePlan{cfg: mc, sc: j.sampler, maxTokens: *a.maxTokens, beam: *a.beam, rankBag: *a.rankBagN, blocks: j.blocks, deepest: j.deepest,
		bagOnly: *a.bagOnly, model: *a.depTexts == ""}
	if _, err := plan.budget(*a.modelDir).Check(); err != nil {
		return decodePlan{}, fmt.Errorf("decode: %w", err)
	}
	if _, err := hf.Check(*a.modelDir); err != nil {
		return decodePlan{}, fmt.Errorf("decode: %w", err)
	}
	return plan, nil
}

// readTexts opens the tokenizer, reads the source, checks the whole plan against the memory and
// tokenizes the first -max-texts texts of at least 2 tokens.
func (a *decodeArgs) readTexts(j *decodeJob, plan decodePlan) error {
	tok, err := openDecoderTokenizer(*a.modelDir, j.model.VocabSize)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	j.tok = tok
	var corpusList []string
	if *a.corpora != "" {
		corpusList = strings.Split(*a.corpora, ",")
	}
	src, err := corpus.ReadSourceWith(*a.texts, corpus.SourceOptions{Corpora: corpusList, ReplaceInvalidUTF8: j.replaceUTF8})
	if err != nil {
		return fmt.Errorf("decode: %w", utf8Hint(err))
	}
	plan.vocab, plan.src, plan.texts = tok.VocabSize(), src, min(*a.maxTexts, len(src.Texts))
	b := plan.budget(*a.modelDir)
	if err := preflight("decode", b); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if plan.model {
		j.keepWant = runner.ConvertedWeights(*a.modelDir, plan.cfg, plan.deepest+1)
		j.keep = runner.KeepConverted(b, j.keepWant)
	}
	for _, t := range src.Texts {
		if len(j.ids) == *a.maxTexts {
			break
		}
		enc, err := tok.Encode(t.Text, true)
		if err != nil {
			return fmt.Errorf("decode: text %d: %w", t.ID, err)
		}
		if len(enc) < 2 {
			continue
		}
		j.ids = append(j.ids, enc[:min(len(enc), *a.maxTokens)])
		j.textIDs = append(j.textIDs, t.ID)
	}
	if len(j.ids) < 8 {
		return fmt.Errorf("decode: %s gave %d texts of at least 2 tokens, want at least 8", *a.texts, len(j.ids))
	}
	return nil
}

// options are decode.Options of the flags and the job; dep is nil for the model's own forward.
func (a *decodeArgs) options(j *decodeJob, dep decode.Deployer) decode.Options {
	return decode.Options{Sampler: j.sampler, Split: j.split, Batches: *a.batches, Blocks: j.blocks,
		DeployerPrecision: *a.precision, Recompute: *a.rho, Deployer: dep,
		Beam: *a.beam, Branch: *a.branch, ClaimLead: *a.claimLead, TextIDs: j.textIDs, Rank: *a.rank, RankBag: *a.rankBagN, OrderTopK: *a.orderTopK, MaxSteps: *a.maxSteps, Joint: *a.joint, NoOrderMargin: *a.noOrder, BagOnly: *a.bagOnly}
}

// openDir opens -out for the batches (its options checked against the record on -resume) and says
// what it holds already.
func (a *decodeArgs) openDir(j *decodeJob, opt decode.Options, files *safefile.Files) (*decode.Dir, error) {
	rec, err := decodeRecord(decodeRun{modelDir: *a.modelDir, tok: j.tok, ids: j.ids, textIDs: j.textIDs, maxTexts: *a.maxTexts, maxTokens: *a.maxTokens,
		depRows: *a.depRows, opt: opt, shard: j.shard, files: files})
	if err != nil {
		return nil, err
	}
	dir, err := decode.OpenDir(*a.out, rec, *a.resume, files)
	if err != nil {
		return nil, err
	}
	for _, n := range dir.Notes {
		fmt.Fprintln(os.Stderr, "decode: "+n)
	}
	if dir.Done() > 0 {
		fmt.Fprintf(os.Stderr, "decode: resuming: %d of the %d batches of shard %s already in %s\n", dir.Done(), dir.Total(), j.shard, filepath.Join(*a.out, decode.ResultsFile))
	}
	return dir, nil
}
