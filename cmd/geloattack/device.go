package main

import (
	"flag"
	"fmt"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/engine/device"
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
