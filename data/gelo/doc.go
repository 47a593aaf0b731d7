// Package gelo draws GELO-obfuscated examples (SPEC §3) from a data.Corpus and batches them ahead
// of the consumer on worker goroutines.
//
// An example is: positives drawn from one split, t token rows of each (H, optionally centered),
// k secret shield rows S, X = [H; S] with its rows permuted, a fresh secret invertible A, and the
// observed rows of U = A X, optionally rounded to bf16/fp16. Models only ever see those observed
// rows (Batch.U); the rest of an Example is ground truth for losses and metrics. A MixOnDevice
// pipeline leaves the product to the model's device: its batches carry X and the observed rows of
// A (Batch.X, Batch.A) instead of U, and the model forms U from them and nothing else.
//
// Choices this package makes where the SPEC is silent:
//   - Randomness. Each generation stage (parameters, texts, shields, permutation, mixing,
//     observation) has its own stream keyed by (seed, split, example index, stage), so an example
//     depends on nothing else: not on the number of workers, nor on what was generated before;
//     and sweep cells that differ only in, say, shield kind share positives, tokens and A.
//   - Integer ranges (positives, tokens_per_text) draw inclusively; log_uniform integers are the
//     floor of a log-uniform draw in [min, max+1).
//   - Counts use ceil with a 1e-9 tolerance, so 0.55*100 rows is 55, not 56.
//   - token_sampling random keeps the chosen positions in text order.
//   - Manifold shields: each shield row picks its donor text uniformly among the split's texts
//     that are not positives of the example, then a uniform row of it. With center true the
//     donor row is centered by the clean rows' mean (so shields look like H's rows) before it is
//     rescaled to norm shield_scale * m.
//   - student_t shields are rescaled by the theoretical standard deviation sqrt(df/(df-2)), so
//     E||s||^2 = (shield_scale * m)^2 as for gaussian shields.
//   - Partial observation keeps the observed rows in ascending row order (the rows of U have no
//     meaningful order: X is permuted and A is random); only those rows of A X are computed.
//   - Texts with no tokens are left out of the split pools.
//   - Example.A is float32, the form an accelerator-side protocol would hold; it is drawn in
//     float64 (Householder QR) and rounded once.
package gelo
