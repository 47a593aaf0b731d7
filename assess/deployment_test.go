package assess

import (
	"reflect"
	"strings"
	"testing"
)

// The example -example prints is a valid deployment file whose every value is the default.
func TestExampleIsTheDefault(t *testing.T) {
	d, err := ParseDeployment("example.yaml", []byte(Example))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultDeployment()
	want.Model = "/path/to/model"
	// Empty lists in the file are empty, not nil; compare what they mean.
	d.Offload.Blocks, d.Prompts.Corpora, d.Attacker.Attacks, d.Attacker.Blocks = nil, nil, nil, nil
	d.Grid.ShieldRows, d.Grid.ShieldScales, d.Grid.Kappas, d.Grid.ObserveDTypes = nil, nil, nil, nil
	if !reflect.DeepEqual(d, want) {
		t.Errorf("the example is not the default:\n got %+v\nwant %+v", d, want)
	}
}

// A deployment file is read strictly: each mistake is refused with the file, line, column and key.
func TestDeploymentFileIsStrict(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown key", "model: m\nshields:\n  scael: 3\n", "deployment d.yaml:3:"},
		{"unknown top key", "modle: m\n", "deployment d.yaml:1:"},
		{"fraction in an integer", "batch:\n  texts_per_call: 2.5\n", "deployment d.yaml:2:19: batch.texts_per_call: 2.5, want an integer"},
		{"string in an integer", "prompts:\n  count: '10'\n", "prompts.count: '10', want an integer"},
		{"string in a number", "shields:\n  scale: big\n", "shields.scale: big, want a number"},
		{"null", "shields:\n  scale:\n", "shields.scale: no value"},
		{"out of range", "shields:\n  frac: 1.5\n", "deployment d.yaml:2:9: shields.frac: 1.5, want a value in [0, 1]"},
		{"zero texts", "batch: {texts_per_call: 0}\n", "batch.texts_per_call: 0, want an integer in [1, 4096]"},
		{"manifold", "shields: {kind: manifold}\n", "shields.kind: manifold is not assessed"},
		{"bad dtype", "observe: {dtype: fp8}\n", "observe.dtype: \"fp8\", want none, bf16 or fp16"},
		{"bad precision", "deployer: {precision: int8}\n", "deployer.precision: \"int8\""},
		{"unknown attack", "attacker: {attacks: [decode, guess]}\n", "deployment d.yaml:1:30: attacker.attacks[1]: \"guess\", want one of [decode presence content learned]"},
		{"repeated block", "offload: {blocks: [0, 1, 1]}\n", "offload.blocks[2]: block 1 is listed twice"},
		{"negative block", "attacker: {blocks: [0, -1]}\n", "attacker.blocks[1]: -1"},
		{"list for a value", "model: [a, b]\n", "model: [a, b], want a string"},
		{"value for a list", "offload: {blocks: 3}\n", "offload.blocks: 3, want a list"},
		{"two documents", "model: a\n---\nmodel: b\n", "more than one YAML document"},
		{"alias", "model: &m a\nprompts: {texts: *m}\n", "anchors and aliases"},
		{"grid scale", "grid: {shield_scales: [1, 0]}\n", "grid.shield_scales[1]: 0"},
		{"grid kappa", "grid: {kappas: [1, 0.5]}\n", "deployment d.yaml:1:20: grid.kappas[1]: 0.5"},
		{"grid kappa twice", "grid: {kappas: [100, 100]}\n", "grid.kappas[1]: 100 is listed twice"},
		{"grid dtype", "grid: {observe_dtypes: [bf16, fp8]}\n", "grid.observe_dtypes[1]: \"fp8\", want none, bf16 or fp16"},
		{"not a mapping", "- a\n- b\n", "is a mapping of keys"},
		{"content without templates", "secrets: {templates: []}\nattacker: {attacks: [content]}\n", "attacker.attacks[0]: content needs secret templates (secrets.templates)"},
		// A decoder's rows up to the secret's end are those of every longer secret: a slot with
		// nothing after it is refused at load, at its key.
		{"slot last", "secrets:\n  templates:\n    - {name: pin, pattern: 'my PIN is {x}', set: pin}\n",
			"deployment d.yaml:3:28: secrets.templates[0].pattern: template \"my PIN is {x}\" ends with its slot {x}"},
		{"slot last but space", "secrets:\n  templates:\n    - name: pin\n      set: pin\n      pattern: 'my PIN is {x}  '\n",
			"deployment d.yaml:5:16: secrets.templates[0].pattern: template"},
		{"two slots", "secrets: {templates: [{name: pin, pattern: '{x} and {x} ok', set: pin}]}\n", "secrets.templates[0].pattern: template \"{x} and {x} ok\": holds {x} 2 times"},
		{"no slot", "secrets: {templates: [{name: pin, pattern: 'my PIN', set: pin}]}\n", "secrets.templates[0].pattern"},
		{"unknown set", "secrets: {templates: [{name: pin, pattern: '{x} ok', set: iban}]}\n", "secrets.templates[0].set: \"iban\", want one of [pin date name]"},
		{"bad template name", "secrets: {templates: [{name: 'My PIN', pattern: '{x} ok', set: pin}]}\n", "secrets.templates[0].name: \"My PIN\""},
		{"template twice", "secrets: {templates: [{name: a, pattern: '{x} ok', set: pin}, {name: a, pattern: '{x} ok', set: date}]}\n", "secrets.templates[1].name: \"a\" is listed twice"},
		{"one candidate", "secrets: {templates: [{name: a, pattern: '{x} ok', set: pin, candidates: 1}]}\n", "secrets.templates[0].candidates: 1, want an integer in [2, 16777216]"},
		{"unknown template key", "secrets: {templates: [{name: a, pattern: '{x} ok', set: pin, slot: x}]}\n", "deployment d.yaml:1:"},
		{"no victims", "secrets: {victims: 0}\n", "secrets.victims: 0, want an integer in [1, 1048576]"},
		{"fractional look-alikes", "secrets: {absent_victims: 2.5}\n", "secrets.absent_victims: 2.5, want an integer"},
		{"rank bag without rank", "attacker: {rank_bag: 5}\n", "attacker.rank_bag: 5 needs attacker.rank: true"},
	} {
		_, err := ParseDeployment("d.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// Resolve writes out what depends on the model and checks the blocks against it.
func TestResolve(t *testing.T) {
	d := DefaultDeployment()
	d.Model = "m"
	r, err := d.Resolve(3, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Offload.Blocks, []int{0, 1, 2}) || !reflect.DeepEqual(r.Attacker.Blocks, []int{0, 1}) ||
		!reflect.DeepEqual(r.Attacker.Attacks, []string{"decode", "presence", "content"}) || !reflect.DeepEqual(r.Grid.ShieldRows, []int{32, 64, 128}) ||
		!reflect.DeepEqual(r.Grid.ShieldScales, []float64{1, 3, 10}) {
		t.Errorf("resolved: %+v", r)
	}
	d.Offload.Blocks = []int{0, 5}
	if _, err := d.Resolve(3, 64); err == nil || !strings.Contains(err.Error(), "offload.blocks[1]: block 5 of a model with 3 blocks") {
		t.Errorf("block beyond the model: %v", err)
	}
	d.Offload.Blocks = nil
	d.Attacker.Attacks = []string{"decode", "learned"}
	if _, err := d.Resolve(3, 64); err == nil || !strings.Contains(err.Error(), "attacker.attacks[1]: learned needs a trained checkpoint: attacker.learned (-learned RUN)") {
		t.Errorf("learned without a run: %v", err)
	}
	d.Attacker.Learned = "run"
	if _, err := d.Resolve(3, 64); err != nil {
		t.Errorf("learned with a run: %v", err)
	}
	d.Attacker.Attacks, d.Attacker.Learned = nil, ""
	// Without secret templates, content recovery is left out of the default battery.
	d.Secrets.Templates = nil
	if r, err := d.Resolve(3, 64); err != nil || !reflect.DeepEqual(r.Attacker.Attacks, []string{"decode", "presence"}) {
		t.Errorf("no templates: attacks %v (%v)", r.Attacker.Attacks, err)
	}
	d.Model = ""
	if _, err := d.Resolve(3, 64); err == nil || !strings.Contains(err.Error(), "model: required") {
		t.Errorf("no model: %v", err)
	}
	// The grid: the deployment first, then rows x scales, without the deployment's own point.
	d = DefaultDeployment()
	d.Shields.Rows, d.Shields.Scale = 64, 1
	d.Grid = Grid{Enabled: true, ShieldRows: []int{64, 128}, ShieldScales: []float64{1, 10}}
	var names []string
	for _, s := range d.Settings() {
		names = append(names, s.Name)
	}
	if want := []string{"deployment", "rows=64,scale=10", "rows=128,scale=1", "rows=128,scale=10"}; !reflect.DeepEqual(names, want) {
		t.Errorf("settings %v, want %v", names, want)
	}
	// Resolved, the grid adds cond(A) 100 and 1e4 and the two low-precision dtypes, each alone at
	// the deployment's shields: 14 settings by default.
	d.Model = "m"
	r, err = d.Resolve(2, 64)
	if err != nil {
		t.Fatal(err)
	}
	names = names[:0]
	for _, s := range r.Settings() {
		names = append(names, s.Name)
	}
	if want := []string{"deployment", "rows=64,scale=10", "rows=128,scale=1", "rows=128,scale=10", "kappa=100", "kappa=10000", "dtype=bf16", "dtype=fp16"}; !reflect.DeepEqual(names, want) {
		t.Errorf("resolved settings %v, want %v", names, want)
	}
	if s := r.Settings()[4]; s.Mix != MixKappa || s.Kappa != 100 || s.ShieldRows != 64 || s.ObserveDType != DTypeNone {
		t.Errorf("kappa=100: %+v", s)
	}
	d = DefaultDeployment()
	d.Model, d.Grid.Enabled = "m", true
	if r, _ := d.Resolve(2, 64); len(r.Settings()) != 14 {
		t.Errorf("the default grid has %d settings, want 14", len(r.Settings()))
	}
}

// An attack that cannot run on the deployment says why, and the plan leaves it out.
func TestAttacksCheckTheDeployment(t *testing.T) {
	d := DefaultDeployment()
	d.Model = "m"
	d, _ = d.Resolve(2, 64)
	d.Offload.Blocks = []int{1}
	d.Attacker.Learned, d.Attacker.LearnedCheckpoint = "run", LearnedCheckpoint{Path: "run/ckpt", Block: 0}
	for _, name := range Names() {
		a, _ := Lookup(name)
		if err := a.Check(d); err == nil || !strings.Contains(err.Error(), "does not offload") {
			t.Errorf("%s with block 0 not offloaded: %v", name, err)
		}
	}
	d.Attacker.Learned = ""
	if a, _ := Lookup("learned"); a.Check(d) == nil || !strings.Contains(a.Check(d).Error(), "-learned RUN") {
		t.Errorf("learned without a checkpoint: %v", a.Check(d))
	}
	d.Offload.Blocks = []int{0, 1}
	d.Observe.Rows = 0.8
	if a, _ := Lookup("presence"); a.Check(d) == nil {
		t.Errorf("presence applies with rows dropped")
	}
	if a, _ := Lookup("decode"); a.Check(d) != nil {
		t.Errorf("decode does not apply with rows dropped: %v", a.Check(d))
	}
}

// The cost model at the settings of docs/prompt-decoding.md: +4096 rows on a batch of 71 rows at
// d 4096 is 59x the rows through the GEMM, as the docs count it.
func TestCostModel(t *testing.T) {
	s := Setting{TextsPerCall: 4, TokensPerText: 16, ShieldRows: 4096, ShieldScale: 10, Mix: MixOrthogonal, Kappa: 1}
	c := CostOf(s, 4096, 4096)
	if c.N != 64 || c.Shields != 4096 || c.RowFactor() != 65 {
		t.Errorf("n %d shields %d row factor %v", c.N, c.Shields, c.RowFactor())
	}
	// The parts, by hand: m = 4160.
	m := 4160.0
	if want := 8.0/3*m*m*m + 2*m*m*4096 + 2*m*4096*4096 + 2*m*m*4096; c.Total() != want {
		t.Errorf("total %v, want %v", c.Total(), want)
	}
	s.ShieldRows, s.ShieldFrac = 0, 0.1
	if c := CostOf(s, 64, 64); c.Shields != 7 {
		t.Errorf("10%% of 64 rows: %d shields, want 7", c.Shields)
	}
	s.Mix = MixKappa
	if CostOf(s, 64, 64).Generation <= CostOf(Setting{TextsPerCall: 4, TokensPerText: 16, ShieldFrac: 0.1, Mix: MixOrthogonal}, 64, 64).Generation {
		t.Errorf("a kappa A costs no more to draw than an orthogonal one")
	}
}
