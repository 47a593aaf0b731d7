package hf

import (
	"bufio"
	"fmt"
	"path/filepath"

	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/llama"
)

// Save writes m's weights to dir/model.safetensors in dtype (F32, F16 or BF16) and config to
// dir/config.json (indented). dir must be new or empty: it is built beside its final name and
// renamed into place, so a failure leaves nothing. config must describe m (ParseConfig of it
// gives m.Cfg); Save checks that, so that a directory it writes always loads. Numbers keep their
// kind (configjson.go): ints and json.Number values are written as they are, float64 values as
// Python writes floats ("factor": 8.0), so a config decoded from JSON must keep its numbers as
// json.Number (LikeConfig does).
func Save(dir string, config map[string]any, m *llama.Model, dtype string) error {
	tx, err := safefile.BeginDir(dir)
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	defer tx.Abort() // nothing once committed
	if m.Blocks() < m.Cfg.Layers {
		return fmt.Errorf("save: the model holds blocks 0..%d of %d", m.Blocks()-1, m.Cfg.Layers)
	}
	sp := specs(m.Cfg, m.Cfg.Layers)
	var buf []float32 // one tensor at a time, converted from how the model holds it
	err = save(nil, tx.Path(), config, m.Cfg, dtype, func(i int) ([]float32, error) {
		if n := sp[i].Elems(); cap(buf) < n {
			buf = make([]float32, n)
		}
		buf = buf[:sp[i].Elems()]
		return buf, m.Read(sp[i].Part, sp[i].Block, buf)
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}

// save writes config.json and model.safetensors into the existing directory dir through files,
// asking tensor for each tensor of specs(cfg) in order.
func save(files *safefile.Files, dir string, config map[string]any, cfg llama.Config, dtype string, tensor func(i int) ([]float32, error)) error {
	js, err := marshalConfig(config)
	if err != nil {
		return fmt.Errorf("save %s: config: %w", dir, err)
	}
	c, err := ParseConfig(js)
	if err != nil {
		return fmt.Errorf("save %s: config: %w", dir, err)
	}
	if c != cfg {
		return fmt.Errorf("save %s: config.json describes %+v, the model is %+v", dir, c, cfg)
	}
	sp := specs(cfg, cfg.Layers)
	names, shapes := make([]string, len(sp)), make([][]int, len(sp))
	for i, s := range sp {
		names[i], shapes[i] = s.name, s.Shape
	}
	f, err := files.CreateAtomic(filepath.Join(dir, WeightsFile))
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = writeSafetensors(w, names, shapes, tensor, dtype)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Abort()
		return fmt.Errorf("save %s: %w", f.Path(), err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("save: %w", err)
	}
	return files.WriteFileAtomic(filepath.Join(dir, ConfigFile), append(js, '\n'))
}
