package bpe

// ComponentTypes lists the component types the registries support, by the tokenizer.json key of
// their kind, for the external tests.
func ComponentTypes() map[string][]string {
	return map[string][]string{
		"normalizer":     normalizerTypes.names(),
		"pre_tokenizer":  preTokenizerTypes.names(),
		"decoder":        decoderTypes.names(),
		"post_processor": postProcessorTypes.names(),
	}
}
