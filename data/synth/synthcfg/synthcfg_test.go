package synthcfg_test

import (
	"testing"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/data/synth/synthcfg"
)

// The leaf's dtype names are the store's, so a synthetic config's dtype is one the store writes.
func TestDTypesAreTheStores(t *testing.T) {
	if synthcfg.Float16 != store.Float16 || synthcfg.Float32 != store.Float32 {
		t.Fatalf("synthcfg dtypes %q, %q; store's %q, %q", synthcfg.Float16, synthcfg.Float32, store.Float16, store.Float32)
	}
}
