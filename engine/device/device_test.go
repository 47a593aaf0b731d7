package device

import (
	"errors"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine/cpu"
	"github.com/gelo-research/geloattack/engine/cuda"
)

func TestParseSpec(t *testing.T) {
	good := map[string]Spec{
		"auto":    {Kind: Auto},
		"cpu":     {Kind: CPU},
		"cuda":    {Kind: CUDA},
		"cuda:0":  {Kind: CUDA},
		"cuda:1":  {Kind: CUDA, Ordinal: 1},
		"cuda:12": {Kind: CUDA, Ordinal: 12},
	}
	for in, want := range good {
		got, err := ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"cuda:0": "cuda", "cuda:3": "cuda:3", "auto": "auto", "cpu": "cpu"} {
		s, _ := ParseSpec(in)
		if s.String() != want {
			t.Errorf("ParseSpec(%q).String() = %q, want %q", in, s.String(), want)
		}
	}
	for _, in := range []string{"", "gpu", "GPU", "CPU", "cuda:", "cuda:-1", "cuda:+1", "cuda:x", "cuda:1:2", "cuda: 1", " cpu", "cuda0", "cuda:99999999999999999999"} {
		_, err := ParseSpec(in)
		if err == nil {
			t.Errorf("ParseSpec(%q) accepted", in)
			continue
		}
		if !strings.Contains(err.Error(), "want auto, cpu, cuda or cuda:N") {
			t.Errorf("ParseSpec(%q): %v does not list the choices", in, err)
		}
	}
	if _, err := ParseSpec("gpu"); err == nil || err.Error() != `device "gpu": want auto, cpu, cuda or cuda:N` {
		t.Errorf(`ParseSpec("gpu") = %v`, err)
	}
}

func TestValidPrecision(t *testing.T) {
	for _, p := range []string{"", "fp32", "tf32", "bf16"} {
		if err := ValidPrecision(p); err != nil {
			t.Errorf("ValidPrecision(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"fp16", "FP32", "bf16 ", "int8"} {
		err := ValidPrecision(p)
		if err == nil || !strings.Contains(err.Error(), "want fp32, tf32 or bf16") {
			t.Errorf("ValidPrecision(%q) = %v", p, err)
		}
	}
}

// TestPrecisionsMatchCUDA holds devspec's precisions (which config checks without linking CUDA)
// to the set the CUDA backend accepts.
func TestPrecisionsMatchCUDA(t *testing.T) {
	for _, p := range []string{"", FP32, TF32, BF16, cuda.PrecisionFP32, cuda.PrecisionTF32, cuda.PrecisionBF16, "fp16", "FP32", "bf16 ", "int8"} {
		if got, want := ValidPrecision(p) == nil, cuda.ValidPrecision(p) == nil; got != want {
			t.Errorf("precision %q: devspec accepts %v, cuda accepts %v", p, got, want)
		}
	}
}

// logLines collects what Open logs.
func logLines() (*[]string, func(string)) {
	var lines []string
	return &lines, func(s string) {
		if strings.Contains(s, "\n") {
			panic("multi-line log message: " + s)
		}
		lines = append(lines, s)
	}
}

// noLibs makes the CUDA backend fail to load its driver on any machine.
var noLibs = cuda.Options{DriverPaths: []string{"/nonexistent/libcuda.so.1"}, CublasPaths: []string{"/nonexistent/libcublas.so"}, Dirs: []string{}}

func TestCPU(t *testing.T) {
	lines, log := logLines()
	be, err := Open("cpu", "", log)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(be)
	if _, ok := be.(*cpu.Backend); !ok {
		t.Fatalf("cpu gave %T", be)
	}
	if len(*lines) != 1 || (*lines)[0] != "device: "+be.Name() {
		t.Errorf("log %q, want one line naming %q", *lines, be.Name())
	}
	if _, ok := PeakBytes(be); ok {
		t.Error("the CPU reports device memory")
	}
	// A precision other than fp32 is noted, not refused: the CPU computes in fp32.
	lines, log = logLines()
	be, err = Open("cpu", "bf16", log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(*lines, "\n"), "the CPU computes in fp32") {
		t.Errorf("no fp32 note for bf16 on the CPU: %q", *lines)
	}
	lines, log = logLines()
	if _, err := Open("cpu", "fp32", log); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(*lines, "\n"), "computes in fp32") {
		t.Errorf("fp32 on the CPU noted: %q", *lines)
	}
}

func TestBadSpecAndPrecision(t *testing.T) {
	if _, err := Open("gpu", "", nil); err == nil || err.Error() != `device "gpu": want auto, cpu, cuda or cuda:N` {
		t.Errorf(`Open("gpu") = %v`, err)
	}
	for _, spec := range []string{"cpu", "auto", "cuda"} {
		if _, err := Open(spec, "fp16", nil); err == nil || !strings.Contains(err.Error(), `precision "fp16"`) {
			t.Errorf("Open(%q, fp16) = %v", spec, err)
		}
	}
}

// TestAutoFallsBack: without a usable driver, auto picks the CPU and says why in one line.
func TestAutoFallsBack(t *testing.T) {
	lines, log := logLines()
	be, err := OpenWith(Options{Spec: "auto", Precision: "bf16", Log: log, CUDA: noLibs})
	if err != nil {
		t.Fatal(err)
	}
	defer Close(be)
	if _, ok := be.(*cpu.Backend); !ok {
		t.Fatalf("auto without a driver gave %T", be)
	}
	if len(*lines) < 1 || !strings.HasPrefix((*lines)[0], "device: cpu (auto: no usable GPU here, so the CPU computes; why: no CUDA device: ") || !strings.HasSuffix((*lines)[0], ")") {
		t.Fatalf("fallback log %q, want \"device: cpu (auto: no usable GPU here, ...; why: no CUDA device: <why>)\" first", *lines)
	}
	if !strings.Contains((*lines)[0], "/nonexistent/libcuda.so.1") {
		t.Errorf("fallback line %q does not say what was tried", (*lines)[0])
	}
	if len(*lines) != 2 || !strings.Contains((*lines)[1], "computes in fp32") {
		t.Errorf("bf16 fallback to the CPU: log %q lacks the fp32 note", *lines)
	}
}

// TestCUDAWithoutDriverFails: asking for a GPU that cannot open is an error that says why.
func TestCUDAWithoutDriverFails(t *testing.T) {
	for _, spec := range []string{"cuda", "cuda:1"} {
		lines, log := logLines()
		be, err := OpenWith(Options{Spec: spec, Log: log, CUDA: noLibs})
		if err == nil {
			Close(be)
			t.Fatalf("%s without a driver: opened %s", spec, be.Name())
		}
		if !errors.Is(err, cuda.ErrNoDevice) {
			t.Errorf("%s: %v does not match cuda.ErrNoDevice", spec, err)
		}
		if want := "device " + spec + ": no CUDA device: "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %q, want prefix %q", spec, err, want)
		}
		if len(*lines) != 0 {
			t.Errorf("%s: failure logged %q (the error says it)", spec, *lines)
		}
	}
}

// TestThisMachine uses the real library search: on a machine without a GPU (the CI machines) auto
// picks the CPU and cuda fails with ErrNoDevice; with a GPU both open it.
func TestThisMachine(t *testing.T) {
	lines, log := logLines()
	be, err := Open("auto", "", log)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(be)
	if _, isCPU := be.(*cpu.Backend); !isCPU {
		t.Logf("auto opened %s: this machine has a GPU", be.Name())
		if len(*lines) != 1 || (*lines)[0] != "device: "+be.Name() {
			t.Errorf("log %q, want the backend's name", *lines)
		}
		return
	}
	if len(*lines) != 1 || !strings.Contains((*lines)[0], "no CUDA device") {
		t.Errorf("auto fell back to the CPU with log %q, want one line saying no CUDA device", *lines)
	}
	t.Log((*lines)[0])
	g, err := Open("cuda", "", nil)
	if err == nil {
		Close(g)
		t.Fatalf("cuda opened %s where auto found no GPU", g.Name())
	}
	if !errors.Is(err, cuda.ErrNoDevice) || !strings.HasPrefix(err.Error(), "device cuda: no CUDA device: ") {
		t.Errorf("cuda on a machine without a GPU: %v", err)
	}
}
