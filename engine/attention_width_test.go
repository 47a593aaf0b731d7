package engine_test

import (
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// TestAttentionRefusesZeroWidth: q, k, v of width 0 divide into any number of heads of width 0,
// which no kernel can run (BLAS refuses a leading dimension of 0, the register-block kernel
// indexes an empty row); the ops refuse them with a tape error naming the op instead of a panic.
func TestAttentionRefusesZeroWidth(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"Attention", "CausalAttention"} {
		tp := engine.NewTape(be)
		x := tp.Input(nil, 1, 3, 0) // (B 1, N 3, h 0)
		if op == "Attention" {
			tp.Attention(x, x, x, nil, 2)
		} else {
			tp.CausalAttention(x, x, x, 2, 1)
		}
		if err := tp.Err(); err == nil || !strings.Contains(err.Error(), op) {
			t.Errorf("%s of width 0: error %v, want a refusal naming %s", op, err, op)
		}
	}
}
