// Package device chooses the compute device of a run: it turns a device spec ("auto", "cpu",
// "cuda", "cuda:N") and a GEMM precision ("fp32", "tf32", "bf16") into an engine.Backend. Commands
// resolve the device once at start-up here; model code only ever sees the engine.Backend.
//
//   - "cpu": cpu.New (package engine/cpu). The CPU computes in fp32 whatever the precision; any other precision
//     logs a one-line note saying so.
//   - "cuda" or "cuda:N": the CUDA backend on GPU 0 or N (after CUDA_VISIBLE_DEVICES). A failure is
//     returned, wrapped as "device cuda: no CUDA device: <why>", so a user who asked for a GPU learns
//     why there is none; it matches cuda.ErrNoDevice (errors.Is).
//   - "auto": the CUDA backend on GPU 0 when one opens, else the CPU after logging one line
//     "device: cpu (auto: no usable GPU here, so the CPU computes; why: no CUDA device: <why>)".
//
// On success Open logs "device: <backend name>" (the name says the device, its libraries and, for
// CUDA, the precision).
package device

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/engine/cuda"
	"github.com/gelo-research/geloattack/engine/device/devspec"
)

// Kinds of device a spec names (see devspec).
const (
	// Auto is GPU 0 when the CUDA backend opens, else the CPU.
	Auto = devspec.Auto
	// CPU is the CPU backend.
	CPU = devspec.CPU
	// CUDA is the CUDA backend ("cuda" is GPU 0, "cuda:N" GPU N).
	CUDA = devspec.CUDA
)

// Precisions of the CUDA backend's GEMMs (cuda.BackendOptions.Precision); the CPU computes in fp32.
const (
	// FP32 multiplies in full fp32.
	FP32 = devspec.FP32
	// TF32 rounds GEMM inputs to tf32, accumulating in fp32.
	TF32 = devspec.TF32
	// BF16 rounds GEMM inputs to bf16, accumulating in fp32.
	BF16 = devspec.BF16
)

// SpecHelp lists the accepted device specs, as error messages and flag help say it.
const SpecHelp = devspec.SpecHelp

// PrecisionHelp lists the accepted precisions.
const PrecisionHelp = devspec.PrecisionHelp

// Spec is a parsed device spec (devspec.Spec).
type Spec = devspec.Spec

// ParseSpec parses "auto", "cpu", "cuda" or "cuda:N" (devspec.ParseSpec).
func ParseSpec(spec string) (Spec, error) { return devspec.ParseSpec(spec) }

// ValidPrecision is nil for "" (fp32), "fp32", "tf32" and "bf16", and an error naming the
// choices otherwise (devspec.ValidPrecision).
func ValidPrecision(p string) error { return devspec.ValidPrecision(p) }

// Options configure OpenWith.
type Options struct {
	// Spec is the device: auto, cpu, cuda or cuda:N.
	Spec string
	// Precision is the CUDA backend's GEMM precision: "" or fp32, tf32, bf16 (GEMM inputs
	// rounded to tf32 or bf16, fp32 accumulation and master weights). The CPU computes in fp32.
	Precision string
	// Log receives the one-line messages about the choice (the device opened, a fallback to the
	// CPU and why, a precision the CPU ignores); nil discards them.
	Log func(string)
	// CUDA overrides the library search of the CUDA backend (tests point it at missing files);
	// its Ordinal is ignored: the spec's is used.
	CUDA cuda.Options
	// CPU configures the CPU backend.
	CPU cpu.Config
}

// Open is OpenWith(Options{Spec: spec, Precision: precision, Log: log}).
func Open(spec, precision string, log func(string)) (engine.Backend, error) {
	return OpenWith(Options{Spec: spec, Precision: precision, Log: log})
}

// OpenWith opens the backend that o names (see the package documentation). The caller releases it
// with Close.
func OpenWith(o Options) (engine.Backend, error) {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			o.Log(fmt.Sprintf(format, args...))
		}
	}
	s, err := ParseSpec(o.Spec)
	if err != nil {
		return nil, err
	}
	if err := ValidPrecision(o.Precision); err != nil {
		return nil, err
	}
	openCPU := func() (engine.Backend, error) {
		be, err := cpu.New(o.CPU)
		if err != nil {
			return nil, fmt.Errorf("device cpu: %w", err)
		}
		if o.Precision != "" && o.Precision != FP32 {
			logf("device: precision %s applies to CUDA GEMMs; the CPU computes in fp32", o.Precision)
		}
		return be, nil
	}
	if s.Kind == CPU {
		be, err := openCPU()
		if err == nil {
			logf("device: %s", be.Name())
		}
		return be, err
	}
	opts := o.CUDA
	opts.Ordinal = s.Ordinal
	gpu, err := newCUDA(cuda.BackendOptions{Device: opts, Precision: o.Precision})
	if err == nil {
		logf("device: %s", gpu.Name())
		return gpu, nil
	}
	if s.Kind == CUDA {
		return nil, fmt.Errorf("device %s: %w", s, noDevice(err))
	}
	// Most machines have no GPU: say so as the normal choice it is, with the reason after it
	// for the user who expected one.
	logf("device: cpu (auto: no usable GPU here, so the CPU computes; why: %s)", noDevice(err).Error())
	return openCPU()
}

// newCUDA is cuda.NewBackend on one OS thread: the driver's current context is per thread, and
// opening makes the context current and then loads the kernels into it, so a goroutine moved to
// another thread in between would fail (CUDA_ERROR_INVALID_CONTEXT) and auto would fall back to
// the CPU on a machine with a working GPU.
func newCUDA(o cuda.BackendOptions) (*cuda.Backend, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cuda.NewBackend(o)
}

// noDevice is err when it matches cuda.ErrNoDevice and says "no CUDA device" (every
// cuda.NewBackend error should), else err prefixed so that both hold: the log line and the
// returned error always say why there is no GPU in the same words.
func noDevice(err error) error {
	if errors.Is(err, cuda.ErrNoDevice) && strings.Contains(err.Error(), cuda.ErrNoDevice.Error()) {
		return err
	}
	return fmt.Errorf("%w: %w", cuda.ErrNoDevice, err)
}

// Close is be.Close() for callers that hold be as an interface and may hold none: a nil be is
// nothing to release. Tensors of be must not be used afterwards.
func Close(be engine.Backend) error {
	if be == nil {
		return nil
	}
	return be.Close()
}

// PeakBytes is the peak device memory be has held (the CUDA backend's PeakBytes), and false when
// be does not report it (the CPU: see the process's peak RSS instead).
func PeakBytes(be engine.Backend) (int64, bool) {
	if p, ok := be.(interface{ PeakBytes() int64 }); ok {
		return p.PeakBytes(), true
	}
	return 0, false
}
