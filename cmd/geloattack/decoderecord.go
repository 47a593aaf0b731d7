package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/hf"
)

// decodeRun is what the record of a decode's output directory is made from: the resolved options
// and what they read.
type decodeRun struct {
	modelDir            string
	tok                 extraction.Tokenizer
	ids                 [][]int
	textIDs             []int64
	maxTexts, maxTokens int
	depRows             string
	opt                 decode.Options
	shard               decode.Shard
	files               *safefile.Files
}

// decodeRecord is the output directory's options.json for r: every option that decides the
// results, by flag name, and three digests for what a flag's value does not pin. The texts are
// recorded as the sha256 of their source ids and token ids (texts_sha256), which -texts,
// -corpora, -max-texts, -max-tokens, -replace-invalid-utf8 and the tokenizer decide, so a
// source moved to another path resumes; the model as its absolute path and the sha256 of its
// config.json (the weights' bytes are not hashed: a model rewritten in place with the same
// config is not detected); the sampler key by key (the config's and the override flags'
// resolved values). -out, -resume, -redact and -quiet change no result and are not recorded.
func decodeRecord(r decodeRun) (decode.Record, error) {
	model, err := filepath.Abs(r.modelDir)
	if err != nil {
		return decode.Record{}, fmt.Errorf("decode: -model: %w", err)
	}
	cfgBytes, err := r.files.Read(filepath.Join(r.modelDir, hf.ConfigFile), safefile.ModelConfig)
	if err != nil {
		return decode.Record{}, fmt.Errorf("decode: %w", err)
	}
	depRows := ""
	if r.depRows != "" {
		if depRows, err = filepath.Abs(r.depRows); err != nil {
			return decode.Record{}, fmt.Errorf("decode: -deployer-rows: %w", err)
		}
	}
	o := r.opt
	blocks := make([]string, len(o.Blocks))
	for i, b := range o.Blocks {
		blocks[i] = strconv.Itoa(b)
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	settings := []decode.Setting{
		{Name: "model", Value: model},
		{Name: "model_config_sha256", Value: sha(cfgBytes)},
		{Name: "tokenizer", Value: r.tok.Hash()},
		{Name: "texts_sha256", Value: textsDigest(r.ids, r.textIDs)},
		{Name: "max-texts", Value: strconv.Itoa(r.maxTexts)},
		{Name: "max-tokens", Value: strconv.Itoa(r.maxTokens)},
		{Name: "split", Value: o.Split.String()},
		{Name: "blocks", Value: strings.Join(blocks, ",")},
		{Name: "beam", Value: strconv.Itoa(o.Beam)},
		{Name: "branch", Value: f(o.Branch)},
		{Name: "claim-lead", Value: f(o.ClaimLead)},
		{Name: "joint", Value: strconv.FormatBool(o.Joint)},
		{Name: "rank", Value: strconv.FormatBool(o.Rank)},
		{Name: "rank-bag", Value: strconv.Itoa(o.RankBag)},
		{Name: "order-topk", Value: f(o.OrderTopK)},
		{Name: "max-steps", Value: strconv.Itoa(o.MaxSteps)},
		{Name: "no-order-margin", Value: strconv.FormatBool(o.NoOrderMargin)},
		{Name: "bag-only", Value: strconv.FormatBool(o.BagOnly)},
		{Name: "deployer-precision", Value: o.DeployerPrecision},
		{Name: "recompute-error", Value: f(o.Recompute)},
		{Name: "deployer-rows", Value: depRows},
	}
	sampler, err := samplerSettings(o)
	if err != nil {
		return decode.Record{}, err
	}
	return decode.Record{Batches: o.Batches, Shard: r.shard, Settings: append(settings, sampler...)}, nil
}

// samplerSettings are the sampler's keys as "sampler.<key>", in name order, each its JSON value.
// tokens_per_text and token_sampling are left out: Run sets them from the texts.
func samplerSettings(o decode.Options) ([]decode.Setting, error) {
	b, err := json.Marshal(o.Sampler)
	if err != nil {
		return nil, fmt.Errorf("decode: recording the sampler: %w", err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("decode: recording the sampler: %w", err)
	}
	var out []decode.Setting
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if k == "tokens_per_text" || k == "token_sampling" {
			continue
		}
		out = append(out, decode.Setting{Name: "sampler." + k, Value: string(keys[k])})
	}
	return out, nil
}

// textsDigest is the sha256 of the texts decode draws from: each text's source id and token ids.
func textsDigest(ids [][]int, textIDs []int64) string {
	h := sha256.New()
	var buf [8]byte
	for i, t := range ids {
		binary.LittleEndian.PutUint64(buf[:], uint64(textIDs[i]))
		h.Write(buf[:])
		binary.LittleEndian.PutUint64(buf[:], uint64(len(t)))
		h.Write(buf[:])
		for _, v := range t {
			binary.LittleEndian.PutUint32(buf[:4], uint32(v))
			h.Write(buf[:4])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sha is the hex sha256 of b.
func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
