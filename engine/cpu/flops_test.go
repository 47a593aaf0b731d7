package cpu_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
)

// TestGemmFLOPs: the counter adds 2·m·n·k per product of a batched Gemm cut into tiles (the
// tiles' shares add up to the whole), and for masked attention 2 products of 2·Nq·nk·dh per
// (batch, head) forward, over the real keys nk of each set only, then 5 more in the backward
// (the recomputed scores, dV, dP, dQ, dK).
func TestGemmFLOPs(t *testing.T) {
	be, err := cpu.New(cpu.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	r := rand.New(rand.NewPCG(5, 1))
	tp := engine.NewTape(be)
	const batch, m, n, k = 2, 4100, 16, 8 // four row tiles per product (gemmTiles)
	a, b, c := tp.Input(randn(r, batch*m*k), batch*m*k), tp.Input(randn(r, batch*k*n), batch*k*n), tp.Input(make([]float32, batch*m*n), batch*m*n)
	f0 := be.GemmFLOPs()
	be.Gemm(false, false, batch, m, n, k, 1, a, b, 0, c)
	if got, want := be.GemmFLOPs()-f0, int64(2*batch*m*n*k); got != want {
		t.Errorf("batched Gemm counted %d FLOPs, want %d", got, want)
	}

	const B, N, h, heads = 2, 7, 12, 3
	dh := h / heads
	mask := []float32{1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0} // 5 and 4 real keys
	real := []int{5, 4}
	q := tp.Variable(randn(r, B*N*h), B, N, h)
	kk := tp.Variable(randn(r, B*N*h), B, N, h)
	v := tp.Variable(randn(r, B*N*h), B, N, h)
	f0 = be.GemmFLOPs()
	o := tp.Attention(q, kk, v, tp.Input(mask, B, N), heads)
	var perProduct int64 // 2·Nq·nk·dh summed over (batch, head)
	for _, nk := range real {
		perProduct += int64(heads * 2 * N * nk * dh)
	}
	if got := be.GemmFLOPs() - f0; got != 2*perProduct {
		t.Errorf("attention forward counted %d FLOPs, want %d", got, 2*perProduct)
	}
	f0 = be.GemmFLOPs()
	if err := tp.Backward(tp.Sum(o)); err != nil {
		t.Fatal(err)
	}
	if got := be.GemmFLOPs() - f0; got != 5*perProduct {
		t.Errorf("attention backward counted %d FLOPs, want %d", got, 5*perProduct)
	}
}
