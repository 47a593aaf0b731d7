package main

import (
	"flag"
	"fmt"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/models/causallm"
)

// deviceFlags are -device and -precision: overrides of a run config's device and precision keys.
type deviceFlags struct {
	device, precision *string
}

// addDeviceFlags defines -device and -precision on flags; empty values keep the config's.
func addDeviceFlags(flags *flag.FlagSet) deviceFlags {
	return deviceFlags{
		device:    flags.String("device", "", "compute device: auto (a GPU when the CUDA backend opens, else the CPU, logging why), cpu, cuda or cuda:N (GPU N; fails when none opens); empty = the config's device key (default auto)"),
		precision: flags.String("precision", "", "GEMM precision on a GPU: fp32, tf32 or bf16 (inputs rounded to tf32 or bf16, fp32 accumulation and master weights; the CPU always computes in fp32); empty = the config's precision key (default fp32)"),
	}
}

// apply overrides cfg's device and precision with the flags that are set, checking them.
func (d deviceFlags) apply(cfg *config.Run) error {
	if *d.device != "" {
		if _, err := device.ParseSpec(*d.device); err != nil {
			return fmt.Errorf("-device: %w", err)
		}
		cfg.Device = *d.device
	}
	if *d.precision != "" {
		if err := device.ValidPrecision(*d.precision); err != nil {
			return fmt.Errorf("-precision: %w", err)
		}
		cfg.Precision = *d.precision
	}
	return nil
}

// decoderDeviceHelp is the -device help of the commands that prove with a decoder (decode,
// assess). They take no -precision: on a GPU their GEMMs run in fp32. store extract takes one
// (extractDeviceHelp, extractprecision.go): its rows record their precision.
const decoderDeviceHelp = "device the decoder's forward passes run on: auto (a GPU when the CUDA backend opens and has the decoder's kernels, else the CPU, logging why), cpu, cuda or cuda:N (fails when no GPU opens or its kernels lack the decoder's); " +
	"GEMMs run in fp32 on a GPU, never tf32 or bf16: the claims' bounds (the recomputation error rho of -deployer-precision) assume the attacker recomputes the rows in fp32, and tf32 or bf16 inputs would void them"

// decoderKernelsHint says how to give a CUDA backend the decoder's kernels.
const decoderKernelsHint = "rebuild engine/cuda/ptx/lm.ptx with scripts/build-ptx.sh, or point GELOATTACK_CUDA_PTX at a folder of rebuilt PTX; -device cpu computes on the CPU"

// addDecoderDeviceFlag defines a decoder command's -device on fs (default auto).
func addDecoderDeviceFlag(fs *flag.FlagSet) *string {
	return fs.String("device", device.Auto, decoderDeviceHelp)
}

// checkDecoderDevice refuses a -device that is no device spec, before any work.
func checkDecoderDevice(spec string) error {
	if _, err := device.ParseSpec(spec); err != nil {
		return fmt.Errorf("-device: %w", err)
	}
	return nil
}

// openFunc opens a backend as engine/device.Open does (tests pass one that opens a fake).
type openFunc func(spec, precision string, log func(string)) (engine.Backend, error)

// openDecoderDevice opens the backend -device names, in fp32, for models/causallm's Decoder (log
// hears the choice; nil discards it). The caller closes it.
func openDecoderDevice(spec string, log func(string)) (engine.Backend, error) {
	return openDecoderDeviceWith(spec, log, device.Open)
}

// openDecoderDeviceWith is openDecoderDevice over open. A backend without the decoder's kernels
// (causallm.CheckInference: a CUDA backend whose PTX predates them) is refused for cpu, cuda and
// cuda:N; auto closes it and falls back to the CPU with one line saying why.
func openDecoderDeviceWith(spec string, log func(string), open openFunc) (engine.Backend, error) {
	if log == nil {
		log = func(string) {}
	}
	s, err := device.ParseSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("-device: %w", err)
	}
	be, err := open(spec, device.FP32, log)
	if err != nil {
		return nil, fmt.Errorf("-device %s: %w", spec, err)
	}
	lacks := causallm.CheckInference(be)
	if lacks == nil {
		return be, nil
	}
	name := be.Name()
	device.Close(be)
	if s.Kind != device.Auto {
		return nil, fmt.Errorf("-device %s: %w (%s)", spec, lacks, decoderKernelsHint)
	}
	log(fmt.Sprintf("device: cpu (auto: %s lacks the decoder's kernels, so the CPU computes; why: %v)", name, lacks))
	be, err = open(device.CPU, device.FP32, log)
	if err != nil {
		return nil, fmt.Errorf("-device %s: %w", spec, err)
	}
	if err := causallm.CheckInference(be); err != nil {
		device.Close(be)
		return nil, fmt.Errorf("-device %s: %w", spec, err)
	}
	return be, nil
}
