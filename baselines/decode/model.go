// Package decode reads whole prompts back from one GELO batch of a decoder LLM, training-free
// (issue 28). GELO offloads each block's Q/K/V projection of X_l = RMSNorm(h_l)·g_l, so the
// accelerator sees U_l = A_l [X_l; S_l] for every block l, and rowspace(U_l) contains every row
// of X_l. An attacker with the open weights:
//
//  1. tests every vocabulary row of block 0 (RMSNorm(E[v])·g_0: position-free, since rotary
//     embeddings act after the projection) against U_0: the bag of tokens of the batch;
//  2. reads each text in order: block l >= 1's row at position t depends only on tokens <= t, so
//     a prefix extended by each bag token is kept when its rows at the attacked blocks lie in
//     their U_l (beam search, the prefix's KV cache reused);
//  3. in generation, each step offloads one new row plus shields; the same test reads each token.
//
// Scores come from baselines/membership (residual below full rank, leverage or top-k past it);
// claims only where an absolute test holds (see Run).
package decode

// Model is what the attack needs of an open-weights decoder: the rows GELO mixes at each block.
type Model interface {
	// D is the hidden width, Blocks the number of transformer blocks, Vocab the vocabulary size.
	D() int
	Blocks() int
	Vocab() int
	// Rows is the deployer's forward pass of one text: out[l] holds block l's attention-input
	// rows RMSNorm(h_l)·g_l for every position, (len(tokens), d), for l < upto.
	Rows(tokens []int, upto int) ([][]float32, error)
	// Block0 writes block 0's attention-input rows of tokens [lo, hi): (hi-lo, d).
	Block0(lo, hi int, dst []float32) error
	// NewPrefix is the empty prefix (no token yet); MaxLen the longest prefix it can grow to.
	NewPrefix() Prefix
	MaxLen() int
}

// Prefix is a token prefix with whatever cache the model keeps (a KV cache per block).
type Prefix interface {
	// Len is the number of tokens.
	Len() int
	// Extend writes, for each candidate token c appended at position Len(), its attention-input
	// rows at blocks 1..upto-1: dst (len(cands), upto-1, d). The prefix is unchanged.
	Extend(cands []int, upto int, dst []float32) error
	// Append is the prefix with tok appended; the receiver stays valid.
	Append(tok int) (Prefix, error)
}

// PrefixBatcher is a Model that can extend several of its prefixes by the same candidates in one
// pass (Llama: causallm.Decoder.ForwardAlternativesOf), which the search uses for a step's live
// prefixes when their candidates fit one batch.
type PrefixBatcher interface {
	// ExtendAll is Extend of every prefix of ps (the model's own) by cands in one pass: dst
	// (len(ps), len(cands), upto-1, d). The prefixes are unchanged.
	ExtendAll(ps []Prefix, cands []int, upto int, dst []float32) error
	// BatchRows is the most candidate rows one ExtendAll pass should take (0: never batch).
	BatchRows() int
}

// PrefixRecycler is a Model whose prefixes hold memory it can reuse (Llama: a KV cache on the
// backend, where buffers are never freed). Run calls RecyclePrefixes after each batch: every
// prefix made since the last call is dead then (a batch keeps no state of the ones before), and
// the model may hand their memory to the next batch's prefixes.
type PrefixRecycler interface {
	RecyclePrefixes()
}
