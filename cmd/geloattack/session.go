package main

import (
	"encoding/json"
	"fmt"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/configs"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/synth"
	"github.com/gelo-research/geloattack/models/settransformer"
	"github.com/gelo-research/geloattack/train"
)

// Checkpoint metadata keys: SPEC §4 puts the model config under "config"; the whole resolved run
// config goes beside it so that `eval` can rebuild the sampler from a checkpoint alone.
const metaRunConfig = "run_config"

// loadConfig reads -config, or the embedded quickstart when the flag is empty.
func loadConfig(path string) (config.Run, error) {
	if path == "" {
		src, err := configs.Read(configs.Quickstart)
		if err != nil {
			return config.Run{}, err
		}
		return config.Parse("configs/"+configs.Quickstart+" (embedded)", src)
	}
	return config.Load(path)
}

// session is everything a resolved config builds: the corpus, the sampler, the model and its task.
type session struct {
	cfg     config.Run
	corpus  data.Corpus
	sampler *gelo.Sampler
	task    train.Task
	model   *settransformer.Model
	close   func() error
}

// openCorpus opens the configured store, or generates the embedded synthetic one.
func openCorpus(cfg config.Run) (data.Corpus, func() error, error) {
	if cfg.Store.Path != "" {
		s, err := store.Open(cfg.Store.Path)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	c, err := synth.Generate(cfg.Store.Synth)
	if err != nil {
		return nil, nil, fmt.Errorf("synthetic store: %w", err)
	}
	return c, func() error { return nil }, nil
}

// newSession builds the corpus, sampler and model of cfg. The model's input and candidate widths
// come from the store when the config leaves them at 0, and must match it otherwise.
func newSession(cfg config.Run) (*session, error) {
	corpus, closeFn, err := openCorpus(cfg)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*session, error) {
		closeFn()
		return nil, err
	}
	m := &cfg.Model
	if m.InputDim == 0 {
		m.InputDim = corpus.D()
	}
	if m.CandidateDim == 0 {
		m.CandidateDim = corpus.E()
	}
	if m.InputDim != corpus.D() {
		return fail(fmt.Errorf("model.input_dim = %d but the store's rows have d = %d", m.InputDim, corpus.D()))
	}
	if m.Task == settransformer.TaskRetrieval && m.CandidateDim != corpus.E() {
		return fail(fmt.Errorf("model.candidate_dim = %d but the store's text embeddings have e = %d", m.CandidateDim, corpus.E()))
	}
	sampler, err := gelo.NewSampler(corpus, cfg.Sampler)
	if err != nil {
		return fail(err)
	}
	s := &session{cfg: cfg, corpus: corpus, sampler: sampler, close: closeFn}
	switch m.Task {
	case settransformer.TaskRetrieval:
		model, err := settransformer.New(*m, cfg.Seed)
		if err != nil {
			return fail(err)
		}
		s.model = model
		s.task = train.NewRetrieval(model, sampler, cfg.Loss.ExtraNegatives, cfg.Seed)
	default:
		return fail(fmt.Errorf("model.task %q is not supported by this build", m.Task))
	}
	return s, nil
}

// metadata is what every checkpoint of the session carries.
func (s *session) metadata() (map[string]string, error) {
	model, err := json.Marshal(s.cfg.Model)
	if err != nil {
		return nil, err
	}
	run, err := json.Marshal(s.cfg)
	if err != nil {
		return nil, err
	}
	return map[string]string{"config": string(model), metaRunConfig: string(run)}, nil
}

// storeName describes where the hidden states come from.
func storeName(cfg config.Run) string {
	if cfg.Store.Path != "" {
		return "store " + cfg.Store.Path
	}
	return "embedded synthetic store"
}
