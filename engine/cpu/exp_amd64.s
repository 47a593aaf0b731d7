//go:build amd64

#include "textflag.h"

// Constants of expf (fastexp.go), eight lanes each.
#define SPLAT(name, bits) \
	DATA name+0(SB)/4, bits; DATA name+4(SB)/4, bits; DATA name+8(SB)/4, bits; DATA name+12(SB)/4, bits; \
	DATA name+16(SB)/4, bits; DATA name+20(SB)/4, bits; DATA name+24(SB)/4, bits; DATA name+28(SB)/4, bits; \
	GLOBL name(SB), RODATA|NOPTR, $32

SPLAT(expLo<>, $0xc2aeac4f)     // -87.33654
SPLAT(expHi<>, $0x42b0c0a5)     // 88.37626
SPLAT(expLog2e<>, $0x3fb8aa3b)  // 1.44269504
SPLAT(expMagic<>, $0x4b400000)  // 1.5 * 2^23
SPLAT(expC1<>, $0x3f318000)     // 0.693359375
SPLAT(expC2<>, $0x395e8083)     // 2.12194440e-4
SPLAT(expP0<>, $0x39506967)     // 1.9875691500e-4
SPLAT(expP1<>, $0x3ab743ce)     // 1.3981999507e-3
SPLAT(expP2<>, $0x3c088908)     // 8.3334519073e-3
SPLAT(expP3<>, $0x3d2aa9c1)     // 4.1665795894e-2
SPLAT(expP4<>, $0x3e2aaaaa)     // 1.6666665459e-1
SPLAT(expP5<>, $0x3f000000)     // 5.0000001201e-1
SPLAT(expOne<>, $0x3f800000)    // 1
SPLAT(expBias<>, $0x4b3fff81)   // bits(1.5*2^23) - 127: t's bits minus this, << 23, is 2^n

// func expAffineAVX2(dst, src *float32, n int, a, b float32) (done int, sum float32)
TEXT ·expAffineAVX2(SB), NOSPLIT, $0-44
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y0
	VBROADCASTSS b+28(FP), Y1
	VMOVUPS expLo<>(SB), Y2
	VMOVUPS expHi<>(SB), Y3
	VMOVUPS expLog2e<>(SB), Y4
	VMOVUPS expMagic<>(SB), Y5
	VMOVUPS expC1<>(SB), Y6
	VMOVUPS expC2<>(SB), Y7
	VXORPS Y15, Y15, Y15 // running sum
	XORQ DX, DX          // elements done

loop:
	CMPQ CX, $8
	JLT  done
	VMOVUPS (SI), Y8
	VFMADD213PS Y1, Y0, Y8      // x = a*v + b
	VCMPPS $0x16, Y3, Y8, Y13   // x > hi or NaN (NLE_UQ)
	VMOVMSKPS Y13, AX
	TESTL AX, AX
	JNE  done                   // leave this block to the Go loop
	VCMPPS $0x11, Y2, Y8, Y12   // underflow lanes: x < lo (LT_OQ)
	VMAXPS Y2, Y8, Y8           // keep the arithmetic in range
	VMOVAPS Y5, Y9
	VFMADD231PS Y8, Y4, Y9      // t = x*log2e + magic
	VSUBPS Y5, Y9, Y10          // n = t - magic
	VFNMADD231PS Y10, Y6, Y8    // r = x - n*C1
	VFMADD231PS Y10, Y7, Y8     // r += n*C2
	VPSUBD expBias<>(SB), Y9, Y14
	VPSLLD $23, Y14, Y14        // 2^n
	VMOVUPS expP0<>(SB), Y11
	VFMADD213PS expP1<>(SB), Y8, Y11
	VFMADD213PS expP2<>(SB), Y8, Y11
	VFMADD213PS expP3<>(SB), Y8, Y11
	VFMADD213PS expP4<>(SB), Y8, Y11
	VFMADD213PS expP5<>(SB), Y8, Y11 // P(r)
	VMULPS Y8, Y8, Y13          // r^2
	VFMADD213PS Y8, Y13, Y11    // r^2 P(r) + r
	VADDPS expOne<>(SB), Y11, Y11
	VMULPS Y14, Y11, Y11        // * 2^n
	VANDNPS Y11, Y12, Y11       // 0 where x underflowed
	VMOVUPS Y11, (DI)
	VADDPS Y11, Y15, Y15
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	ADDQ $8, DX
	JMP  loop

done:
	VEXTRACTF128 $1, Y15, X13
	VADDPS X13, X15, X15
	VMOVHLPS X15, X13, X13
	VADDPS X13, X15, X15
	VMOVSHDUP X15, X13
	VADDSS X13, X15, X15
	VZEROUPPER
	MOVQ DX, done+32(FP)
	MOVSS X15, sum+40(FP)
	RET
