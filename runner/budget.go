package runner

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/data/corpus"
	"github.com/gelo-research/geloattack/models/hf"
	"github.com/gelo-research/geloattack/models/llama"
)

// Part is one line of a Budget: what holds the memory, and how many bytes.
type Part struct {
	Name  string
	Bytes int64
}

// Budget is the resource pre-flight of the decoder side (store extract -model, decode, model
// init, task lm), as Estimate is that of retrieval and unmix runs: an upper estimate by part, from
// the shapes alone, made before anything large is read or allocated, and refused against the host
// memory available (MemAvailable, or the cgroup's or ulimit -v's headroom) with every part named. Setting
// GELOATTACK_SKIP_PREFLIGHT turns the refusal into a warning, as it does for Estimate.
type Budget struct {
	// What names the command and its input in messages ("decode -model DIR").
	What string
	// Parts are the memory estimate's lines (printed largest first).
	Parts []Part
	// Disk is what the command writes under DiskPath (0: nothing large), checked against the
	// free space of the file system holding DiskPath.
	Disk     int64
	DiskPath string
	// Reduce names the flags or keys that shrink the largest parts, for the refusal.
	Reduce string
}

// maxBytes is where byte counts saturate: far beyond any machine, and no sum of two overflows.
const maxBytes = 1 << 61

// Product multiplies non-negative sizes (bytes, element counts), saturating far beyond any
// machine instead of overflowing, so that a budget of absurd sizes is refused, not wrapped around.
func Product(xs ...int64) int64 {
	p := int64(1)
	for _, x := range xs {
		if x <= 0 {
			return 0
		}
		if p > maxBytes/x {
			return maxBytes
		}
		p *= x
	}
	return p
}

// Add appends parts (a negative size counts as 0; sizes saturate far beyond any machine).
func (b *Budget) Add(parts ...Part) {
	for _, p := range parts {
		p.Bytes = min(max(p.Bytes, 0), maxBytes)
		b.Parts = append(b.Parts, p)
	}
}

// Memory is the host memory the parts add up to, with the runtime's own overhead.
func (b Budget) Memory() int64 {
	total := int64(runtimeOverhead)
	for _, p := range b.Parts {
		total = min(total+p.Bytes, maxBytes)
	}
	return total
}

// String lists the memory parts, largest first (empty ones left out), and the runtime's.
func (b Budget) String() string {
	parts := slices.Clone(b.Parts)
	parts = append(parts, Part{"runtime", runtimeOverhead})
	slices.SortStableFunc(parts, func(x, y Part) int { return cmp.Compare(y.Bytes, x.Bytes) })
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		switch {
		case p.Bytes >= 1<<20:
			out = append(out, p.Name+" "+bytesText(p.Bytes))
		case p.Bytes > 0:
			out = append(out, p.Name+" <1 MiB")
		}
	}
	return strings.Join(out, ", ")
}

// Check compares the estimate with the host memory available and, when the budget writes to
// disk, with the free space there. It refuses with the estimate by part, or with
// GELOATTACK_SKIP_PREFLIGHT set returns the same text as a warning. When the available memory
// cannot be read, it warns that nothing was checked.
func (b Budget) Check() (warning string, err error) {
	var short []string
	need := b.Memory()
	avail, src, aerr := hostAvailable()
	switch {
	case aerr != nil:
		warning = fmt.Sprintf("resource pre-flight: host memory unknown (%v); not checked", aerr)
	case need > avail:
		short = append(short, fmt.Sprintf("needs about %s of host memory but %s is available (%s)", bytesText(need), bytesText(avail), src))
	}
	if b.Disk > 0 {
		if free, ok := diskFree(b.DiskPath); ok && b.Disk > free {
			short = append(short, fmt.Sprintf("writes %s but %s is free on the file system of %s", bytesText(b.Disk), bytesText(free), b.DiskPath))
		}
	}
	if len(short) == 0 {
		return warning, nil
	}
	msg := fmt.Sprintf("resource pre-flight: %s %s: %s", b.What, strings.Join(short, ", and "), b)
	if b.Reduce != "" {
		msg += "; reduce " + b.Reduce
	}
	msg += fmt.Sprintf(" (set %s=1 to run anyway)", SkipPreflightEnv)
	if os.Getenv(SkipPreflightEnv) != "" {
		return "warning: " + msg, nil
	}
	return "", fmt.Errorf("%s", msg)
}

// StoredWeights is the weight side of a decoder command's pre-flight, made from dir's weight-file
// headers alone (hf.EstimateLoad: nothing is mapped or read, so it comes before hf.Check and the
// load): the tensors of blocks 0..blocks-1 as hf.LoadWith holds them (bfloat16 and float16 mapped
// as stored, half the memory of float32; float32 copied to the heap), and the float32 scratch a
// forward pass converts 16-bit matrices through. Where the headers cannot be read (hf.Check
// refuses the directory right after), every tensor counts as float32 and converted.
func StoredWeights(dir string, cfg llama.Config, blocks int) []Part {
	fp, err := hf.EstimateLoad(dir, cfg, blocks)
	if err != nil {
		blocks = min(max(blocks, 1), cfg.Layers)
		fp = hf.LoadFootprint{Blocks: blocks, Weights: Product(4, cfg.LoadedParams(blocks)), DTypes: []string{hf.F32}, Scratch: cfg.ScratchBytes()}
	}
	types := make([]string, len(fp.DTypes))
	for i, t := range fp.DTypes {
		types[i] = map[string]string{hf.F32: "float32", hf.F16: "float16", hf.BF16: "bfloat16"}[t]
	}
	blocks = fp.Blocks
	name := fmt.Sprintf("weights (%s, %d blocks)", strings.Join(types, "+"), blocks)
	if blocks < cfg.Layers {
		name = fmt.Sprintf("weights (%s, blocks 0..%d of %d)", strings.Join(types, "+"), blocks-1, cfg.Layers)
	}
	return []Part{{Name: name, Bytes: fp.Weights},
		{Name: "float32 conversion buffers (one block's matrices)", Bytes: fp.Scratch}}
}

// ConvertedWeights is the float32 a decoder holds when it keeps every stored 16-bit weight of
// blocks 0..blocks-1 of dir converted (models/causallm's Decoder.KeepConverted): an upper bound,
// every block's weights in float32, when some block matrix converts, and 0 for a float32
// checkpoint (the CPU computes from it in place) or when the headers cannot be read.
func ConvertedWeights(dir string, cfg llama.Config, blocks int) int64 {
	fp, err := hf.EstimateLoad(dir, cfg, blocks)
	if err != nil || fp.Scratch == 0 {
		return 0
	}
	return Product(int64(fp.Blocks), cfg.BlockBytes())
}

// KeepConverted is how much of want (float32 conversions a decoder may keep across passes
// instead of converting every pass) the host can spare beyond the budget b: three quarters of
// the memory left past b and a reserve of 1 GiB, at most want, and 0 when the available memory
// cannot be read. Keeping is a speed-up only, so it takes what is spare and never refuses; any
// other speed-only cache sizes itself the same way (assess: content's kept next-token rows).
func KeepConverted(b Budget, want int64) int64 {
	avail, _, err := hostAvailable()
	if err != nil {
		return 0
	}
	spare := (avail - b.Memory() - 1<<30) / 4 * 3
	return min(max(spare, 0), max(want, 0))
}

// TokenizerPart is the tokenizer's tables for a vocabulary of ids tokens: its id and token maps,
// the token strings and the merges (about 256 bytes a token for Llama-3's and Qwen's).
func TokenizerPart(ids int) Part {
	return Part{Name: fmt.Sprintf("tokenizer (%d ids)", ids), Bytes: Product(int64(ids), 256)}
}

// TextsPart is a text source held in memory: n texts of textBytes bytes in all.
func TextsPart(n int, textBytes int64) Part {
	return Part{Name: fmt.Sprintf("texts (%d)", n), Bytes: textBytes + Product(int64(n), 48)}
}

// LMConfig is the decoder a language-model config (model.task lm) trains with a tokenizer of
// vocab ids, in models/llama's terms (models/causallm builds this architecture), checked: its
// products are within llama's bounds, so a config of plausible numbers that would ask for a
// terabyte is refused by name before the pre-flight.
func LMConfig(cfg config.Run, vocab int) (llama.Config, error) {
	m := cfg.LM.Model // checked by lmcfg: heads divide hidden
	c := llama.Config{Architecture: "LlamaForCausalLM", VocabSize: vocab, Hidden: m.Hidden, Intermediate: m.MLP,
		Layers: m.Layers, Heads: m.Heads, KVHeads: m.Heads, HeadDim: m.HeadDim(), RMSEps: m.Eps, RopeTheta: m.RopeTheta,
		MaxPositions: m.Seq, TiedEmbeddings: true}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("lm.model (%s) with the tokenizer's %d ids: %w", m, vocab, err)
	}
	return c, nil
}

// EstimateLM is the budget of training the language model of cfg (model.task lm) on the host,
// once its tokenizer (vocab ids) and texts (n texts of textBytes bytes) are read: weights,
// gradients, AdamW moments and the checkpoint buffer (28 bytes a parameter, as Estimate), the
// activations of one step (every block's saved rows and attention probabilities over
// train.batch_size windows of lm.model.seq tokens, the vocabulary cross-entropy's 512-row logit
// chunk; x1.5 for the gradient pool), and the token stream (at most a token per byte and a BOS
// per text, 4 bytes each).
func EstimateLM(cfg config.Run, vocab, n int, textBytes int64) (Budget, error) {
	c, err := LMConfig(cfg, vocab)
	if err != nil {
		return Budget{}, err
	}
	b := Budget{What: "task lm " + configName(cfg),
		Reduce: "lm.model.hidden, lm.model.layers, lm.model.mlp, lm.model.seq, train.batch_size, lm.max_texts or the tokenizer's vocabulary"}
	p := c.Params()
	B, T := float64(cfg.Train.BatchSize), float64(cfg.LM.Model.Seq)
	d, f, L, H := float64(c.Hidden), float64(c.Intermediate), float64(c.Layers), float64(c.Heads)
	act := B*T*L*(10*d+3*f) + B*L*H*T*T + 2*512*float64(vocab) + 2*B*T*d
	b.Add(
		Part{fmt.Sprintf("weights+grads+AdamW+checkpoint (%.3gM parameters, %d x %d of them the embedding)",
			float64(p)/1e6, vocab, c.Hidden), Product(p, 28)},
		Part{fmt.Sprintf("activations (%d windows of %d tokens)", cfg.Train.BatchSize, cfg.LM.Model.Seq), clampBytes(1.5 * 4 * act)},
		Part{"token stream", Product(textBytes+int64(n), 8)},
		TokenizerPart(vocab),
		TextsPart(n, textBytes),
	)
	return b, nil
}

// preflightLM is the pre-flight of a language-model run over texts with a tokenizer of vocab ids
// (OpenLM calls it before tokenizing them or building the model): EstimateLM against the host
// memory. The warning, when not empty, is for the run's log.
func preflightLM(cfg config.Run, vocab int, texts []corpus.Text) (warning string, err error) {
	src := corpus.Source{Texts: texts}
	b, err := EstimateLM(cfg, vocab, len(texts), src.Bytes())
	if err != nil {
		return "", err
	}
	return b.Check()
}
