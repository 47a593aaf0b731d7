package assess

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/extraction"
	"github.com/gelo-research/geloattack/models/bert"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/runner"
)

// learnedAttack is the learned text-presence attack (SPEC §4 retrieval head): a set transformer
// trained by `geloattack train` (task retrieval) on a store extracted from this model at an
// offloaded block reads that block's U and scores candidate texts by their embedding
// (extraction.DecoderEmbedding). Per prompt the candidates are the prompt and the batch's decoys
// (the fillers, texts not in the batch); the attack succeeds when it ranks the prompt first. That
// is a ranked guess, never a claim: a trained model proves nothing about a text, so its verdict
// is a top-1 rate beside its chance level (1 / candidates), with no claims and no wrong claims.
type learnedAttack struct{}

// learnedName is the learned attack's name in attacker.attacks.
const learnedName = "learned"

func (learnedAttack) Name() string { return learnedName }
func (learnedAttack) Success() string {
	return "ranks the prompt first among it and the batch's decoys (a ranked guess)"
}

// Claimed: a ranked guess claims nothing.
func (learnedAttack) Claimed() string   { return "" }
func (learnedAttack) Undecided() string { return "" }

func (learnedAttack) Budget(d Deployment) string {
	c := d.Attacker.LearnedCheckpoint
	return fmt.Sprintf("the retrieval model of %s (checkpoint step %d, trained on the store %s: attn-input rows of block %d); it reads U at block %d and scores each prompt and the batch's %d decoys by their embedding (%s); top-1 is a ranked guess beside its chance level 1/%d, never a claim",
		d.Attacker.Learned, c.Step, c.Store, c.Block, c.Block, d.Batch.TextsPerCall, extraction.DecoderEmbedding, d.Batch.TextsPerCall+1)
}

// Check: the attack needs a trained checkpoint (-learned RUN), and its block must be offloaded.
func (learnedAttack) Check(d Deployment) error {
	if d.Attacker.Learned == "" {
		return errors.New("no trained checkpoint for this model (attacker.learned, -learned RUN)")
	}
	if c := d.Attacker.LearnedCheckpoint; c.Path != "" && !slices.Contains(d.Offload.Blocks, c.Block) {
		return fmt.Errorf("its checkpoint reads block %d, which GELO does not offload (offload.blocks %v)", c.Block, d.Offload.Blocks)
	}
	return nil
}

// Run scores one batch: U at the checkpoint's block (drawn as presence and decode draw it), the
// embeddings of the batch's prompts and fillers, the model's score of each.
func (learnedAttack) Run(ctx context.Context, env *Env, u Unit) ([]Row, error) {
	lm, t := env.learned, env.Target
	if lm == nil {
		return nil, errors.New("learned: the checkpoint was not opened (Run opens it before the first batch)")
	}
	block := env.Deployment.Attacker.LearnedCheckpoint.Block
	b, err := drawBatch(ctx, env, u, []int{block})
	if err != nil {
		return nil, err
	}
	ex := b.examples[block]
	emb := make([]float32, 0, len(b.texts)*t.D) // (C, e): the batch's prompts, then the fillers
	for i, toks := range b.texts {
		e, err := lm.embedding(ctx, toks)
		if err != nil {
			return nil, fmt.Errorf("text %d: %w", b.ids[i], err)
		}
		emb = append(emb, e...)
	}
	scores, err := lm.model.Scores(settransformer.Batch{B: 1, N: ex.NObs, U: ex.UObs}, emb) // (1, C)
	if err != nil {
		return nil, fmt.Errorf("learned: %w", err)
	}
	fillers := scores[len(u.Prompts):]
	stats := BatchStats{Texts: len(u.Prompts), Clean: ex.NClean, Shields: ex.K, Observed: ex.NObs, Blocks: []int{block},
		Passes: len(b.texts)}
	rows := make([]Row, len(u.Prompts))
	for i, p := range u.Prompts {
		rank := 1
		for _, s := range fillers {
			if s >= scores[i] {
				rank++ // a tie is not a lead
			}
		}
		rows[i] = baseRow(env, u, i, p, stats)
		rows[i].Candidates, rows[i].Rank = 1+len(fillers), rank
		rows[i].Success = rank == 1
	}
	return rows, nil
}

// LearnedCheckpoint is what assess read of the -learned run, recorded in deployment.yaml (so that
// a resume against another checkpoint is refused): written by Run, never by hand.
type LearnedCheckpoint struct {
	// Path is the checkpoint file and Step its step.
	Path string `yaml:"path" json:"path"`
	Step int64  `yaml:"step" json:"step"`
	// Store is the store it was trained on and Block the block of its attn-input rows.
	Store string `yaml:"store" json:"store"`
	Block int    `yaml:"block" json:"block"`
}

// learnedModel is the opened checkpoint: the retrieval model on the CPU and what makes the
// candidates' embeddings.
type learnedModel struct {
	model *settransformer.Model
	be    engine.Backend
	lm    *causallm.Decoder // on be
	// special is the tokenizer's leading special tokens (BOS), which the embedding leaves out.
	special []int
}

// close releases the model's device.
func (l *learnedModel) close() { device.Close(l.be) }

// openLearned opens the latest checkpoint of the train run directory d.Attacker.Learned and
// checks it against the deployment: a retrieval model, trained on a decoder store extracted from
// this model (its name, architecture, tokenizer and width d) at the attn-input of a block GELO
// offloads, with raw rows. A mismatch is refused naming it. It returns the record deployment.yaml
// keeps.
func openLearned(d Deployment, t *Target) (*learnedModel, LearnedCheckpoint, error) {
	var rec LearnedCheckpoint
	fail := func(format string, args ...any) (*learnedModel, LearnedCheckpoint, error) {
		return nil, rec, fmt.Errorf("assess: -learned %s: "+format, append([]any{d.Attacker.Learned}, args...)...)
	}
	path, step, err := checkpoints.LatestPath(d.Attacker.Learned)
	if err != nil {
		return fail("not a train run directory with a checkpoint: %v", err)
	}
	ck, err := checkpoints.LoadCheckpoint(path)
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := runner.ConfigOf(ck)
	if err != nil {
		return fail("%v", err)
	}
	if cfg.Model.Task != settransformer.TaskRetrieval {
		return fail("the checkpoint is of task %s; the learned presence attack is task %s", cfg.Model.Task, settransformer.TaskRetrieval)
	}
	if cfg.Store.Path == "" {
		return fail("the checkpoint was trained on the synthetic store, not on a store extracted from this model (geloattack store extract -model %s)", d.Model)
	}
	rec = LearnedCheckpoint{Path: path, Step: step, Store: cfg.Store.Path}
	st, err := store.Open(runner.ExpandPath(cfg.Store.Path))
	if err != nil {
		return fail("its store: %v", err)
	}
	meta := st.Meta()
	st.Close()
	if err := matchStore(d, t, meta); err != nil {
		return fail("its store %s %v", cfg.Store.Path, err)
	}
	rec.Block = meta.Layer
	m := cfg.Model
	if m.InputDim == 0 {
		m.InputDim = meta.D
	}
	if m.CandidateDim == 0 {
		m.CandidateDim = meta.E
	}
	if m.InputDim != t.D || m.CandidateDim != t.D {
		return fail("the model reads rows of d = %d and embeddings of e = %d; this model's are %d", m.InputDim, m.CandidateDim, t.D)
	}
	be, err := device.Open("cpu", "", nil)
	if err != nil {
		return fail("%v", err)
	}
	model, err := settransformer.New(be, m, cfg.Seed)
	if err == nil {
		err = checkpoints.Restore(ck, model.Params(), nil)
	}
	if err != nil {
		device.Close(be)
		return fail("%v", err)
	}
	lm, err := causallm.NewDecoder(be, t.LM)
	if err != nil {
		device.Close(be)
		return fail("%v", err)
	}
	special, err := t.Tok.Encode("", true)
	if err != nil {
		device.Close(be)
		return fail("the tokenizer: %v", err)
	}
	return &learnedModel{model: model, be: be, lm: lm, special: special}, rec, nil
}

// matchStore says how a store's meta.json does not describe rows of this deployment's model at
// an offloaded block's attention input (nil when it does).
func matchStore(d Deployment, t *Target, meta store.Meta) error {
	dm := meta.Decoder
	switch {
	case dm == nil:
		return fmt.Errorf("is not a decoder store (no decoder section in meta.json): it was not extracted from %s", d.Model)
	case meta.Model != t.Name:
		return fmt.Errorf("was extracted from model %q; the deployment's is %q (config.json's _name_or_path, else the directory's name)", meta.Model, t.Name)
	case dm.Architecture != t.Architecture:
		return fmt.Errorf("was extracted from a %s; the deployment's model is a %s", dm.Architecture, t.Architecture)
	case dm.TokenizerHash != t.TokHash:
		return fmt.Errorf("was tokenized by tokenizer %s; the deployment's model's is %s", dm.TokenizerHash, t.TokHash)
	case meta.D != t.D:
		return fmt.Errorf("holds rows of d = %d; the deployment's model has d = %d", meta.D, t.D)
	case dm.Point != llama.AttnInput.String():
		return fmt.Errorf("holds %s rows; GELO offloads the q/k/v projection, which reads %s rows", dm.Point, llama.AttnInput)
	case meta.Norm != store.NormRaw:
		return fmt.Errorf("holds %s-normalised rows; the deployer mixes raw rows", meta.Norm)
	case !slices.Contains(d.Offload.Blocks, meta.Layer):
		return fmt.Errorf("holds block %d's rows, which GELO does not offload in this deployment (offload.blocks %v)", meta.Layer, d.Offload.Blocks)
	case dm.Embedding != extraction.DecoderEmbedding:
		return fmt.Errorf("embeds texts as %q; assess computes %q", dm.Embedding, extraction.DecoderEmbedding)
	}
	return nil
}

// embedding is a text's candidate embedding as extraction.DecoderEmbedding defines it, computed
// as extraction computes it: the mean of the final-norm rows over its tokens, the leading special
// tokens left out (unless they are all it has), L2-normalised (bert.MeanNormalized).
func (l *learnedModel) embedding(ctx context.Context, toks []int) ([]float32, error) {
	c := l.lm.Config()
	d := c.Hidden
	ids := make([]int32, len(toks))
	for i, tok := range toks {
		ids[i] = int32(tok)
	}
	first := 0
	if len(toks) > len(l.special) && slices.Equal(toks[:len(l.special)], l.special) {
		first = len(l.special)
	}
	out := make([]float32, d)
	// Only the final norm's rows are read: on a device the blocks' rows stay there.
	defer l.lm.TapOnly(causallm.TapPoint{Point: llama.Residual, Layer: c.Layers})()
	err := l.lm.Forward(ctx, [][]int32{ids}, func(p llama.Point, layer int, x []float32) error {
		if p == llama.Residual && layer == c.Layers {
			bert.MeanNormalized(x, first, len(toks), d, out)
		}
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return out, nil
}
