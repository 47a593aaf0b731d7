package runner

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/gelo"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/models/settransformer"
)

// SkipPreflightEnv names the environment variable that turns the resource pre-flight into a
// warning (any non-empty value), for the rare machine whose available memory is misreported or a
// user who knows the estimate is too high.
const SkipPreflightEnv = "GELOATTACK_SKIP_PREFLIGHT"

// Estimate is what a run config needs, by part, in bytes. It is an upper estimate from the shapes
// alone, computed before anything large is allocated so a config that cannot fit is refused with
// the figures instead of ending in "out of memory". Against the tape's measured arena plus
// gradient pool it is 1.2 to 1.8 times above (bench presets tiny and small and the test models,
// both tasks; runner's TestEstimateBoundsMeasuredActivations keeps it above).
type Estimate struct {
	// Params is the number of model parameters.
	Params int64
	// Optimizer is weights, gradients and the two AdamW moments (16 bytes a parameter), plus the
	// host buffer a checkpoint is serialised into (12 bytes a parameter).
	Optimizer int64
	// Activations is the activation arena and the activation-gradient pool of one step at the
	// largest set size the sampler can produce.
	Activations int64
	// Pipeline is the prefetched batches and the generators' scratch (A and its QR).
	Pipeline int64
	// Store is the synthetic store held in memory (0 for a store on disk, which is mapped).
	Store int64
	// Mapped is the size of a store on disk; it is mapped, so the page cache holds what is read,
	// and it is not counted against available memory.
	Mapped int64
	// OnDevice is true when weights and activations live on a GPU.
	OnDevice bool
	// MaxN is the largest padded set size (rows per example, CLS included).
	MaxN int
}

// runtimeOverhead is the Go runtime, the binary and the BLAS threads' buffers.
const runtimeOverhead = 96 << 20

// Host is the host memory the run needs.
func (e Estimate) Host() int64 {
	h := e.Pipeline + e.Store + runtimeOverhead
	if e.OnDevice {
		return h + 12*e.Params // the checkpoint's host copy
	}
	return h + e.Optimizer + e.Activations
}

// Device is the GPU memory the run needs (0 on the CPU).
func (e Estimate) Device() int64 {
	if !e.OnDevice {
		return 0
	}
	return 18*e.Params + e.Activations // with a bf16 copy of the weights (engine/cuda's AdamW)
}

// String is one line with the parts.
func (e Estimate) String() string {
	s := fmt.Sprintf("%.1fM parameters; weights+grads+AdamW %s, activations %s at %d rows/example, pipeline %s",
		float64(e.Params)/1e6, bytesText(16*e.Params), bytesText(e.Activations), e.MaxN, bytesText(e.Pipeline))
	if e.Store > 0 {
		s += ", synthetic store " + bytesText(e.Store)
	}
	if e.Mapped > 0 {
		s += ", store mapped from disk " + bytesText(e.Mapped) + " (page cache, not counted)"
	}
	return s
}

// EstimateRun estimates what cfg needs once the store's widths d (rows) and e (text embeddings)
// are known; mapped is the size of a store on disk (0 for the synthetic one).
func EstimateRun(cfg config.Run, d, e int, mapped int64, onDevice bool) (Estimate, error) {
	m := cfg.Model
	if m.InputDim == 0 {
		m.InputDim = d
	}
	if m.CandidateDim == 0 {
		m.CandidateDim = e
	}
	params, err := settransformer.NumParams(m)
	if err != nil {
		return Estimate{}, err
	}
	est := Estimate{Params: int64(params), Mapped: mapped, OnDevice: onDevice}
	est.Optimizer = 28 * est.Params

	// Sizes in float32 elements, in float64 so no product overflows.
	B := float64(cfg.Train.BatchSize)
	n := float64(gelo.PadN(cfg.Sampler.MaxN(), cfg.Train.Bucket(cfg.Sampler)))
	h, mlp, L, H := float64(m.Hidden), float64(m.MLPHidden), float64(m.Layers), float64(m.Heads)
	D := float64(m.InputDim)
	perRow := 10*h + 3*mlp // what one block saves per row: norms, q k v, projections, residuals, MLP
	np := n
	if m.Task != settransformer.TaskUnmix {
		np++ // the CLS row
	}
	act := L*B*np*perRow + L*H*B*np*np + 2*B*n*D
	switch m.Task {
	case settransformer.TaskUnmix:
		S, Ld := float64(m.Slots), float64(m.DecLayers)
		act += Ld * (B*S*perRow + H*B*S*(S+n))
		act += 10 * B * max(S, n) * D // slot rows to d, A_hat, reconstruction and the cycle
		act += 2 * float64(cfg.Loss.Unmix.Iters) * B * S * n
	default:
		C := B*float64(cfg.Sampler.Positives.Max) + float64(cfg.Loss.ExtraNegatives)
		E := float64(m.CandidateDim)
		act += C*(E+2*h) + 2*B*C
	}
	act *= 1.5 // the activation-gradient pool (about a fifth of the arena when measured), and headroom
	w := float64(cfg.Train.Workers)
	pipe := (float64(cfg.Train.Prefetch)+w+1)*B*n*D*4*2 + w*3*n*n*8
	if cfg.Train.MixOnDevice(!onDevice) {
		// Device mixing: each batch carries A (B, n, n) beside X, and the step holds X, A and the
		// U it forms on the device (tasks.MixOnDevice).
		pipe += (float64(cfg.Train.Prefetch) + w + 1) * B * n * n * 4
		act += B*n*n + 2*B*n*D
	}
	est.Activations = clampBytes(act * 4)
	est.Pipeline = clampBytes(pipe)
	est.MaxN = int(np)
	if cfg.Store.Path == "" {
		s := cfg.Store.Synth.WithDefaults()
		tokens := float64(s.Texts) * float64(s.MinTokens+s.MaxTokens) / 2
		est.Store = clampBytes(tokens*float64(s.D)*4 + float64(s.Texts)*float64(s.E)*4)
	}
	return est, nil
}

// clampBytes converts a float byte count, saturating far beyond any machine.
func clampBytes(x float64) int64 {
	if x > 1<<62 {
		return 1 << 62
	}
	return int64(x)
}

// CheckHost refuses an estimate over the host memory available (MemAvailable, and the cgroup's
// limit when one is set). With GELOATTACK_SKIP_PREFLIGHT set, it returns a warning instead.
func (e Estimate) CheckHost(what string) (warning string, err error) {
	avail, src, aerr := hostAvailable()
	if aerr != nil {
		return fmt.Sprintf("resource pre-flight: host memory unknown (%v); not checked", aerr), nil
	}
	need := e.Host()
	if need <= avail {
		return "", nil
	}
	msg := fmt.Sprintf("resource pre-flight: %s needs about %s of host memory but %s is available (%s): %s; "+
		"reduce model.hidden, model.layers, train.batch_size, sampler.positives x tokens_per_text or store.synth.texts "+
		"(set %s=1 to run anyway)", what, bytesText(need), bytesText(avail), src, e, SkipPreflightEnv)
	if os.Getenv(SkipPreflightEnv) != "" {
		return "warning: " + msg, nil
	}
	return "", fmt.Errorf("%s", msg)
}

// CheckDevice refuses an estimate over the free memory of the device.
func (e Estimate) CheckDevice(what, device string, free int64) (warning string, err error) {
	need := e.Device()
	if need <= free {
		return "", nil
	}
	msg := fmt.Sprintf("resource pre-flight: %s needs about %s of memory on %s but %s is free: %s; "+
		"reduce model.hidden, model.layers, train.batch_size or sampler.positives x tokens_per_text (set %s=1 to run anyway)",
		what, bytesText(need), device, bytesText(free), e, SkipPreflightEnv)
	if os.Getenv(SkipPreflightEnv) != "" {
		return "warning: " + msg, nil
	}
	return "", fmt.Errorf("%s", msg)
}

// hostAvailable is the memory this process can still take: MemAvailable of /proc/meminfo, or the
// cgroup v2 limit's headroom, or what the address-space limit (ulimit -v) leaves, whichever is
// lowest.
func hostAvailable() (int64, string, error) {
	b, err := safefile.Read("/proc/meminfo", safefile.Kernel)
	if err != nil {
		return 0, "", err
	}
	var avail int64 = -1
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, "", fmt.Errorf("/proc/meminfo: MemAvailable: %w", err)
			}
			avail = kb << 10
		}
	}
	if avail < 0 {
		return 0, "", fmt.Errorf("/proc/meminfo: no MemAvailable")
	}
	src := "MemAvailable"
	if lim, ok := readInt("/sys/fs/cgroup/memory.max"); ok {
		if cur, ok := readInt("/sys/fs/cgroup/memory.current"); ok && lim-cur < avail {
			avail, src = max(lim-cur, 0), "cgroup memory.max headroom"
		}
	}
	if left, ok := addressSpaceLeft(); ok && left < avail {
		avail, src = left, "address-space limit (ulimit -v) headroom"
	}
	return avail, src, nil
}

// readInt reads a file holding one integer ("max" and other words give false).
func readInt(path string) (int64, bool) {
	b, err := safefile.Read(path, safefile.Kernel)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// bytesText writes a byte count in MiB or GiB.
func bytesText(b int64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.0f GiB", float64(b)/(1<<30))
	}
	if b >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}
