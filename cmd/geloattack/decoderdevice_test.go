package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/models/hf"
)

// kernelless is a CPU backend posing as a GPU whose PTX lacks one of the decoder's kernels (a
// CUDA backend whose lm.ptx predates SpanAttention).
type kernelless struct {
	engine.Backend
	hide   string
	closed *int
}

func (k kernelless) Kernel(name string) any {
	if name == k.hide {
		return nil
	}
	return k.Backend.Kernel(name)
}

func (k kernelless) Name() string { return "cuda:0 (fake, without " + k.hide + ")" }

func (k kernelless) Close() error {
	*k.closed++
	return k.Backend.Close()
}

// fakeOpener opens the real CPU for "cpu" and, for any other spec, a CPU posing as a GPU that
// lacks the kernel hide (noGPU: fails as a machine without one does). It counts what it opened
// and closed.
type fakeOpener struct {
	hide   string
	noGPU  bool
	opened []string
	closed int
}

func (f *fakeOpener) open(spec, precision string, log func(string)) (engine.Backend, error) {
	f.opened = append(f.opened, spec+"/"+precision)
	if spec == device.CPU {
		return device.Open(spec, precision, log)
	}
	if f.noGPU {
		return nil, errors.New("device cuda: no CUDA device: libcuda.so.1 not found")
	}
	be, err := device.Open(device.CPU, precision, nil)
	if err != nil {
		return nil, err
	}
	log("device: cuda:0 (fake)")
	return kernelless{Backend: be, hide: f.hide, closed: &f.closed}, nil
}

// A GPU backend without the decoder's kernels: auto closes it and falls back to the CPU with one
// line naming the GPU and the missing kernel; cuda and cuda:N refuse, naming the kernel and how to
// rebuild it, and open nothing else. Every backend is opened in fp32.
func TestOpenDecoderDeviceFallsBackOrRefuses(t *testing.T) {
	for _, hide := range []string{engine.KernelSpanAttention, engine.KernelRoPE} {
		t.Run(hide, func(t *testing.T) {
			f := &fakeOpener{hide: hide}
			var logged []string
			be, err := openDecoderDeviceWith("auto", func(l string) { logged = append(logged, l) }, f.open)
			if err != nil {
				t.Fatalf("auto: %v", err)
			}
			defer be.Close()
			if !strings.HasPrefix(be.Name(), "cpu (") {
				t.Errorf("auto gave %q, want the CPU", be.Name())
			}
			want := fmt.Sprintf(`device: cpu (auto: cuda:0 (fake, without %s) lacks the decoder's kernels, so the CPU computes; why: causallm: the decoder cannot run on cuda:0 (fake, without %s): engine: backend "cuda:0 (fake, without %s)" has no kernel %q`, hide, hide, hide, hide)
			if !slices.ContainsFunc(logged, func(l string) bool { return strings.HasPrefix(l, want) }) {
				t.Errorf("auto logged %q, want a line starting %q", logged, want)
			}
			if f.closed != 1 || strings.Join(f.opened, ",") != "auto/fp32,cpu/fp32" {
				t.Errorf("auto opened %v and closed the GPU %d times, want auto then cpu in fp32, the GPU closed once", f.opened, f.closed)
			}
			for _, spec := range []string{"cuda", "cuda:1"} {
				f := &fakeOpener{hide: hide}
				be, err := openDecoderDeviceWith(spec, nil, f.open)
				if err == nil {
					be.Close()
					t.Fatalf("%s: opened %s without the decoder's kernels", spec, be.Name())
				}
				for _, want := range []string{"-device " + spec + ": ", fmt.Sprintf("no kernel %q", hide), "scripts/build-ptx.sh", "GELOATTACK_CUDA_PTX"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: error %q lacks %q", spec, err, want)
					}
				}
				if f.closed != 1 || len(f.opened) != 1 {
					t.Errorf("%s: opened %v, closed %d: want the GPU alone, closed", spec, f.opened, f.closed)
				}
			}
		})
	}
}

// A machine without a GPU: auto is the CPU (engine/device's fallback), cuda fails naming why,
// cpu is the CPU; a bad spec is refused before anything opens.
func TestOpenDecoderDeviceWithoutGPU(t *testing.T) {
	f := &fakeOpener{noGPU: true}
	if _, err := openDecoderDeviceWith("cuda", nil, f.open); err == nil || !strings.Contains(err.Error(), "-device cuda: device cuda: no CUDA device: libcuda.so.1 not found") {
		t.Errorf("cuda without a GPU: %v", err)
	}
	be, err := openDecoderDeviceWith("cpu", nil, f.open)
	if err != nil || !strings.HasPrefix(be.Name(), "cpu (") {
		t.Fatalf("cpu: %v, %v", be, err)
	}
	be.Close()
	f = &fakeOpener{}
	if _, err := openDecoderDeviceWith("gpu", nil, f.open); err == nil || !strings.Contains(err.Error(), `-device: device "gpu": want auto, cpu, cuda or cuda:N`) || len(f.opened) != 0 {
		t.Errorf("a bad spec: %v, opened %v", err, f.opened)
	}
	// This machine's own device, through engine/device.
	noGPU(t)
	var logged []string
	be, err = openDecoderDevice("auto", func(l string) { logged = append(logged, l) })
	if err != nil {
		t.Fatal(err)
	}
	be.Close()
	if len(logged) != 1 || !strings.HasPrefix(logged[0], "device: cpu (auto: no usable GPU here") {
		t.Errorf("auto without a GPU logged %q", logged)
	}
	if _, err := openDecoderDevice("cuda", nil); err == nil || !strings.Contains(err.Error(), "no CUDA device") {
		t.Errorf("cuda without a GPU: %v, want a refusal naming why", err)
	}
}

// The decoder commands that prove (decode, assess) document -device with its default and the fp32
// rule, and offer no -precision (the claims' bounds assume an fp32 recomputation); store extract
// offers -precision, saying the CPU refuses tf32 and bf16 and that the store records it.
func TestDecoderCommandsDeviceHelp(t *testing.T) {
	deviceLine := regexp.MustCompile(`(?m)^  -device string\n\s+device the decoder's forward passes run on: auto .*never tf32 or bf16: the claims' bounds .* assume the attacker recomputes the rows in fp32.*\(default "auto"\)$`)
	for _, c := range []struct {
		cmd  *Command
		path string
	}{{cmdDecode, "geloattack decode"}, {cmdAssess, "geloattack assess"}} {
		var out bytes.Buffer
		if err := c.cmd.run(context.Background(), c.path, []string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s -h: %v", c.path, err)
		}
		page := out.String()
		if !deviceLine.MatchString(page) {
			t.Errorf("%s -h lacks -device with the fp32 rule and default auto:\n%s", c.path, page)
		}
		if strings.Contains(page, "\n  -precision ") {
			t.Errorf("%s -h offers -precision", c.path)
		}
	}
	var out bytes.Buffer
	if err := cmdStoreExtract.run(context.Background(), "geloattack store extract", []string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("store extract -h: %v", err)
	}
	for _, re := range []string{
		`(?m)^  -device string\n\s+device the decoder's forward passes run on: auto .*GEMMs run in -precision's precision on a GPU.*\(default "auto"\)$`,
		`(?m)^  -precision string\n\s+decoder models only: .*fp32, tf32 or bf16.*refused on the CPU.*compute_precision.*a deployer of that precision.*\(default "fp32"\)$`,
		`(?m)^  -embedding string\n\s+decoder models only: .*final .*stored .*only the blocks up to -layer.*candidate_embedding.*\(default "final"\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("store extract -h does not match %s:\n%s", re, out.String())
		}
	}
}

// Flags are checked before any work: a bad -device names the flag, and store extract refuses
// -device for a BERT encoder, which runs on the CPU.
func TestDecoderCommandsRefuseBadDevice(t *testing.T) {
	model, texts := tinyDecoder(t, 3, hf.F32)
	cases := []struct {
		cmd  *Command
		args []string
		want string
	}{
		{cmdDecode, []string{"-model", model, "-texts", texts, "-device", "tpu"}, `decode: -device: device "tpu"`},
		{cmdAssess, []string{"-model", model, "-texts", texts, "-device", "cuda:x", "-out", t.TempDir()}, `assess: -device: device "cuda:x"`},
		{cmdStoreExtract, []string{"-model", model, "-texts", texts, "-device", "gpu", "-out", t.TempDir() + "/s"}, `-device: device "gpu"`},
		{cmdStoreExtract, []string{"-model", t.TempDir(), "-texts", texts, "-device", "cpu", "-out", t.TempDir() + "/s"}, "-point, -dedup, -device, -precision and -embedding apply to decoder models"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		err := c.cmd.run(context.Background(), "geloattack "+c.cmd.Name, c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want %q", c.cmd.Name, c.args, err, c.want)
		}
	}
}

// On a machine without a GPU: -device cuda refuses before the weights are read, naming why;
// -device cpu and auto run, auto saying why it took the CPU, and the header names the device that
// computed.
func TestDecoderCommandsRunOnTheNamedDevice(t *testing.T) {
	noGPU(t)
	model, texts := tinyDecoder(t, 5, hf.BF16)
	tmp := t.TempDir()
	dec := []string{"decode", "-model", model, "-texts", texts, "-max-texts", "40", "-max-tokens", "8", "-split", "train", "-batches", "1", "-bag-only", "-quiet"}
	ext := []string{"store", "extract", "-model", model, "-texts", texts, "-max-texts", "8", "-layer", "1", "-quiet"}
	cases := []struct {
		args []string
		ok   bool
		want []string
	}{
		{append(dec, "-device", "cuda"), false, []string{"decode: -device cuda: device cuda: no CUDA device"}},
		{append(dec, "-device", "cpu"), true, []string{"decode: device: cpu (", "tokens, on cpu ("}},
		{append(ext, "-device", "cuda", "-out", tmp+"/a"), false, []string{"-device cuda: device cuda: no CUDA device"}},
		{append(ext, "-out", tmp+"/b"), true, []string{"extract: device: cpu (auto: no usable GPU here", "texts, on cpu ("}},
	}
	for _, c := range cases {
		out, err := cli(t, c.args...).CombinedOutput()
		if (err == nil) != c.ok {
			t.Errorf("%v: err %v, want success %v:\n%s", c.args, err, c.ok, out)
		}
		for _, w := range c.want {
			if !bytes.Contains(out, []byte(w)) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out)
			}
		}
		if !c.ok && bytes.Contains(out, []byte("tokens, on ")) {
			t.Errorf("%v: refused after loading the weights:\n%s", c.args, out)
		}
	}
}
