// Package equality measures what GELO costs in accuracy: it runs the BERT forward pass of
// `geloattack store extract` (all-MiniLM-L6-v2 by default) over real texts twice, once plain and
// once with the query, key, value and output projections of chosen layers computed through the
// GELO protocol on a simulated accelerator, and compares the two (issue 18, "geloattack protocol
// equality"; the paper's own figures are in docs/paper.md, "The protocol itself").
//
// One projection call y = x W^T + b on the n rows of one text, under GELO:
//
//	trusted:      S = k gaussian shield rows, U = A [X; S] with a fresh secret A: (n+k, n+k)
//	accelerator:  U rounded to the storage precision p; Y = U W^T (float32 accumulation); Y rounded to p
//	trusted:      X W^T = (A^-1 Y)[:n] (shield rows dropped), then + b
//
// Choices this package makes where the brief leaves room:
//   - Blocks of rows. GELO mixes the rows of one text (its tokens, [CLS] and [SEP] included): A is
//     (t+k) x (t+k) for a text of t tokens and k shield rows. Texts share a forward batch but never
//     a mixing matrix, as two users' requests would not.
//   - Bias. The accelerator applies W without its bias and the trusted side adds b after unmixing:
//     A^-1 (U W^T + 1 b^T) = X W^T + (A^-1 1) b^T, which is not X W^T + 1 b^T.
//   - Randomness. A and S of each call come from their own stream keyed by (seed, text id, layer,
//     projection, mix): every precision sees the same A for a given mix, and every mix the same
//     shields, so differences between rows of the report are the precision's and the mix's alone.
//   - A is drawn as in data/gelo: Haar-orthogonal (QR of a gaussian matrix, signs fixed), or
//     Q1 diag(s) Q2^T with s log-spaced in [1, kappa] in random order (cond(A) = kappa exactly).
//   - The trusted side (Config.Trusted) computes in float64 by default: A, the mix and the unmix
//     are float64 and the result is rounded once to float32, the forward pass's type. With "fp32"
//     A, A^-1, the mix and the unmix are float32 (GEMMs with float32 accumulation). A^-1 is A^T
//     for orthogonal A, else computed (LU with partial pivoting, then the inverse, in float64 from
//     the A the trusted side holds; rounded to float32 for "fp32").
//   - Storage rounding is round-to-nearest-even (internal/numfmt.RoundBF16, RoundF16); fp16 keeps its
//     range (overflow to infinity, subnormals), and a text whose output is not finite is counted,
//     not averaged. The float64 mix result is rounded to float32 before bf16/fp16, as a GPU
//     converting a float32 tensor would. Weights stay float32 unless Config.RoundWeights.
//   - Without GELO the same rounding of the projection inputs and outputs ("precision only") is
//     run too, so that the report separates what the precision costs from what GELO adds.
//   - Nearest-neighbour equality (the analogue of the paper's top-1 token equality, as MiniLM has
//     no LM head): for each text, the other text of the evaluated set with the highest cosine of
//     sentence embeddings, computed within each run; the fraction of texts whose neighbour is the
//     same as in the reference run.
package equality
