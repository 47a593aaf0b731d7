// Package engine is geloattack's compute engine: device tensors, one
// contiguous parameter buffer with named views, a per-step activation arena,
// and a reverse-mode tape over coarse fused ops (Linear, RMSNorm, masked
// multi-head attention, SwiGLU, InfoNCE, ...), each with a forward and a
// backward kernel on a Backend. Model code calls Tape methods only and never
// names a device; a new backend (CUDA) implements the Backend interface.
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
