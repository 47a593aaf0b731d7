package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gelo-research/geloattack/checkpoints"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data"
	"github.com/gelo-research/geloattack/data/bpe"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/data/tokens"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/engine/device/devspec"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/causallm"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
	"github.com/gelo-research/geloattack/models/settransformer/modelcfg"
	"github.com/gelo-research/geloattack/tasks/lm"
	"github.com/gelo-research/geloattack/train"
)

// LMSession is what a language-model config (model.task lm) builds: the tokenizer, the token
// stream, the decoder on its device and the task.
type LMSession struct {
	Cfg       config.Run
	Tokenizer *bpe.Tokenizer
	Stream    *tokens.Stream
	Task      *lm.Task
	Backend   engine.Backend
	DeviceLog []string
	// Inputs identify the texts and tokenizer the session read; Paths are where it read them.
	Inputs Inputs
	Paths  LMPaths
	// tokJSON and tokConfig are the tokenizer's files as read (tokConfig nil: none), for the
	// run directory's copy.
	tokJSON, tokConfig []byte
}

// OpenLM reads the texts and the tokenizer of cfg.LM, tokenizes and splits them, and builds the
// decoder on the configured device. The session's Inputs are digests of exactly what it read.
func OpenLM(ctx context.Context, cfg config.Run) (*LMSession, error) {
	c := cfg.LM
	paths := LMPaths{Texts: ExpandPath(c.Texts), Tokenizer: ExpandPath(c.Tokenizer)}
	tj, tc, err := hf.ReadTokenizer(nil, paths.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("lm.tokenizer: %w", err)
	}
	tok, err := bpe.Parse(tj, tc, paths.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("lm.tokenizer: %w", err)
	}
	var corpora []string
	if c.Corpora != "" {
		corpora = strings.Split(c.Corpora, ",")
	}
	src, err := corpus.ReadSource(paths.Texts, corpora)
	if err != nil {
		return nil, fmt.Errorf("lm.texts: %w", err)
	}
	texts := src.Texts
	if c.MaxTexts > 0 && len(texts) > c.MaxTexts {
		texts = texts[:c.MaxTexts]
	}
	// The resource pre-flight (budget.go), before the texts are tokenized or the model built.
	warn, err := preflightLM(cfg, tok.VocabSize(), texts)
	if err != nil {
		return nil, err
	}
	inputs := Inputs{Texts: textsDigest(texts), Tokenizer: digest(tj), TokenizerConfig: configDigest(tc)}
	bos := -1
	if id, ok := tok.BOS(); ok {
		bos = id
	}
	stream, err := tokens.Build(ctx, texts, tok, bos, c.Model.Seq, c.ValFrac, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, fmt.Errorf("lm.texts %s: %w", c.Texts, err)
	}
	var lines []string
	if warn != "" {
		lines = append(lines, warn)
	}
	be, err := device.Open(cfg.Device, cfg.Precision, func(l string) { lines = append(lines, l) })
	if err != nil {
		return nil, err
	}
	if err := causallm.CheckBackend(be); err != nil && cfg.Device == devspec.Auto {
		// auto means "the best device that runs this": the CUDA backend lacks the decoder's
		// kernels so far, so the CPU it is, said once.
		lines = append(lines, fmt.Sprintf("task lm: the CPU computes (%s has no kernels for the language model's ops yet)", be.Name()))
		device.Close(be)
		if be, err = device.Open("cpu", cfg.Precision, func(l string) { lines = append(lines, l) }); err != nil {
			return nil, err
		}
	}
	model, err := causallm.New(be, c.Model, tok.VocabSize(), cfg.Seed)
	if err != nil {
		device.Close(be)
		return nil, err
	}
	task, err := lm.New(model, stream, cfg.Seed, cfg.Train.BatchSize, cfg.Train.EvalBatches)
	if err != nil {
		device.Close(be)
		return nil, err
	}
	return &LMSession{Cfg: cfg, Tokenizer: tok, Stream: stream, Task: task, Backend: be, DeviceLog: lines,
		Inputs: inputs, Paths: paths, tokJSON: tj, tokConfig: tc}, nil
}

// Close releases the device; the model's tensors must not be used afterwards.
func (s *LMSession) Close() { device.Close(s.Backend) }

// Describe is a one-line summary of the session for logs.
func (s *LMSession) Describe() string {
	st := s.Stream
	return fmt.Sprintf("language model on %s (%d train texts, %d tokens; %d val texts, %d tokens), tokenizer %s (%d ids), decoder %s with %d parameters, %d steps of %d windows",
		s.Cfg.LM.Texts, st.Texts[data.Train], st.Tokens[data.Train], st.Texts[data.Val], st.Tokens[data.Val],
		s.Cfg.LM.Tokenizer, st.Vocab, s.Cfg.LM.Model, s.Task.Params().Len(), s.Cfg.Train.Steps, s.Cfg.Train.BatchSize)
}

// metadata is what every checkpoint of an LM run carries: runMetadata and the digests of the
// session's inputs (MetaInputs).
func (s *LMSession) metadata() (map[string]string, error) {
	meta, err := runMetadata(s.Cfg.LM.Model, s.Cfg, s.Backend)
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(s.Inputs)
	if err != nil {
		return nil, err
	}
	meta[MetaInputs] = string(in)
	return meta, nil
}

// trainLM is TrainLocked for model.task lm, from the point where the directory and any resume
// checkpoint have been checked. A resumed run's inputs are compared with those its checkpoint
// recorded (see resumeInputs); the run directory keeps a copy of the tokenizer it trains with.
func trainLM(ctx context.Context, cfg config.Run, dir string, from *checkpoints.Checkpoint, o RunOptions, progress io.Writer) (train.Result, error) {
	sess, err := OpenLM(ctx, cfg)
	if err != nil {
		return train.Result{}, err
	}
	defer sess.Close()
	var header string
	var record map[string]any
	if from != nil {
		var note string
		header, note, record, err = resumeInputs(dir, *from, sess.Paths, sess.Inputs, o.AcceptChangedInputs)
		if err != nil {
			return train.Result{}, err
		}
		if note != "" {
			fmt.Fprintf(progress, "resume: note: %s\n", note)
		}
	}
	if err := recordRun(dir, cfg, sess.Task.Params(), from); err != nil {
		return train.Result{}, err
	}
	if err := writeRunTokenizer(dir, sess.tokJSON, sess.tokConfig); err != nil {
		return train.Result{}, fmt.Errorf("run %s: %w", dir, err)
	}
	meta, err := sess.metadata()
	if err != nil {
		return train.Result{}, err
	}
	fmt.Fprintf(progress, "run %s: %s\n", dir, sess.Describe())
	for _, l := range sess.DeviceLog {
		fmt.Fprintf(progress, "  %s\n", l)
	}
	if header != "" {
		fmt.Fprintf(progress, "  resume: %s\n", header)
	}
	res, err := train.TrainLM(ctx, train.LMRun{Dir: dir, Options: cfg.Train, Task: sess.Task, Metadata: meta,
		From: from, Seed: cfg.Seed, Progress: progress, ResumeRecord: record})
	if err != nil {
		return res, err
	}
	return res, train.WriteReport(dir, "geloattack language model "+cfg.Name, res)
}

// Exported is what ExportLM wrote.
type Exported struct {
	// Step is the training step of the checkpoint exported; Checkpoint its file.
	Step       int64
	Checkpoint string
	// Config is the decoder's architecture.
	Config llama.Config
	// Tokenizer is the tokenizer.json exported: the run's copy, or for a run made before runs
	// kept one, the file at its lm.tokenizer.
	Tokenizer string
	// Notes are remarks for the user, one sentence each: a tokenizer exported without a digest
	// to check it against.
	Notes []string
}

// ExportLM writes the newest good checkpoint of the language-model run in runDir as a Hugging
// Face directory out (config.json, model.safetensors in dtype, the run's tokenizer files and
// geloattack-run.json naming the run, step, config and tokenizer), which models/hf loads and
// `store extract -model` and `decode -model` read. out must be new or empty: it is built beside
// its name and renamed into place, so a failure leaves nothing.
//
// The tokenizer is the one the run trained with: the copy in runDir (RunTokenizerFile), checked
// against the digests the checkpoint recorded (MetaInputs), never whatever lies at the
// config's lm.tokenizer today. A run made before runs kept a copy falls back to lm.tokenizer,
// which must then match the checkpoint's digests; only a run older still, whose checkpoints
// record none, exports it unchecked, with a note saying so.
func ExportLM(runDir, out, dtype string) (Exported, error) {
	var files safefile.Files // the run's files are inputs: no write may replace one
	// The output first: an occupied -out is refused before the checkpoint is read, and the
	// directory is built beside its name and renamed into place, whole or not at all.
	tx, err := files.BeginDir(out)
	if err != nil {
		return Exported{}, err
	}
	defer tx.Abort() // nothing once committed
	ck, _, err := checkpoints.LoadLatestGood(runDir)
	if err != nil {
		return Exported{}, fmt.Errorf("export %s: %w", runDir, err)
	}
	if err := files.NoteInput(ck.Path); err != nil {
		return Exported{}, err
	}
	cfg, err := ConfigOf(ck)
	if err != nil {
		return Exported{}, fmt.Errorf("export %s: %w", ck.Path, err)
	}
	if cfg.Model.Task != modelcfg.TaskLM {
		return Exported{}, fmt.Errorf("export %s: a run of task %q, not a language model (task lm)", runDir, cfg.Model.Task)
	}
	tf, err := runTokenizer(&files, runDir, ck, ExpandPath(cfg.LM.Tokenizer))
	if err != nil {
		return Exported{}, fmt.Errorf("export %s: %w", runDir, err)
	}
	tok, err := bpe.Parse(tf.json, tf.config, tf.path)
	if err != nil {
		return Exported{}, fmt.Errorf("export %s: the run's tokenizer: %w", runDir, err)
	}
	be, err := device.Open("cpu", "fp32", nil)
	if err != nil {
		return Exported{}, err
	}
	defer device.Close(be)
	model, err := causallm.New(be, cfg.LM.Model, tok.VocabSize(), cfg.Seed)
	if err != nil {
		return Exported{}, err
	}
	if err := checkpoints.Restore(ck, model.Params(), nil); err != nil {
		return Exported{}, fmt.Errorf("export: %w", err)
	}
	host, err := model.Export(nil)
	if err != nil {
		return Exported{}, err
	}
	bos, eos := -1, -1
	if id, ok := tok.BOS(); ok {
		bos = id
	}
	if id, ok := tok.TokenID("</s>"); ok {
		eos = id
	}
	if err := hf.Save(tx.Path(), model.HFConfig(bos, eos), host, dtype); err != nil {
		return Exported{}, err
	}
	if err := files.WriteFileAtomic(filepath.Join(tx.Path(), RunTokenizerFile), tf.json); err != nil {
		return Exported{}, err
	}
	if tf.config != nil {
		if err := files.WriteFileAtomic(filepath.Join(tx.Path(), RunTokenizerConfigFile), tf.config); err != nil {
			return Exported{}, err
		}
	}
	prov, err := json.MarshalIndent(map[string]any{"run": runDir, "checkpoint": ck.Path, "step": ck.State.Step, "config": cfg,
		"tokenizer": map[string]any{"from": tf.path, "sha256": digest(tf.json), "checked": tf.checked}}, "", "  ")
	if err != nil {
		return Exported{}, err
	}
	if err := files.WriteFileAtomic(filepath.Join(tx.Path(), "geloattack-run.json"), append(prov, '\n')); err != nil {
		return Exported{}, err
	}
	if err := tx.Commit(); err != nil {
		return Exported{}, err
	}
	ex := Exported{Step: ck.State.Step, Checkpoint: ck.Path, Config: model.LlamaConfig(), Tokenizer: tf.path}
	if tf.note != "" {
		ex.Notes = append(ex.Notes, tf.note)
	}
	return ex, nil
}

// tokenizerFiles are a run's tokenizer as ExportLM found it.
type tokenizerFiles struct {
	json, config []byte // config nil: no tokenizer_config.json
	path         string // the tokenizer.json read
	checked      bool   // whether it matched digests the checkpoint recorded
	note         string // why it was not checked
}

// runTokenizer finds the tokenizer checkpoint ck of the run in runDir trained with: the run's
// copy, else (a run made before copies) the file at recorded, the run's lm.tokenizer. Either
// must match the digests ck recorded, when it recorded them.
func runTokenizer(files *safefile.Files, runDir string, ck checkpoints.Checkpoint, recorded string) (tokenizerFiles, error) {
	want, haveDigests, err := inputsOf(ck)
	if err != nil {
		return tokenizerFiles{}, err
	}
	tf := tokenizerFiles{path: filepath.Join(runDir, RunTokenizerFile)}
	what := "the run's copy of its tokenizer"
	tf.json, tf.config, err = readRunTokenizer(files, runDir)
	if errors.Is(err, fs.ErrNotExist) {
		// A run made before runs kept a copy: the recorded path is all there is.
		tf.path, what = recorded, "the tokenizer at the run's lm.tokenizer (the run holds no copy: made before geloattack kept one)"
		tf.json, tf.config, err = hf.ReadTokenizer(files, recorded)
	}
	if err != nil {
		return tokenizerFiles{}, fmt.Errorf("the run's tokenizer: %w", err)
	}
	if !haveDigests {
		tf.note = fmt.Sprintf("checkpoint %s records no digest of its tokenizer (a run made before geloattack recorded them): %s exported unchecked", ck.Path, tf.path)
		return tf, nil
	}
	got := Inputs{Texts: want.Texts, Tokenizer: digest(tf.json), TokenizerConfig: configDigest(tf.config)}
	if ch := want.changes(got, "", tf.path); len(ch) > 0 {
		var diffs []string
		for _, c := range ch {
			diffs = append(diffs, c.String())
		}
		return tokenizerFiles{}, fmt.Errorf("%s, %s, is not the tokenizer checkpoint %s trained with: %s",
			what, tf.path, ck.Path, strings.Join(diffs, "; "))
	}
	tf.checked = true
	return tf, nil
}

// LoadTokenizer reads a tokenizer.json, and the tokenizer_config.json beside it when there is
// one, through files (nil: a door without a memory of inputs; see hf.ReadTokenizer), and builds
// the BPE tokenizer from them. Reading through the door, not bpe.Load, is what refuses a FIFO,
// a device or a huge file at once.
func LoadTokenizer(files *safefile.Files, path string) (*bpe.Tokenizer, error) {
	j, c, err := hf.ReadTokenizer(files, path)
	if err != nil {
		return nil, err
	}
	return bpe.Parse(j, c, path)
}
