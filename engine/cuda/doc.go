// Package cuda is the engine's CUDA backend: it opens the NVIDIA driver
// (libcuda.so.1) and cuBLAS at run time through purego, so that binaries stay
// CGO_ENABLED=0 and start on machines without a GPU, and Backend implements
// engine.Backend on one GPU (cuBLAS strided-batched GEMMs in fp32, tf32 or
// bf16, and the kernels of kernels/*.cu); see README.md.
//
// Open returns a *Device or an error that starts with "no CUDA device: " and
// says why (the libraries not found with every path tried, or the name of the
// driver error). Callers choosing a device treat any such error as "use the
// CPU" (the engine/cpu backend; see README.md, "Device chooser").
//
// The custom kernels are CUDA C under kernels/; scripts/build-ptx.sh compiles
// them to PTX on a machine with nvcc, the PTX under ptx/ is committed and
// embedded by default (the nocudaptx build tag leaves it out; see
// ptx_embed.go), and GELOATTACK_CUDA_PTX=dir loads rebuilt PTX instead.
package cuda
