package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/gelo-research/geloattack/baselines/decode"
	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data/deployer"
	"github.com/gelo-research/geloattack/extraction"
)

// deployer reads -deployer-rows (nil without the flag), checked against -model's config.json; the
// rows' dtype becomes the deployer's precision unless -deployer-precision is given.
func (a *decodeArgs) deployer(ctx context.Context, blocks []int) (decode.Deployer, error) {
	if *a.depRows == "" {
		return nil, nil
	}
	rows, err := deployer.ReadRows(ctx, *a.depRows, deployer.AttnInput, blocks)
	if err != nil {
		return nil, fmt.Errorf("decode: -deployer-rows: %w", err)
	}
	if err := rows.Info.CheckModel(*a.modelDir); err != nil {
		return nil, fmt.Errorf("decode: -deployer-rows: %w", err)
	}
	if !flagWasSet(a.fs, "deployer-precision") {
		*a.precision = rows.Info.DType
	}
	fmt.Fprintf(os.Stderr, "decode: the deployer's rows: %s, from %s\n", rows.Info.Stack(), *a.depRows)
	return deployerRows{rows}, nil
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
