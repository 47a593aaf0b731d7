package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gelo-research/geloattack/assess"
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/engine/device"
	"github.com/gelo-research/geloattack/internal/field"
	"github.com/gelo-research/geloattack/internal/safefile"
	"github.com/gelo-research/geloattack/internal/shard"
)

var cmdAssess = &Command{
	Name:      "assess",
	UsageLine: "[-config DEPLOY.yaml | -model DIR] [-out DIR] [-resume] [-shard i/N] [-grid] [overrides] [flags]\n       geloattack assess -merge -out DIR SHARD_DIR...\n       geloattack assess -example",
	Short:     "assess a GELO deployment: every attack's verdict with its interval, the cost, and the privacy/overhead frontier",
	Long: "Assesses a GELO deployment (docs/assessing.md). The deployment file (-example prints one with every\n" +
		"key explained; the flags below override it, and -model DIR alone assesses a documented default) says\n" +
		"what the deployer does: the model, the blocks GELO offloads, the batch of a call, the shields, the\n" +
		"mixing, what the accelerator observes, the deployer's precision, the prompts (val-split texts of a\n" +
		"source) and the secret templates (a PIN, a date, a name in a prompt). Every attack of the battery\n" +
		"(prompt decoding; text presence, proven absent or cannot tell; content recovery of each template's\n" +
		"secret, claimed only where U proves it, with look-alike victims whose secret is no candidate; with\n" +
		"-learned RUN the learned presence attack, a ranked guess beside its chance level) runs on every\n" +
		"batch of prompts (content: every victim in a batch of them), and each batch's rows are appended to\n" +
		"DIR/results.jsonl as it finishes: one line per prompt (or victim), attack and setting, the truth the\n" +
		"reports are computed from. DIR/report.md and DIR/report.html (one file, tables and an inline SVG)\n" +
		"give per attack a verdict with its exact 95% interval, never \"safe\": \"reads prompts exactly: k/n\n" +
		"[lo, hi]\" or \"no success at this budget: 0/n [0, hi]\", the claims (proofs) and wrong claims, the\n" +
		"attacker's budget, the decoded texts beside the true ones (-redact hides them and the secrets), and\n" +
		"the cost of the setting (FLOPs of protocol/overhead's protected call). -grid adds settings of more\n" +
		"shield rows and scales, of cond(A) and of the observed dtype, and marks, per attack, the cheapest\n" +
		"setting it fails at: the frontier. Ctrl-C keeps what is done; -resume continues to the bytes of an\n" +
		"uninterrupted run; -shard i/N runs every N-th batch, and -merge joins the shards' directories into\n" +
		"one report equal to a single run's.",
	Flags:            assessFlags,
	Args:             true,
	SavesOnInterrupt: true,
}

// assessFlags defines the flags of `geloattack assess` and returns what runs it.
func assessFlags(fs *flag.FlagSet) runFunc {
	var (
		cfgPath   = fs.String("config", "", "the deployment file (YAML; -example prints one); left out: the default deployment, which needs -model")
		example   = fs.Bool("example", false, "print a commented deployment file with every key and its default, and stop")
		out       = fs.String("out", "assessment", "the assessment directory: new or empty, or with -resume one this deployment started")
		resume    = fs.Bool("resume", false, "continue the assessment in -out: the batches in its results.jsonl are kept, the rest run")
		shardFlag = fs.String("shard", "", "run only shard i of N (i/N): batches i, i+N, ...; join the shards' directories with -merge")
		grid      = fs.Bool("grid", false, "add the grid around the deployment (grid: in the file): shield rows x scales (default d/2, d, 2d x 1, 3, 10), then cond(A) (1, 100, 1e4) and the observed dtype (none, bf16, fp16) each alone; mark the frontier")
		merge     = fs.Bool("merge", false, "join the assessment directories named after the flags (the shards of one assessment) into -out")
		redact    = fs.Bool("redact", false, "leave the prompts' texts and the secrets out of the reports (results.jsonl keeps them)")
		verbose   = fs.Bool("v", false, "print each attack's stages within a batch")
		cpuProf   = fs.String("cpuprofile", "", "write a Go CPU profile of the assessment to this file (read it with go tool pprof)")
		model     = fs.String("model", "", "override model: the Hugging Face decoder directory (config.json, safetensors, tokenizer.json)")
		texts     = fs.String("texts", "", "override prompts.texts: the texts SOURCE, as decode reads it (a scripts/fetch-data.sh directory, .jsonl, or one text per line)")
		blocks    = fs.String("blocks", "", "override offload.blocks: the blocks GELO offloads, comma-separated, or all")
		attBlocks = fs.String("attack-blocks", "", "override attacker.blocks: the offloaded blocks the attacker scores, comma-separated (0 and one more at least)")
		dtype     = fs.String("observe-dtype", "", "override observe.dtype: none | bf16 | fp16")
		precision = fs.String("deployer-precision", "", "override deployer.precision: fp32 | bf16 | fp16")
		learned   = fs.String("learned", "", "override attacker.learned: a train RUN directory (task retrieval on a store extracted from this model at an offloaded block) for the learned presence attack, a ranked guess (added to attacker.attacks)")
		dev       = addDecoderDeviceFlag(fs)
		prompts   = intFlag(fs, "prompts", 100, assess.Rules.Bounds("prompts.count"), "override prompts.count: the number of val-split prompts")
		victims   = intFlag(fs, "victims", 100, assess.Rules.Bounds("secrets.victims"), "override secrets.victims: content recovery's victims per secret template")
		rows      = intFlag(fs, "shield-rows", 0, assess.Rules.Bounds("shields.rows"), "override shields.rows: shield rows per call")
		frac, scl float64
	)
	floatVar(fs, &frac, "shield-frac", 0.1, assess.Rules.Bounds("shields.frac"), "override shields.frac: shield rows as a fraction of the clean rows (with shields.rows 0)")
	floatVar(fs, &scl, "shield-scale", 1, assess.Rules.Bounds("shields.scale"), "override shields.scale: the shields' row norm relative to the mean row norm of H")
	return func(ctx context.Context, args []string) error {
		if *example {
			fmt.Print(assess.Example)
			return nil
		}
		files := new(safefile.Files)
		if *merge {
			if len(args) == 0 {
				return &argsError{"assess -merge: name the shards' assessment directories"}
			}
			start := time.Now()
			s, err := assess.Merge(*out, args, files, *redact)
			if err != nil {
				return err
			}
			printVerdicts(os.Stdout, s, *out, time.Since(start))
			return nil
		}
		if len(args) > 0 {
			return &argsError{fmt.Sprintf("unexpected argument %q: only assess -merge takes words (the shards' directories)", args[0])}
		}
		if err := checkDecoderDevice(*dev); err != nil {
			return fmt.Errorf("assess: %w", err)
		}
		d := assess.DefaultDeployment()
		src := []byte(nil)
		name := "the flags"
		if *cfgPath != "" {
			var err error
			if src, err = config.ReadFile("deployment", *cfgPath); err != nil {
				return err
			}
			if err := config.CheckNotEmpty(*cfgPath, src); err != nil {
				return err
			}
			if d, err = assess.ParseDeployment(*cfgPath, src); err != nil {
				return err
			}
			name = *cfgPath
		}
		set := func(n string) bool { return flagWasSet(fs, n) }
		if set("model") {
			d.Model = *model
		}
		if set("texts") {
			d.Prompts.Texts = *texts
		}
		if set("prompts") {
			d.Prompts.Count = *prompts
		}
		if set("victims") {
			d.Secrets.Victims = *victims
		}
		if set("shield-rows") {
			d.Shields.Rows = *rows
		}
		if set("shield-frac") {
			d.Shields.Frac, d.Shields.Rows = frac, 0
		}
		if set("shield-scale") {
			d.Shields.Scale = scl
		}
		if set("observe-dtype") {
			d.Observe.DType = *dtype
		}
		if set("deployer-precision") {
			d.Deployer.Precision = *precision
		}
		if set("learned") {
			// The flag asks for the attack: an explicit attacks list gains it (an empty one is
			// every attack, learned included once it has a run).
			d.Attacker.Learned = *learned
			if len(d.Attacker.Attacks) > 0 && !slices.Contains(d.Attacker.Attacks, "learned") {
				d.Attacker.Attacks = append(d.Attacker.Attacks, "learned")
			}
		}
		if *grid {
			d.Grid.Enabled = true
		}
		var err error
		if set("blocks") {
			if d.Offload.Blocks, err = parseBlocks("-blocks", *blocks, true); err != nil {
				return err
			}
		}
		if set("attack-blocks") {
			if d.Attacker.Blocks, err = parseBlocks("-attack-blocks", *attBlocks, false); err != nil {
				return err
			}
		}
		if set("shield-rows") && set("shield-frac") {
			return errors.New("assess: -shield-rows and -shield-frac both given: shields are a count or a fraction")
		}
		if d.Prompts.Texts == "" {
			if d.Prompts.Texts, err = corpus.DefaultCorpusDir(); err != nil {
				return fmt.Errorf("assess: prompts.texts: %w (name a source with -texts)", err)
			}
		}
		if err := d.Validate(); err != nil {
			if src != nil {
				return assess.Locate(name, src, err)
			}
			return fmt.Errorf("assess: %w", err)
		}
		part := shard.All()
		if *shardFlag != "" {
			if part, err = shard.Parse(*shardFlag); err != nil {
				return fmt.Errorf("-shard: %w", err)
			}
		}
		runtime.LockOSThread() // a CUDA context is current per OS thread: keep the decoder's calls on one
		defer runtime.UnlockOSThread()
		be, err := openDecoderDevice(*dev, func(line string) { fmt.Fprintln(os.Stderr, "assess: "+line) })
		if err != nil {
			return fmt.Errorf("assess: %w", err)
		}
		defer device.Close(be)
		opt := assess.Options{Out: *out, Resume: *resume, Shard: part, Redact: *redact, Progress: os.Stderr, Files: files, Backend: be}
		if *verbose {
			opt.Log = func(line string) { fmt.Fprintln(os.Stderr, "assess: "+line) }
		}
		if *cpuProf != "" {
			stop, err := startCPUProfile(*cpuProf)
			if err != nil {
				return fmt.Errorf("-cpuprofile: %w", err)
			}
			defer stop()
		}
		start := time.Now()
		res, err := assess.Run(ctx, d, opt)
		if res != nil && res.Summary != nil && err == nil {
			printVerdicts(os.Stdout, res.Summary, *out, time.Since(start))
		}
		return err
	}
}

// parseBlocks reads a comma-separated list of block numbers ("all" when allowAll: every block,
// the empty list).
func parseBlocks(flagName, v string, allowAll bool) ([]int, error) {
	if allowAll && strings.TrimSpace(v) == "all" {
		return nil, nil
	}
	var out []int
	b := field.Bounds{Int: true, Min: 0, Max: 1 << 12}
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || !b.Allows(float64(n)) {
			return nil, fmt.Errorf("%s %q: %q is not a block number (%s)", flagName, v, s, b.Want())
		}
		out = append(out, n)
	}
	return out, nil
}

// printVerdicts writes the verdict per attack at the deployment and where the reports are.
func printVerdicts(w io.Writer, s *assess.Summary, dir string, took time.Duration) {
	for _, a := range s.Attacks {
		if a.NotApplicable != "" {
			fmt.Fprintf(w, "%s: does not apply: %s\n", a.Name, a.NotApplicable)
			continue
		}
		c := a.Cells[0]
		fmt.Fprintf(w, "%s: %s; %s\n", a.Name, c.Verdict(a.Success), c.ClaimsText(a.Claimed, a.Undecided))
	}
	fmt.Fprintf(w, "%d result rows; reports: %s/%s, %s/%s (%s)\n", s.Rows, dir, assess.ReportMD, dir, assess.ReportHTML, took.Round(time.Millisecond))
}
