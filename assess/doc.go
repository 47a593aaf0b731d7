// Package assess answers the deployer's question "what does GELO protect in my deployment, and at
// what cost?" with evidence (issue 40, docs/assessing.md).
//
// A Deployment (deployment.go) is the deployer's setting as data: the model directory, the blocks
// GELO offloads, the batch the accelerator sees, the shields, the mixing, what the accelerator
// observes, the deployer's compute precision, the prompts to test and the secret templates
// (secrets.go). Run draws the prompts (the val split of a texts source, by the stores' rule),
// runs every attack of the battery (attack.go: baselines/attacks' assessed attacks, in its
// order, each bound to an Attack value with the attacker's budget in words; content.go puts each
// template's victims, and look-alikes whose secret is no candidate, in batches of the prompts)
// on every setting (the deployment, and with a grid the variations around it), and appends one
// line per prompt (or victim) per attack per setting to results.jsonl as each batch finishes.
// That file is the truth: report.md, report.html and frontier.svg are computed from it and the
// resolved deployment.yaml alone (Summarize, Markdown, HTML), so a resumed, sharded or merged
// assessment gives the same bytes as one uninterrupted run.
//
// A verdict is a count of prompts with its exact 95% interval (eval.ClopperPearson): "reads
// prompts exactly: 97/100 [0.915, 0.994]" or "no success at this budget: 0/100 [0.000, 0.037]",
// never "safe". A claim is a proof: decode claims a text U proves; presence claims only that a
// text is absent, when one of its rows exceeds a bound every row of X meets (proof.go), and says
// it cannot tell otherwise; content recovery claims a secret only where U proves it (and proves
// a secret absent where no candidate can be it), per template; the learned attack (learned.go,
// -learned RUN) claims nothing, its top-1 rate a ranked guess beside its chance level. The cost of a setting is protocol/overhead's
// protected layer counted in FLOPs (cost.go), not a timing; the grid varies shield rows x scale,
// then cond(A) and the observed dtype alone (setting.go).
package assess
