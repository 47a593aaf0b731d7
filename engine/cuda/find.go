package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Library file names tried, most preferred first.
var (
	// DriverNames are the names of the CUDA driver library.
	DriverNames = []string{"libcuda.so.1", "libcuda.so"}
	// CublasNames are the names of cuBLAS (CUDA 13, then 12, then unversioned).
	CublasNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}
	// CublasLtNames are the names of cuBLASLt, which cuBLAS depends on.
	CublasLtNames = []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}
)

// systemDirs are the usual places of the driver and the CUDA toolkit.
var systemDirs = []string{
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/cuda/compat",
	"/usr/lib/wsl/lib",
	"/usr/local/nvidia/lib64",
	"/usr/local/nvidia/lib",
}

// SearchDirs returns the folders searched for the CUDA libraries, in order,
// without duplicates: $GELOATTACK_CUDA_LIB (a colon-separated list),
// $LD_LIBRARY_PATH, the lib folders of pip's NVIDIA wheels in every Python
// environment found (site-packages/nvidia/*/lib under $VIRTUAL_ENV,
// $CONDA_PREFIX, /usr/lib/python3*, /usr/local/lib/python3*,
// ~/.local/lib/python3*, ~/.pyenv/versions/*/lib/python3*), then the system
// folders and /usr/local/cuda-*/lib64. Folders that do not exist are left out.
func SearchDirs() []string {
	var dirs []string
	add := func(ds ...string) {
		for _, d := range ds {
			if d != "" {
				dirs = append(dirs, filepath.Clean(d))
			}
		}
	}
	add(filepath.SplitList(os.Getenv("GELOATTACK_CUDA_LIB"))...)
	add(filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))...)
	add(pythonNvidiaDirs()...)
	add(systemDirs...)
	add(globSorted("/usr/local/cuda-*/lib64")...)
	add(globSorted("/usr/local/cuda-*/targets/x86_64-linux/lib")...)

	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// pythonNvidiaDirs returns site-packages/nvidia/*/lib (and the cu13 wheels'
// nvidia/cu13/lib, which the same pattern covers) for every Python
// environment found under the usual prefixes.
func pythonNvidiaDirs() []string {
	var prefixes []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(v); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	// The environment of the python3 on PATH (e.g. a PyTorch venv that is
	// active only through PATH): its prefix is the folder above bin.
	if py, err := exec.LookPath("python3"); err == nil {
		if real, err := filepath.EvalSymlinks(filepath.Dir(py)); err == nil {
			prefixes = append(prefixes, filepath.Dir(real))
		}
		prefixes = append(prefixes, filepath.Dir(filepath.Dir(py)))
	}
	prefixes = append(prefixes, "/usr", "/usr/local", "/opt/conda")
	if home, err := os.UserHomeDir(); err == nil {
		prefixes = append(prefixes, filepath.Join(home, ".local"))
		prefixes = append(prefixes, globSorted(filepath.Join(home, ".pyenv", "versions", "*"))...)
	}
	var sites []string
	for _, p := range prefixes {
		for _, pat := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib64/python3*/site-packages"} {
			sites = append(sites, globSorted(filepath.Join(p, pat))...)
		}
	}
	sites = append(sites, globSorted("/usr/lib/python3/dist-packages")...)
	var out []string
	for _, s := range sites {
		out = append(out, globSorted(filepath.Join(s, "nvidia", "*", "lib"))...)
	}
	return out
}

// globSorted is filepath.Glob with the matches in reverse lexical order, so
// that newer versions usually come first (python3.12 before python3.11,
// cuda-13.0 before cuda-12.8).
func globSorted(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	sort.Sort(sort.Reverse(sort.StringSlice(m)))
	return m
}

// Candidates returns the paths to try for a library, in order: for each name,
// the name in each of dirs, then the bare name (the dynamic loader's own
// search: ld.so.cache, RUNPATH). A name containing a slash is tried as is.
func Candidates(names, dirs []string) []string {
	var out []string
	for _, n := range names {
		if strings.Contains(n, "/") {
			out = append(out, n)
			continue
		}
		for _, d := range dirs {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err == nil {
				out = append(out, p)
			}
		}
		out = append(out, n)
	}
	return out
}
