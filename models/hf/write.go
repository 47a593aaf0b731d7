package hf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gelo-research/geloattack/models/llama"
)

// Save writes m's weights to dir/model.safetensors in dtype (F32, F16 or BF16) and config to
// dir/config.json (indented), creating dir. config must describe m (ParseConfig of it gives m.Cfg);
// Save checks that, so that a directory it writes always loads.
func Save(dir string, config map[string]any, m *llama.Model, dtype string) error {
	sp := specs(m.Cfg)
	return save(dir, config, m.Cfg, dtype, func(i int) []float32 { return sp[i].get(m) })
}

// save writes config.json and model.safetensors, asking tensor for each tensor of specs(cfg) in
// order.
func save(dir string, config map[string]any, cfg llama.Config, dtype string, tensor func(i int) []float32) error {
	js, err := json.MarshalIndent(config, "", "  ")
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sp := specs(cfg)
	names, shapes := make([]string, len(sp)), make([][]int, len(sp))
	for i, s := range sp {
		names[i], shapes[i] = s.name, s.shape
	}
	path := filepath.Join(dir, WeightsFile)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = writeSafetensors(w, names, shapes, tensor, dtype)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save %s: %w", path, err)
	}
	return os.WriteFile(filepath.Join(dir, ConfigFile), append(js, '\n'), 0o644)
}
