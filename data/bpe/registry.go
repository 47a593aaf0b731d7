package bpe

import "golang.org/x/text/unicode/norm"

// The supported component types of each kind, by the "type" tokenizer.json gives them, in the
// order refusals list them. Adding a component is its file and one line here.
var (
	normalizerTypes    registry[normalizer]
	preTokenizerTypes  registry[preTokenizer]
	decoderTypes       registry[decoder]
	postProcessorTypes registry[postProcessor]
)

// init fills the registries. They cannot be initialized where they are declared: each Sequence
// constructor reads its items through its own registry, which the compiler rejects as an
// initialization cycle.
func init() {
	normalizerTypes = registry[normalizer]{kind: "normalizer", types: []entry[normalizer]{
		{"Sequence", newNormSequence},
		{"Prepend", newNormPrepend},
		{"Replace", newNormReplace},
		{"NFC", newNormUnicode(norm.NFC)},
		{"NFD", newNormUnicode(norm.NFD)},
		{"NFKC", newNormUnicode(norm.NFKC)},
		{"NFKD", newNormUnicode(norm.NFKD)},
	}}
	preTokenizerTypes = registry[preTokenizer]{kind: "pre-tokenizer", types: []entry[preTokenizer]{
		{"Sequence", newPreSequence},
		{"Split", newPreSplit},
		{"ByteLevel", newPreByteLevel},
		{"Metaspace", newPreMetaspace},
	}}
	decoderTypes = registry[decoder]{kind: "decoder", types: []entry[decoder]{
		{"Sequence", newDecSequence},
		{"Replace", newDecReplace},
		{"ByteFallback", newDecByteFallback},
		{"Fuse", newDecFuse},
		{"Strip", newDecStrip},
		{"ByteLevel", newDecByteLevel},
		{"Metaspace", newDecMetaspace},
	}}
	postProcessorTypes = registry[postProcessor]{kind: "post-processor", types: []entry[postProcessor]{
		{"TemplateProcessing", newPostTemplate},
		{"ByteLevel", newPostByteLevel},
		{"Sequence", newPostSequence},
	}}
}
