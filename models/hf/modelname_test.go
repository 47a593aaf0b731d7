package hf

import (
	"os"
	"path/filepath"
	"testing"
)

// ModelName reads _name_or_path through a link (a Hugging Face cache snapshot's config.json is
// one) and falls back to the directory's name.
func TestModelName(t *testing.T) {
	root := t.TempDir()
	blob := filepath.Join(root, "blob")
	if err := os.WriteFile(blob, []byte(`{"_name_or_path": "meta-llama/Llama-2-7b-hf"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(root, "snapshot")
	if err := os.Mkdir(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(blob, filepath.Join(snap, ConfigFile)); err != nil {
		t.Fatal(err)
	}
	if got := ModelName(nil, snap); got != "meta-llama/Llama-2-7b-hf" {
		t.Errorf("through a link: %q", got)
	}
	bare := filepath.Join(root, "my-model")
	if err := os.Mkdir(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bare, ConfigFile), []byte(`{"hidden_size": 8}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ModelName(nil, bare); got != "my-model" {
		t.Errorf("without _name_or_path: %q, want the directory's name", got)
	}
}
