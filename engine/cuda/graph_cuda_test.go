package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
)

// failingCapture is the device's graph driver with every capture failing before it starts: the
// fallback path on a real device.
type failingCapture struct{ *deviceGraphs }

func (failingCapture) capture(*cmdList) (uintptr, error) {
	return 0, errors.New("capture refused by the test")
}

// TestGraphStepMatchesEagerCUDA trains the stub model (an attention block: GEMMs, fused kernels,
// scratch buffers, uploads, the loss read back) for 8 steps with clipping and AdamW on four
// backends of one precision: graphs off, record (the graph path issued call by call), on, and on
// with every capture failing. Each step's batch is new data; step 5 has a smaller set size (a
// different list, run eagerly between replays). Losses and every parameter after the last step
// must be bit for bit those of the record backend, and of the backend without graphs; graphs on
// must have replayed, and the failing one must have fallen back and turned itself off.
func TestGraphStepMatchesEagerCUDA(t *testing.T) {
	const B, N, d = 3, 20, 64
	sizes := []int{N, N, N, N, N - 5, N, N, N}
	// Skip here without a GPU: a parent whose subtests all skip would pass, checking nothing.
	newTestBackend(t, PrecisionFP32)
	for _, prec := range []string{PrecisionFP32, PrecisionBF16} {
		t.Run(prec, func(t *testing.T) {
			type run struct {
				be     *Backend
				losses []float32
				params []float32
			}
			open := func(mode GraphMode) *run {
				return &run{be: openTestBackend(t, BackendOptions{Precision: prec, Graphs: mode, GraphLog: testLog{t}})}
			}
			runs := map[string]*run{"off": open(GraphsOff), "record": open(GraphsRecord), "on": open(GraphsOn), "failing": open(GraphsOn)}
			fb := runs["failing"].be
			if fb.graphs.mode == GraphsOn {
				fb.graphs.drv = failingCapture{fb.gdrv}
			}
			for name, r := range runs {
				m := newStubModel(t, r.be, d)
				rng := rand.New(rand.NewPCG(5, 6))
				w := make([]float32, m.ps.Len())
				for i := range w {
					w[i] = float32(rng.NormFloat64() * 0.2)
				}
				r.be.Upload(m.ps.Data(), w)
				opt, err := engine.NewAdamW(m.ps, engine.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
				if err != nil {
					t.Fatal(err)
				}
				for i, n := range sizes {
					r.be.BeginStep()
					r.losses = append(r.losses, m.step(t, B, n, d, uint64(100+i)))
					r.be.EndStep()
					engine.ClipGradNorm(m.ps, 1)
					opt.Step()
					m.ps.ZeroGrad()
				}
				r.params = m.ps.Data().ToHost()
				if err := r.be.Sync(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				t.Logf("%s %s: %s", prec, name, r.be.GraphStats())
			}
			on := runs["on"].be.GraphStats()
			if on.Mode != "on" {
				t.Fatalf("graphs did not stay on: %s", on)
			}
			if on.Replayed < 3 || on.Captured < 1 || on.Fallbacks != 0 {
				t.Errorf("graphs on replayed %d steps and captured %d (fallbacks %d), want >= 3, >= 1, 0: %s", on.Replayed, on.Captured, on.Fallbacks, on)
			}
			if st := fb.GraphStats(); st.Fallbacks == 0 || st.Replayed != 0 {
				t.Errorf("failing captures: %s", st)
			}
			if math.IsNaN(float64(runs["off"].losses[0])) || runs["off"].losses[0] == 0 {
				t.Fatalf("losses %v: the stub model computes nothing", runs["off"].losses)
			}
			for _, pair := range [][2]string{{"on", "record"}, {"on", "off"}, {"failing", "off"}, {"record", "off"}} {
				a, b := runs[pair[0]], runs[pair[1]]
				if !slices.Equal(bits(a.losses), bits(b.losses)) {
					t.Errorf("%s: losses with graphs %s %v, %s %v: not bit for bit", prec, pair[0], a.losses, pair[1], b.losses)
				}
				if i := firstBitDiff(a.params, b.params); i >= 0 {
					t.Errorf("%s: parameter %d after %d steps: %s %v, %s %v (not bit for bit)", prec, i, len(sizes), pair[0], a.params[i], pair[1], b.params[i])
				}
			}
		})
	}
}

// testLog writes graph mode's log lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// bits is the IEEE bits of each value (so that NaN compares equal to itself).
func bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// firstBitDiff is the first index where a and b differ in bits, or -1.
func firstBitDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}
