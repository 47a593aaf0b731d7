package assess

// Example is the commented deployment file `geloattack assess -example` prints: every key with its
// default (DefaultDeployment), so it is also the documentation of the format. A test parses it.
const Example = `# A GELO deployment to assess: geloattack assess -config THIS_FILE [-out DIR] [-grid]
# (docs/assessing.md). Every key is optional but model, which -model may give instead; flags
# override the file (-model, -prompts, -texts, -shield-frac, -shield-rows, -shield-scale,
# -observe-dtype, -blocks, -attack-blocks, -deployer-precision, -learned, -victims).

# The Hugging Face decoder directory: config.json, *.safetensors, tokenizer.json.
model: /path/to/model

# Roots every secret draw: batch b of every setting uses sampler seed seed + b.
seed: 0

offload:
  # The blocks whose Q/K/V projection GELO offloads, each call with a fresh A and fresh shields.
  # Empty: every block.
  blocks: []

batch:
  # One protected call holds texts_per_call texts of at most tokens_per_text tokens (BOS
  # included; longer prompts are cut): n = texts_per_call x tokens_per_text rows at most.
  texts_per_call: 4
  tokens_per_text: 16

shields:
  kind: gaussian     # gaussian | student_t
  frac: 0.1          # ceil(frac x n) shield rows per call, when rows is 0
  rows: 0            # > 0: this many shield rows per call (past full rank: rows >= d - n)
  scale: 1           # the shields' row norm relative to the mean row norm of H

mixing:
  kind: orthogonal   # orthogonal (Haar) | kappa (cond(A) = kappa)
  kappa: 1

observe:
  dtype: none        # what the accelerator stores U in: none (float32) | bf16 | fp16
  rows: 1            # the fraction of U's rows it sees, in (0, 1]

deployer:
  precision: fp32    # the deployer's compute precision: fp32 | bf16 | fp16

prompts:
  # The texts source, as 'geloattack decode -texts' reads it (a scripts/fetch-data.sh
  # directory, a .jsonl file, or one text per line). Empty: the default corpus directory.
  texts: ""
  corpora: []        # corpora of a fetch-script directory; empty: all present
  # The first count texts of the source that fall in the val split (the stores' rule,
  # data.SplitOf with val_frac) and have at least 2 tokens.
  count: 100
  val_frac: 0.1

secrets:
  # Content recovery: each template is a prompt with a secret slot {x} and text after it (a
  # decoder's rows up to the secret's end are also those of every longer secret, so the rows
  # after the slot are what tell them apart; a template whose slot is last is refused). Each
  # victim's filled template is sent in a batch with other prompts; the attacker, who knows the
  # template and the candidate set, claims a secret only where U proves it. set: pin
  # (0000-9999) | date (every day of 1925-2024, "March 5, 1987") | name (WordNet's person
  # names, from the corpus directory); candidates: keep a seeded subset of this many (0: all).
  # Every filled template must be shorter than batch.tokens_per_text. Empty: content does not run.
  #   - {name: birth, pattern: "I was born on {x}, thanks", set: date}
  #   - {name: name, pattern: "my name is {x}, thanks", set: name}
  templates:
    - {name: pin, pattern: "my PIN is {x}, thanks", set: pin, candidates: 0}
  victims: 100         # victims per template whose secret is drawn from its set
  # Victims per template whose secret is absent from the set but looks alike: alternately one
  # character longer (a five-digit number for the PINs) and a candidate removed from those
  # scored (its neighbours stay). Never to be claimed; 0: none.
  absent_victims: 100

attacker:
  attacks: []        # the battery's attacks to run (decode, presence, content, learned); empty: all (learned with a run, content with templates)
  blocks: []         # offloaded blocks the attacker scores: 0 (the bag) and more (the order); empty: 0, 1
  beam: 0            # live prefixes of the order search; 0: 4 per text
  joint: false       # rank extensions by the sum of the scored blocks' evidence
  max_steps: 0       # longest text the search reads; 0: n_obs or the model's context
  rank: false        # where certification fails (past full rank, rows dropped), read the order by ranking
  rank_bag: 0        # with rank: keep only this many best tokens of the bag; 0: the whole bag
  # The learned presence attack: a 'geloattack train' run directory of task retrieval on a store
  # extracted from this model (store extract -model, -point attn-input, -layer an offloaded block).
  # Its verdict is a ranked guess beside its chance level, never a claim. Empty: not run.
  learned: ""

grid:
  # -grid (or enabled: true) adds, for the frontier (privacy against overhead), a setting per
  # shield count and scale below, then one per cond(A) and one per observed dtype, each alone at
  # the deployment's shields; the rest of the deployment unchanged (default: 14 settings).
  enabled: false
  shield_rows: []    # empty: d/2, d and 2d for a model of width d
  shield_scales: []  # empty: 1, 3, 10
  kappas: []         # cond(A), 1 meaning orthogonal; empty: 1, 100, 10000
  observe_dtypes: [] # none | bf16 | fp16; empty: all three
`
