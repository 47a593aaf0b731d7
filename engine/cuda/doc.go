// Package cuda is the groundwork of the engine's CUDA device: it opens the
// NVIDIA driver (libcuda.so.1) and cuBLAS at run time through purego, so that
// binaries stay CGO_ENABLED=0 and start on machines without a GPU, and it
// binds the driver and cuBLAS calls a backend needs (contexts, memory,
// modules, kernel launches, SGEMM and bf16 GemmEx).
//
// Open returns a *Device or an error that starts with "no CUDA device: " and
// says why (the libraries not found with every path tried, or the name of the
// driver error). Callers choosing a device treat any such error as "use the
// CPU" (see README.md, "Device chooser").
//
// The custom kernels are CUDA C under kernels/; scripts/build-ptx.sh compiles
// them to PTX on a machine with nvcc, and the PTX is embedded only when the
// package is built with the cudaptx build tag (see ptx_embed.go). The
// engine.Backend implementation on top of Device is not written yet.
package cuda
