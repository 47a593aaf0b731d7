//go:build amd64

#include "textflag.h"

// Eight-lane forms of the elementwise loops of elem.go, attention.go and AdamW. Each does the
// same IEEE operations in the same order as its Go loop (no fused multiply-adds: the Go
// compiler does not fuse at GOAMD64=v1), so every element comes out bit for bit as the Go loop
// gives it; the callers run the tail (n mod 8) in Go. No horizontal sums: those would change
// the order of additions.

DATA vecOne<>+0(SB)/4, $0x3f800000
GLOBL vecOne<>(SB), RODATA|NOPTR, $4

DATA vecNegInf<>+0(SB)/4, $0xff800000
GLOBL vecNegInf<>(SB), RODATA|NOPTR, $4

// func swigluForwardAVX2(y, gate, u *float32, n int)
// y[i] = g[i] / (1 + y[i]) * u[i], y holding exp(-g).
TEXT ·swigluForwardAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS vecOne<>(SB), Y0

swfLoop:
	CMPQ CX, $8
	JLT  swfDone
	VMOVUPS (DI), Y1
	VADDPS  Y1, Y0, Y1   // 1 + e
	VMOVUPS (SI), Y2
	VDIVPS  Y1, Y2, Y2   // g / (1 + e)
	VMULPS  (DX), Y2, Y2 // * u
	VMOVUPS Y2, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     swfLoop

swfDone:
	VZEROUPPER
	RET

// func swigluBackwardAVX2(dg, du, dy, gate, u, e *float32, n int, accGate, accUp bool)
// s = 1/(1+e): dg (+)= dy*u*s*(1 + g*(1-s)), du (+)= dy*g*s.
TEXT ·swigluBackwardAVX2(SB), NOSPLIT, $0-58
	MOVQ    dg+0(FP), DI
	MOVQ    du+8(FP), R8
	MOVQ    dy+16(FP), SI
	MOVQ    gate+24(FP), DX
	MOVQ    u+32(FP), R9
	MOVQ    e+40(FP), R10
	MOVQ    n+48(FP), CX
	MOVBLZX accGate+56(FP), R11
	MOVBLZX accUp+57(FP), R12
	VBROADCASTSS vecOne<>(SB), Y0

swbLoop:
	CMPQ    CX, $8
	JLT     swbDone
	VMOVUPS (R10), Y2
	VADDPS  Y2, Y0, Y2 // 1 + e
	VDIVPS  Y2, Y0, Y3 // s = 1 / (1 + e)
	VMOVUPS (SI), Y7   // d
	VMOVUPS (DX), Y8   // g
	VMULPS  (R9), Y7, Y4 // d * u
	VMULPS  Y3, Y4, Y4   // * s
	VSUBPS  Y3, Y0, Y5   // 1 - s
	VMULPS  Y5, Y8, Y5   // g * (1 - s)
	VADDPS  Y5, Y0, Y5   // 1 + g*(1-s)
	VMULPS  Y5, Y4, Y4
	TESTQ   R11, R11
	JZ      swbGate
	VADDPS  (DI), Y4, Y4

swbGate:
	VMOVUPS Y4, (DI)
	VMULPS  Y8, Y7, Y6 // d * g
	VMULPS  Y3, Y6, Y6 // * s
	TESTQ   R12, R12
	JZ      swbUp
	VADDPS  (R8), Y6, Y6

swbUp:
	VMOVUPS Y6, (R8)
	ADDQ    $32, DI
	ADDQ    $32, R8
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, R9
	ADDQ    $32, R10
	SUBQ    $8, CX
	JMP     swbLoop

swbDone:
	VZEROUPPER
	RET

// func adamwAVX2(p, grad, m, v *float32, n int, k *adamwConsts)
// m = b1 m + c1 g; v = b2 v + c2 g g; g = 0; p = p decay - step m / (sqrt(v invBC2) + eps).
TEXT ·adamwAVX2(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), R9
	VBROADCASTSS 0(R9), Y8   // b1
	VBROADCASTSS 4(R9), Y9   // c1
	VBROADCASTSS 8(R9), Y10  // b2
	VBROADCASTSS 12(R9), Y11 // c2
	VBROADCASTSS 16(R9), Y12 // decay
	VBROADCASTSS 20(R9), Y13 // step
	VBROADCASTSS 24(R9), Y14 // invBC2
	VBROADCASTSS 28(R9), Y15 // eps
	VXORPS Y7, Y7, Y7

adamLoop:
	CMPQ    CX, $8
	JLT     adamDone
	VMOVUPS (SI), Y1     // g
	VMULPS  (DX), Y8, Y0 // b1 * m
	VMULPS  Y1, Y9, Y2   // c1 * g
	VADDPS  Y2, Y0, Y0   // m'
	VMULPS  (R8), Y10, Y2 // b2 * v
	VMULPS  Y1, Y11, Y3   // c2 * g
	VMULPS  Y1, Y3, Y3    // * g
	VADDPS  Y3, Y2, Y2    // v'
	VMOVUPS Y0, (DX)
	VMOVUPS Y2, (R8)
	VMOVUPS Y7, (SI)      // the gradient is consumed
	VMULPS  Y14, Y2, Y4   // v' * invBC2
	VSQRTPS Y4, Y4
	VADDPS  Y15, Y4, Y4   // + eps
	VMULPS  Y0, Y13, Y5   // step * m'
	VDIVPS  Y4, Y5, Y5
	VMULPS  (DI), Y12, Y6 // p * decay
	VSUBPS  Y5, Y6, Y6
	VMOVUPS Y6, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, R8
	SUBQ    $8, CX
	JMP     adamLoop

adamDone:
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32
// The largest of the first n&^7 elements as the loop "if v > mx { mx = v }" from -Inf finds it
// (NaN elements are passed over); -Inf for n < 8.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS vecNegInf<>(SB), Y0

maxLoop:
	CMPQ    CX, $8
	JLT     maxDone
	VMOVUPS (SI), Y1
	VMAXPS  Y0, Y1, Y0 // x > mx ? x : mx (mx kept when x is NaN)
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     maxLoop

maxDone:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X0, X1, X0
	VMOVHLPS     X0, X1, X1
	VMAXPS       X0, X1, X0
	VMOVSHDUP    X0, X1
	VMAXPS       X0, X1, X0
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET

// func scaleAVX2(x *float32, n int, s float32)
// x[i] *= s.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Y0

scaleLoop:
	CMPQ    CX, $8
	JLT     scaleDone
	VMULPS  (SI), Y0, Y1
	VMOVUPS Y1, (SI)
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     scaleLoop

scaleDone:
	VZEROUPPER
	RET

// func softmaxGradAVX2(dp, p *float32, n int, d, scale float32)
// dp[i] = p[i] * (dp[i] - d) * scale.
TEXT ·softmaxGradAVX2(SB), NOSPLIT, $0-32
	MOVQ dp+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS d+24(FP), Y0
	VBROADCASTSS scale+28(FP), Y1

sgLoop:
	CMPQ    CX, $8
	JLT     sgDone
	VMOVUPS (DI), Y2
	VSUBPS  Y0, Y2, Y2   // dp - d
	VMULPS  (SI), Y2, Y2 // p * (dp - d)
	VMULPS  Y1, Y2, Y2   // * scale
	VMOVUPS Y2, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     sgLoop

sgDone:
	VZEROUPPER
	RET

// func scaledProductAVX2(y, x, w *float32, n int, s float32)
// y[i] = x[i] * s * w[i].
TEXT ·scaledProductAVX2(SB), NOSPLIT, $0-36
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS s+32(FP), Y0

spLoop:
	CMPQ    CX, $8
	JLT     spDone
	VMULPS  (SI), Y0, Y1 // x * s
	VMULPS  (DX), Y1, Y1 // * w
	VMOVUPS Y1, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     spLoop

spDone:
	VZEROUPPER
	RET

// func rmsNormGradAVX2(dx, dy, x, w *float32, n int, inv, dot float32)
// dx[i] += inv * (dy[i]*w[i] - x[i]*inv*dot).
TEXT ·rmsNormGradAVX2(SB), NOSPLIT, $0-48
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ w+24(FP), R8
	MOVQ n+32(FP), CX
	VBROADCASTSS inv+40(FP), Y0
	VBROADCASTSS dot+44(FP), Y1

rgLoop:
	CMPQ    CX, $8
	JLT     rgDone
	VMOVUPS (SI), Y2
	VMULPS  (R8), Y2, Y2 // dy * w
	VMULPS  (DX), Y0, Y3 // x * inv
	VMULPS  Y1, Y3, Y3   // * dot
	VSUBPS  Y3, Y2, Y2   // dy*w - x*inv*dot
	VMULPS  Y2, Y0, Y2   // inv * (...)
	VADDPS  (DI), Y2, Y2 // dx + ...
	VMOVUPS Y2, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, R8
	SUBQ    $8, CX
	JMP     rgLoop

rgDone:
	VZEROUPPER
	RET

// func accScaledProductAVX2(acc, a, b *float32, n int, s float32)
// acc[i] += a[i] * b[i] * s.
TEXT ·accScaledProductAVX2(SB), NOSPLIT, $0-36
	MOVQ acc+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS s+32(FP), Y0

apLoop:
	CMPQ    CX, $8
	JLT     apDone
	VMOVUPS (SI), Y1
	VMULPS  (DX), Y1, Y1 // a * b
	VMULPS  Y0, Y1, Y1   // * s
	VADDPS  (DI), Y1, Y1 // acc + ...
	VMOVUPS Y1, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     apLoop

apDone:
	VZEROUPPER
	RET
