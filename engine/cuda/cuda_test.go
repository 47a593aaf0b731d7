package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestOpenNoDevice checks that Open on a machine without a GPU fails with
// "no CUDA device: ..." rather than panicking; on a GPU machine it reports
// what it opened.
func TestOpenNoDevice(t *testing.T) {
	d, err := Open(Options{})
	if err == nil {
		defer d.Close()
		t.Logf("opened %s (libraries %v)", d.Name(), d.Libraries())
		return
	}
	if !strings.HasPrefix(err.Error(), "no CUDA device: ") {
		t.Fatalf("error %q does not start with %q", err, "no CUDA device: ")
	}
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("error %v is not ErrNoDevice", err)
	}
	t.Logf("as expected without a GPU: %v", err)
}

// TestOpenListsPathsTried points Open at files that are not libraries and
// checks that the error names every path tried.
func TestOpenListsPathsTried(t *testing.T) {
	dir := t.TempDir()
	bogus := filepath.Join(dir, "libcuda.so.1")
	if err := os.WriteFile(bogus, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent", "libcuda.so.1")
	_, err := Open(Options{DriverPaths: []string{bogus, missing}})
	if err == nil {
		t.Fatal("Open succeeded on a bogus library")
	}
	msg := err.Error()
	for _, want := range []string{"no CUDA device: CUDA driver library not loaded", bogus, missing} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	var nd *NoDeviceError
	if !errors.As(err, &nd) || len(nd.Tried) != 2 {
		t.Errorf("want a *NoDeviceError with 2 paths tried, got %#v", err)
	}
}

// TestSearchDirs builds a fake pip environment and LD_LIBRARY_PATH and
// checks that their folders are searched in order.
func TestSearchDirs(t *testing.T) {
	venv := t.TempDir()
	cublasLib := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cublas", "lib")
	cu13Lib := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib")
	ld := t.TempDir()
	for _, d := range []string{cublasLib, cu13Lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cublasLib, "libcublas.so.12"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIRTUAL_ENV", venv)
	t.Setenv("LD_LIBRARY_PATH", ld+":"+filepath.Join(ld, "does-not-exist"))
	t.Setenv("GELOATTACK_CUDA_LIB", "")

	dirs := SearchDirs()
	iLD, iCublas, iCu13 := slices.Index(dirs, ld), slices.Index(dirs, cublasLib), slices.Index(dirs, cu13Lib)
	if iLD < 0 || iCublas < 0 || iCu13 < 0 {
		t.Fatalf("SearchDirs() = %v: missing %s, %s or %s", dirs, ld, cublasLib, cu13Lib)
	}
	if iLD > iCublas {
		t.Errorf("LD_LIBRARY_PATH should come before site-packages: %v", dirs)
	}
	if slices.Contains(dirs, filepath.Join(ld, "does-not-exist")) {
		t.Errorf("a missing folder was kept: %v", dirs)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if seen[d] {
			t.Errorf("duplicate %s", d)
		}
		seen[d] = true
	}

	c := Candidates(CublasNames, []string{ld, cublasLib})
	want := []string{"libcublas.so.13", filepath.Join(cublasLib, "libcublas.so.12"), "libcublas.so.12", "libcublas.so"}
	if !slices.Equal(c, want) {
		t.Errorf("Candidates = %v, want %v", c, want)
	}
}

func TestRowMajorGemmArgs(t *testing.T) {
	// C (m, n) = op(A) op(B); cuBLAS gets (op on B, op on A, ...).
	for _, tc := range []struct {
		ta, tb                bool
		o1, o2, lda, ldb, ldc int32
	}{
		{false, false, cublasOpN, cublasOpN, 4, 5, 5}, // A (3, 4), B (4, 5)
		{true, false, cublasOpN, cublasOpT, 3, 5, 5},  // A stored (4, 3)
		{false, true, cublasOpT, cublasOpN, 4, 4, 5},  // B stored (5, 4)
		{true, true, cublasOpT, cublasOpT, 3, 4, 5},
	} {
		o1, o2, lda, ldb, ldc := rowMajorGemmArgs(tc.ta, tc.tb, 3, 5, 4)
		if o1 != tc.o1 || o2 != tc.o2 || lda != tc.lda || ldb != tc.ldb || ldc != tc.ldc {
			t.Errorf("transA %v transB %v: got %d %d %d %d %d, want %d %d %d %d %d", tc.ta, tc.tb,
				o1, o2, lda, ldb, ldc, tc.o1, tc.o2, tc.lda, tc.ldb, tc.ldc)
		}
	}
}

func TestErrors(t *testing.T) {
	var d *Driver // no library: the package's own table names results
	err := d.Check("cuInit", 100)
	if err == nil || err.Error() != "cuInit: CUDA_ERROR_NO_DEVICE" {
		t.Errorf("Check = %v", err)
	}
	if d.Check("cuInit", 0) != nil {
		t.Error("CUDA_SUCCESS is an error")
	}
	if got := d.Check("x", 12345).Error(); got != "x: CUresult 12345" {
		t.Errorf("unknown result: %q", got)
	}
	if got := cublasCheck("cublasSgemm_v2", 7).Error(); got != "cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE" {
		t.Errorf("cublasCheck = %q", got)
	}
	nd := &NoDeviceError{Why: "cuInit: CUDA_ERROR_NO_DEVICE"}
	if nd.Error() != "no CUDA device: cuInit: CUDA_ERROR_NO_DEVICE" || !errors.Is(nd, ErrNoDevice) {
		t.Errorf("NoDeviceError = %q", nd)
	}
}

func TestPackArgs(t *testing.T) {
	v := make([]uint64, 6)
	if err := packArgs(v, []any{DevicePtr(0x7f0000001000), int32(-1), float32(1.5), int64(1 << 40), uint32(7), 0.5}); err != nil {
		t.Fatal(err)
	}
	want := []uint64{0x7f0000001000, 0xffffffff, 0x3fc00000, 1 << 40, 7, 0x3fe0000000000000}
	if !slices.Equal(v, want) {
		t.Errorf("packArgs = %#x, want %#x", v, want)
	}
	if err := packArgs(v, []any{1}); err == nil {
		t.Error("a Go int was accepted (its C size is ambiguous)")
	}
}

// lineComment matches a // comment up to the end of its line.
var lineComment = regexp.MustCompile(`//[^\n]*`)

// kernelRE finds the kernels a .cu file defines.
var kernelRE = regexp.MustCompile(`extern "C" __global__ void\s+(?:__launch_bounds__\(\w+\)\s+)?(\w+)\(`)

// TestKernelSources checks the CUDA sources without a compiler: every file
// includes common.cuh, kernel names are unique and prefixed, braces balance,
// and every kernel the backend launches (requiredKernels) is defined.
func TestKernelSources(t *testing.T) {
	files, err := filepath.Glob("kernels/*.cu")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kernel sources: %v", err)
	}
	seen := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if !strings.Contains(src, `#include "common.cuh"`) {
			t.Errorf("%s does not include common.cuh", f)
		}
		code := lineComment.ReplaceAllString(src, "")
		if strings.Count(code, "{") != strings.Count(code, "}") || strings.Count(code, "(") != strings.Count(code, ")") {
			t.Errorf("%s: unbalanced braces or parentheses", f)
		}
		for _, m := range kernelRE.FindAllStringSubmatch(src, -1) {
			if !strings.HasPrefix(m[1], "ga_") {
				t.Errorf("%s: kernel %s lacks the ga_ prefix", f, m[1])
			}
			if prev, dup := seen[m[1]]; dup {
				t.Errorf("kernel %s in %s and %s", m[1], prev, f)
			}
			seen[m[1]] = f
		}
	}
	for _, k := range requiredKernels {
		if _, ok := seen[k]; !ok {
			t.Errorf("kernel %s missing from kernels/*.cu", k)
		}
	}
	for name, entries := range optionalKernels {
		for _, k := range entries {
			if f, ok := seen[k]; !ok || filepath.Base(f) != "lm.cu" {
				t.Errorf("kernel %s of optional %q not defined in kernels/lm.cu (found in %q)", k, name, f)
			}
		}
	}
}

func TestPTXEntries(t *testing.T) {
	ptx := []byte(".version 8.5\n.target sm_90\n\n.visible .entry ga_axpy(\n\t.param .u64 a\n)\n{\n}\n" +
		"\t// .entry not_this(\n.entry ga_unary(\n)\n")
	if got := PTXEntries(ptx); !slices.Equal(got, []string{"ga_axpy", "ga_unary"}) {
		t.Errorf("PTXEntries = %v", got)
	}
	if PTXEmbedded {
		if len(embeddedPTX()) == 0 {
			t.Error("built without nocudaptx but no PTX embedded")
		}
	} else if embeddedPTX() != nil {
		t.Error("PTX embedded although built with nocudaptx")
	}
}

// TestKernelSyntax compiles kernels/*.cu with a host C++ compiler and stand-ins
// for the CUDA built-ins (testdata/cuda_shim.h): a syntax and type check
// only, for machines without nvcc. Skipped when no g++ is installed.
func TestKernelSyntax(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++: kernel syntax not checked (scripts/build-ptx.sh checks it with nvcc)")
	}
	files, _ := filepath.Glob("kernels/*.cu")
	for _, f := range files {
		out, err := exec.Command(cxx, "-x", "c++", "-std=c++17", "-fsyntax-only", "-Wall",
			"-Wno-unused-function", "-Wno-unknown-pragmas", "-include", "testdata/cuda_shim.h", "-I", "kernels", f).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
}
