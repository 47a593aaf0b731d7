package settransformer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gelo-research/geloattack/internal/fptol"
	"github.com/gelo-research/geloattack/losses/ot"
)

// deviceMixed returns b (whose U is replaced) as a device-mixed batch: X (B, NX, d) and A
// (B, N, NX) random with NX = N+2 (odd shapes), padded rows of A and X zero, and the host
// batch whose U is A X formed in float64 and rounded once (the best a host GEMM can do).
func deviceMixed(b Batch, d int, seed uint64) (host, dev Batch) {
	rng := rand.New(rand.NewPCG(seed, 3))
	nx := b.N + 2
	dev = Batch{B: b.B, N: b.N, Mask: b.Mask, NX: nx, X: make([]float32, b.B*nx*d), A: make([]float32, b.B*b.N*nx)}
	for s := range b.B {
		for k := range nx - 1 { // X's last row is padding
			for l := range d {
				dev.X[(s*nx+k)*d+l] = float32(rng.NormFloat64())
			}
		}
		for i := range b.N {
			if b.Mask[s*b.N+i] == 0 {
				continue
			}
			for k := range nx - 1 {
				dev.A[(s*b.N+i)*nx+k] = float32(rng.NormFloat64() / math.Sqrt(float64(nx)))
			}
		}
	}
	host = Batch{B: b.B, N: b.N, Mask: b.Mask, U: make([]float32, b.B*b.N*d)}
	for s := range b.B {
		for i := range b.N {
			for l := range d {
				var u float64
				for k := range nx {
					u += float64(dev.A[(s*b.N+i)*nx+k]) * float64(dev.X[(s*nx+k)*d+l])
				}
				host.U[(s*b.N+i)*d+l] = float32(u)
			}
		}
	}
	return host, dev
}

// devMixTol bounds the relative difference of a loss or gradient between host and device
// mixing: U differs by a GEMM's summation order (inner size NX), which passes through the
// model's chain of products (two per layer, the projections in and out, the loss).
func devMixTol(cfg Config, nx int) float64 {
	return fptol.Chain(2*cfg.Layers+3, max(nx, cfg.InputDim, cfg.Hidden, cfg.MLPHidden), fptol.Float32)
}

// TestDeviceMixingGivesTheHostLoss: a retrieval step on a device-mixed batch (U = A X formed by
// the backend, here the CPU's) gives the loss and gradients of the same step on the host's U,
// within devMixTol, and its retrieval vectors likewise.
func TestDeviceMixingGivesTheHostLoss(t *testing.T) {
	cfg := testConfig()
	m := modelWith(t, cfg, testWeights(t, cfg, 51))
	b, tg := engineBatch(testBatch(cfg, 52))
	host, dev := deviceMixed(b, cfg.InputDim, 53)
	tol := devMixTol(cfg, dev.NX)
	run := func(b Batch) (float32, []float32, [][]float32) {
		out, err := m.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		q := out.Retrieval.ToHost()
		m.Params().ZeroGrad()
		loss, err := m.ForwardBackward(b, tg)
		if err != nil {
			t.Fatal(err)
		}
		return loss, q, gradsOf(m.Params())
	}
	lh, qh, gh := run(host)
	ld, qd, gd := run(dev)
	if math.Abs(float64(ld-lh)) > tol*math.Abs(float64(lh)) {
		t.Errorf("loss %v with device mixing, %v with host mixing (tol %.3g relative)", ld, lh, tol)
	}
	if !closeRel(qd, qh, tol) {
		t.Errorf("retrieval vectors differ beyond %.3g", tol)
	}
	for k, v := range m.Params().Views() {
		if !closeRel(gd[k], gh[k], tol) {
			t.Errorf("gradient of %s differs beyond %.3g", v.Name, tol)
		}
	}
	if _, err := m.Forward(Batch{B: dev.B, N: dev.N, Mask: dev.Mask, U: host.U, X: dev.X, A: dev.A, NX: dev.NX}); err == nil {
		t.Errorf("a batch with U and X, A was accepted")
	}
	if _, err := m.Forward(Batch{B: dev.B, N: dev.N, Mask: dev.Mask, X: dev.X, A: dev.A[1:], NX: dev.NX}); err == nil {
		t.Errorf("a batch with a short A was accepted")
	}
}

// TestUnmixDeviceMixingGivesTheHostLoss: the unmix step packs a device-mixed batch's rows of A
// (not of U) real-rows-first; loss, its terms and gradients equal the host-mixed step's within
// devMixTol, and Forward's predictions likewise.
func TestUnmixDeviceMixingGivesTheHostLoss(t *testing.T) {
	cfg, loss := testUnmixConfig(), testUnmixLoss(ot.Dustbin)
	m := unmixModelWith(t, cfg, loss, testUnmixWeights(t, cfg, loss, 54))
	b, tg := engineUnmixBatch(testUnmixBatch(cfg, 55))
	host, dev := deviceMixed(b, cfg.InputDim, 56)
	tol := devMixTol(cfg, dev.NX)
	run := func(b Batch) (float32, map[string]float64, []float32, [][]float32) {
		out, err := m.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		hHat := out.HHat.ToHost()
		m.Params().ZeroGrad()
		l, err := m.ForwardBackward(b, tg)
		if err != nil {
			t.Fatal(err)
		}
		return l, m.LossParts(), hHat, gradsOf(m.Params())
	}
	lh, ph, hh, gh := run(host)
	ld, pd, hd, gd := run(dev)
	if math.Abs(float64(ld-lh)) > tol*math.Abs(float64(lh)) {
		t.Errorf("loss %v with device mixing, %v with host mixing (tol %.3g relative)", ld, lh, tol)
	}
	for k, v := range ph {
		if math.Abs(pd[k]-v) > tol*math.Max(math.Abs(v), math.Abs(float64(lh))) {
			t.Errorf("loss term %s: %v with device mixing, %v with host mixing", k, pd[k], v)
		}
	}
	if !closeRel(hd, hh, tol) {
		t.Errorf("predicted rows differ beyond %.3g", tol)
	}
	for k, v := range m.Params().Views() {
		if !closeRel(gd[k], gh[k], tol) {
			t.Errorf("gradient of %s differs beyond %.3g", v.Name, tol)
		}
	}
}
