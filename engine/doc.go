// Package engine is geloattack's compute engine: device tensors, one
// contiguous parameter buffer with named views, a per-step activation arena,
// and a reverse-mode tape over coarse fused ops (Linear, RMSNorm, masked
// multi-head attention, SwiGLU, InfoNCE, ...). Each op is one file, op_*.go:
// its Tape method (shape rules and forward), its backward beside it, and the
// name and type of its fused kernel when Backend's primitives (memory,
// copies, GEMMs, elementwise maps, reductions) do not suffice; a backend
// hands that kernel back from Backend.Kernel. Model code calls Tape methods
// only and never names a device. The backends are packages of their own that
// implement the Backend interface through Tensor's exported view (Storage,
// Offset, Size, Shape, Rows, Cols): engine/cpu (Go kernels, BLAS GEMMs) and engine/cuda;
// engine/device chooses one. A Tape checks that every input lives on its
// backend, so a tensor of another one is an error, not a crash.
//
// A training step is:
//
//	tp.Reset()                    // rewinds the arena: nothing is allocated after warm-up
//	x := tp.Input(u, B, N, d)     // data: no gradient
//	h := tp.Linear(x, win)        // ... the model's forward
//	loss := tp.InfoNCE(scores, pos)
//	tp.Backward(loss)             // accumulates into the parameters' gradients
//	norm := engine.ClipGradNorm(params, 1)
//	opt.Step()                    // AdamW; leaves the gradients zero
//
// Tensors made by a Tape (activations, inputs) are valid until the next
// Reset; parameter tensors live as long as their Params.
//
// Shapes are written next to the code as comments, x: (B, N, h) meaning
// batch, rows of a set, features; matrices are row-major and weights use
// PyTorch's nn.Linear layout (out, in).
package engine
