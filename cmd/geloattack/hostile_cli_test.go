// Hostile inputs of the command line and config classes of issue 24 (classes 5, 6, 8 and 9), in
// the form of hostile_test.go's table: values that pass the YAML decoder but no field's rule,
// YAML features the config does not support, text from files that would act on the terminal,
// flag values that would allocate without bound, and the first SIGINT to commands that save
// nothing.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostileCLI runs this file's hostile cases through hostile_test.go's runner.
func TestHostileCLI(t *testing.T) {
	fx := buildFixture(t)
	cases := hostileCLICases()
	t.Run("case", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				runHostileCase(t, fx, c)
			})
		}
	})
	t.Logf("%d cases", len(cases))
}

func hostileCLICases() []hostileCase {
	var cases []hostileCase
	// A config refused at validation leaves no run directory behind.
	refused := func(name, path, value string, want ...string) hostileCase {
		return hostileCase{name: name, setup: withConfig(cfgWith(path, value)), args: trainCfg,
			want: append([]string{hostileCfg}, want...), check: noRunDir}
	}
	// Class 8: non-finite values name the file and key (they were "json: unsupported value: +Inf"
	// with a run/config.yaml left behind), and a cross-field rule names the field at fault.
	for _, v := range []string{".nan", ".inf", "-.inf"} {
		cases = append(cases,
			refused("store.synth.weights.mean "+v, "store.synth.weights", "{mean: "+v+"}", "store.synth.weights.mean"),
			refused("eval.tau "+v, "eval.tau", v, "eval.tau"),
		)
	}
	cases = append(cases,
		refused("store.synth.pr above d", "store.synth.pr", "100", "store.synth.pr: participation ratio 100, want at most d = 16"),
		// Class 5: values that used to pass validation and fail at step 1 or hang.
		refused("model.temperature 1e-300", "model.temperature", "1.0e-300", "model.temperature"),
		refused("store.synth.norm_mean 1e-300", "store.synth.norm_mean", "1.0e-300", "store.synth.norm_mean"),
		refused("store.synth.zipf_s .inf", "store.synth.zipf_s", ".inf", "store.synth.zipf_s"),
		refused("loss.unmix.eps 1e-300", "loss.unmix.eps", "1.0e-300", "loss.unmix.eps"),
		refused("sampler.shield_scale 1e300", "sampler.shield_scale", "1.0e+300", "sampler.shield_scale"),
		// YAML anchors are refused with a clear message naming the key.
		refused("YAML anchor on a value", "train.steps", "&s 6", "train.steps", "anchors"),
		// Class 4 (flags): sizes that would allocate without bound are refused before allocating.
		hostileCase{name: "bench -n 1000000000", args: []string{"bench", "-what", "gen", "-n", "1000000000"}, want: []string{"-n", "65536"}},
		hostileCase{name: "bench -n 65536 -d 65536", args: []string{"bench", "-what", "gen", "-n", "65536", "-d", "65536"}, want: []string{"-n 65536", "GiB"}},
		// Class 9: one 0 policy: an override flag given 0 is refused as the config would refuse it.
		hostileCase{name: "train -steps 0", args: trainWith("-steps", "0"), want: []string{`"0" for flag -steps`, "[1, 1000000000]"}},
		hostileCase{name: "eval -batch-size 0", args: []string{"eval", "-batch-size", "0", "x"}, want: []string{`"0" for flag -batch-size`}},
		hostileCase{name: "protocol equality -count 2", args: []string{"protocol", "equality", "-count", "2"}, want: []string{`"2" for flag -count`, "[3, "}},
		// Class 8: text from a store's meta.json is escaped on the terminal.
		hostileCase{name: "store info escapes meta.json text", recovers: true, strict: true,
			setup: withStore(editMeta(func(m map[string]any) {
				m["model"] = "evil\x1b]0;pwned\x07\x1b[2J\u202etxt.exe"
				m["source"] = "src\x1b[31mred\u2066"
			})),
			args: []string{"store", "info", "-store", victimStore}, check: noRawTerminalText},
	)
	return cases
}

// noRunDir checks that a refused command created no run directory.
func noRunDir(fx *hostileFixture, dir string, r hostileResult) []string {
	if _, err := os.Stat(filepath.Join(dir, victimRun)); err == nil {
		return []string{"the refused config left " + victimRun + " behind"}
	}
	return nil
}

// noRawTerminalText checks that store info printed the hostile model name escaped: no ESC, BEL
// or bidi control reaches the terminal, and the name is still recognisable.
func noRawTerminalText(fx *hostileFixture, dir string, r hostileResult) []string {
	var problems []string
	if r.code != 0 {
		problems = append(problems, fmt.Sprintf("exit %d, want the store described", r.code))
	}
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u2066"} {
		if strings.Contains(r.out, bad) {
			problems = append(problems, fmt.Sprintf("the output holds the raw character %q", bad))
		}
	}
	if !strings.Contains(r.out, `evil\x1b]0;pwned\a\x1b[2J\u202etxt.exe`) {
		problems = append(problems, "the output does not show the model name escaped")
	}
	return problems
}

// The first SIGINT stops a command that saves nothing (it used to be ignored by some: their work
// ran to its end, or for seconds after), with "interrupted" and the shell's status 130. The signal
// is sent once the command has used a fifth of a second of CPU, by then long past installing its
// handler.
func TestFirstSignalStopsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four commands until they are interrupted")
	}
	for _, args := range [][]string{
		{"bench", "-what", "gen", "-n", "1024", "-examples", "100000000", "-d", "1024"},
		{"protocol", "bench", "-n", "4096", "-d", "1024", "-repeats", "1000"},
		{"baseline", "-attack", "fastica", "-examples", "100000"},
		{"baseline", "-attack", "rowspace", "-examples", "1000000"},
	} {
		t.Run(strings.Join(args[:3], " "), func(t *testing.T) {
			cmd := cli(t, args...)
			cmd.Dir = t.TempDir()
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			if !waitCPU(cmd.Process.Pid, 20, done) {
				t.Fatalf("the command ended before it was interrupted:\n%s", out.String())
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running 60 s after SIGINT:\n%s", out.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(out.String(), "interrupted") {
				t.Fatalf("after SIGINT: %v, want exit status 130 and \"interrupted\":\n%s", err, out.String())
			}
		})
	}
}

// waitCPU waits until process pid has used at least ticks clock ticks of CPU (user + system), or
// until it ends (false).
func waitCPU(pid int, ticks int, done chan error) bool {
	for {
		select {
		case err := <-done:
			done <- err
			return false
		default:
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil {
			// Fields after the command name, which is in parentheses and may hold spaces.
			f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
			if len(f) > 12 {
				u, _ := strconv.Atoi(f[11])
				s, _ := strconv.Atoi(f[12])
				if u+s >= ticks {
					return true
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// baseline -attack rowspace prints why its mass sits far below its top-1 (issue 24 class 9: mass
// 0.21 beside top1 1.00 with no word on why).
func TestRowspaceMassExplained(t *testing.T) {
	out, err := cli(t, "baseline", "-attack", "rowspace", "-examples", "16").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("top1")) || !bytes.Contains(out, []byte("softmax, at temperature 1")) {
		t.Fatalf("no word on what the mass measures:\n%s", out)
	}
}
