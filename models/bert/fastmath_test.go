package bert

import (
	"math"
	"testing"
)

func TestFastMath(t *testing.T) {
	var worstGelu, worstExp float64
	for i := -1200000; i <= 1200000; i++ {
		x := float32(float64(i) / 100000) // [-12, 12], crossing both table ends
		xf := float64(x)
		want := 0.5 * xf * (1 + math.Erf(xf/math.Sqrt2))
		// Absolute error for |GELU| <= 1, relative beyond (float32 resolution grows with |x|).
		worstGelu = math.Max(worstGelu, math.Abs(float64(gelu(x))-want)/math.Max(1, math.Abs(want)))
	}
	for i := 0; i <= 870000; i++ {
		x := float32(-float64(i) / 10000) // [-87, 0]
		want := math.Exp(float64(x))
		worstExp = math.Max(worstExp, math.Abs(float64(exp32(x))-want)/want)
	}
	t.Logf("max gelu error (abs, rel beyond 1) = %.2g, max exp32 rel error = %.2g", worstGelu, worstExp)
	if worstGelu > 2.5e-7 {
		t.Errorf("gelu: max error %g > 2.5e-7", worstGelu)
	}
	if worstExp > 3e-7 {
		t.Errorf("exp32: max relative error %g > 3e-7", worstExp)
	}
	if exp32(0) != 1 || exp32(-100) != 0 || gelu(0) != 0 || gelu(20) != 20 || gelu(-20) != 0 {
		t.Errorf("exact points: exp32(0)=%g exp32(-100)=%g gelu(0)=%g gelu(20)=%g gelu(-20)=%g", exp32(0), exp32(-100), gelu(0), gelu(20), gelu(-20))
	}
}
