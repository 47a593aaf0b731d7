package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// buildEmulated compiles testdata/<prog>.cpp, which includes the kernel sources it runs, under
// testdata/cuda_emu.h (a thread per CUDA thread, barriers for __syncthreads and the warp
// shuffles) and returns the program's path. It skips the test with -short (a C++ build takes
// seconds) and without g++ (C++20), where the GPU tests check kernel instead. sources are the
// kernel files the program includes: they are read here too, since go test caches a result by
// the files the test process opens and g++'s reads are not among them.
func buildEmulated(t *testing.T, kernel, prog string, sources ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a C++ program (seconds)")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skipf("no g++: %s not emulated (the GPU test checks it)", kernel)
	}
	main := filepath.Join("testdata", prog+".cpp")
	for _, f := range append(sources, "testdata/cuda_emu.h", main) {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), prog)
	if out, err := exec.Command(cxx, "-std=c++20", "-O1", "-pthread", "-include", "testdata/cuda_emu.h", "-I", "kernels",
		"-o", bin, main).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	return bin
}
