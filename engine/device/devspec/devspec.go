// Package devspec is the schema of the device and precision a run config names: the device
// specs ("auto", "cpu", "cuda", "cuda:N") and the GEMM precisions ("fp32", "tf32", "bf16"), parsed
// and checked without linking any backend. Package device opens the backend a spec names and
// re-exports everything here.
package devspec

import (
	"fmt"
	"strconv"
	"strings"
)

// Kinds of device a spec names.
const (
	// Auto is GPU 0 when the CUDA backend opens, else the CPU.
	Auto = "auto"
	// CPU is the CPU backend.
	CPU = "cpu"
	// CUDA is the CUDA backend ("cuda" is GPU 0, "cuda:N" GPU N).
	CUDA = "cuda"
)

// Precisions of the CUDA backend's GEMMs (cuda.BackendOptions.Precision); the CPU computes in fp32.
const (
	// FP32 multiplies in full fp32.
	FP32 = "fp32"
	// TF32 rounds GEMM inputs to tf32, accumulating in fp32.
	TF32 = "tf32"
	// BF16 rounds GEMM inputs to bf16, accumulating in fp32.
	BF16 = "bf16"
)

// SpecHelp lists the accepted device specs, as error messages and flag help say it.
const SpecHelp = "auto, cpu, cuda or cuda:N"

// PrecisionHelp lists the accepted precisions.
const PrecisionHelp = "fp32, tf32 or bf16"

// Spec is a parsed device spec.
type Spec struct {
	// Kind is Auto, CPU or CUDA.
	Kind string
	// Ordinal is the GPU index for CUDA ("cuda" is 0) and Auto (0); 0 for CPU.
	Ordinal int
}

// String writes the spec back: "auto", "cpu", "cuda" for GPU 0, "cuda:N" otherwise.
func (s Spec) String() string {
	if s.Kind == CUDA && s.Ordinal != 0 {
		return fmt.Sprintf("cuda:%d", s.Ordinal)
	}
	return s.Kind
}

// ParseSpec parses "auto", "cpu", "cuda" or "cuda:N" (N a non-negative decimal integer). Anything
// else, the empty string included, is an error such as `device "gpu": want auto, cpu, cuda or
// cuda:N`.
func ParseSpec(spec string) (Spec, error) {
	switch spec {
	case Auto, CPU, CUDA:
		return Spec{Kind: spec}, nil
	}
	if rest, ok := strings.CutPrefix(spec, CUDA+":"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
		n, err := strconv.Atoi(rest)
		if err == nil {
			return Spec{Kind: CUDA, Ordinal: n}, nil
		}
	}
	return Spec{}, fmt.Errorf("device %q: want %s", spec, SpecHelp)
}

// ValidPrecision is nil for "" (fp32), "fp32", "tf32" and "bf16" (the set cuda.ValidPrecision
// accepts; package device's tests hold the two together), and an error naming the choices
// otherwise.
func ValidPrecision(p string) error {
	switch p {
	case "", FP32, TF32, BF16:
		return nil
	}
	return fmt.Errorf("precision %q: want %s", p, PrecisionHelp)
}
