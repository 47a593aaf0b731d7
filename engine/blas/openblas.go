package blas

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/cpu"
)

// CBLAS enum values (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// DefaultPaths returns the shared objects OpenOpenBLAS tries when given none.
func DefaultPaths() []string {
	return []string{"libopenblas.so.0", "libopenblas.so", "libblas.so.3"}
}

// cblasSgemm is cblas_sgemm's C signature; blasint is 32-bit in the
// distribution builds (no INTERFACE64).
type cblasSgemm func(order, transA, transB int32, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)

// OpenOpenBLAS opens the first of paths (DefaultPaths() when none) that loads
// and exports cblas_sgemm. openblas_set_num_threads and openblas_get_config
// are used when exported (a reference libblas.so.3 has neither; SetThreads is
// then a no-op), and so are cblas_dgemm (Dgemm), cblas_dsyrk (Gram) and LAPACK's
// Fortran dgeqrf_/dorgqr_ (QR; HasLAPACK says whether they were found) and dsyevd_
// (EigSym; HasEigSym), each falling back to gonum when absent. Before the first
// load, on an amd64 CPU with AVX-512 F/CD/BW/DQ/VL, it sets
// OPENBLAS_CORETYPE=SkylakeX in the C environment unless the variable is already set (see chooseCoreType).
func OpenOpenBLAS(paths ...string) (*Library, error) {
	if len(paths) == 0 {
		paths = DefaultPaths()
	}
	var errs []error
	for _, p := range paths {
		lib, err := openOne(p)
		if err == nil {
			return lib, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p, err))
	}
	return nil, errors.Join(errs...)
}

func openOne(path string) (*Library, error) {
	chooseCoreType()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	sym, err := purego.Dlsym(h, "cblas_sgemm")
	if err != nil {
		purego.Dlclose(h)
		return nil, fmt.Errorf("no cblas_sgemm: %w", err)
	}
	var gemm cblasSgemm
	purego.RegisterFunc(&gemm, sym)

	lib := &Library{path: path, threads: 1}
	name := "BLAS"
	if s, err := purego.Dlsym(h, "openblas_get_config"); err == nil {
		var cfg func() string
		purego.RegisterFunc(&cfg, s)
		name = strings.TrimSpace(cfg())
	}
	if s, err := purego.Dlsym(h, "openblas_get_corename"); err == nil {
		var core func() string
		purego.RegisterFunc(&core, s)
		name += ", core " + core()
	}
	lib.name = name + " (" + path + ")"
	if s, err := purego.Dlsym(h, "openblas_set_num_threads"); err == nil {
		var set func(int32)
		purego.RegisterFunc(&set, s)
		lib.setThr = func(n int) { set(int32(n)) }
	}
	lib.dgemm, _ = openblasDgemm(h)
	lib.qr, lib.lapackRaw, lib.lapack = lapackQR(h)
	lib.eig, _ = lapackSymEig(h)
	lib.gram, _ = openblasGram(h)
	lib.sgemm = func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
		// k == 0 leaves A and B empty; a valid pointer is still required.
		var dummy float32
		pa, pb := &dummy, &dummy
		if len(a) > 0 {
			pa = &a[0]
		}
		if len(b) > 0 {
			pb = &b[0]
		}
		gemm(cblasRowMajor, cblasT(transA), cblasT(transB), int32(m), int32(n), int32(k),
			alpha, pa, int32(lda), pb, int32(ldb), beta, &c[0], int32(ldc))
	}
	return lib, nil
}

func cblasT(t bool) int32 {
	if t {
		return cblasTrans
	}
	return cblasNoTrans
}

// chooseCoreType tells a DYNAMIC_ARCH OpenBLAS to use its AVX-512
// (SkylakeX) kernels on CPUs that have AVX-512 F/CD/BW/DQ/VL but that the
// library does not recognise: 0.3.21 runs AMD Zen 4/5 with its AVX2
// (Haswell) kernels, which measured 1.5 times slower over a training step
// on Zen 5. OpenBLAS reads OPENBLAS_CORETYPE from the C environment when it
// is loaded, so it is set there (libc's setenv; Go's os.Setenv does not
// reach the C environment without cgo). A value the user has set is kept.
func chooseCoreType() {
	if runtime.GOARCH != "amd64" || os.Getenv("OPENBLAS_CORETYPE") != "" {
		return
	}
	x := cpu.X86
	if !(x.HasAVX512F && x.HasAVX512CD && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL) {
		return
	}
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return // no glibc: leave the choice to OpenBLAS
	}
	sym, err := purego.Dlsym(libc, "setenv")
	if err != nil {
		return
	}
	var setenv func(name, value string, overwrite int32) int32
	purego.RegisterFunc(&setenv, sym)
	setenv("OPENBLAS_CORETYPE", "SkylakeX", 0)
}
