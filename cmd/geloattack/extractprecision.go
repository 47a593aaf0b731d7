package main

import (
	"fmt"

	"github.com/gelo-research/geloattack/data/store"
	"github.com/gelo-research/geloattack/engine"
	"github.com/gelo-research/geloattack/engine/device"
)

// extractPrecisionHelp is store extract's -precision help (decoder models only).
const extractPrecisionHelp = "decoder models only: GEMM precision of the forward pass on a GPU: fp32, tf32 or bf16 (GEMM inputs rounded to tf32 or bf16, fp32 accumulation); " +
	"the CPU computes in fp32 only, so tf32 and bf16 need -device cuda (or auto where a GPU opens) and are refused on the CPU. " +
	"Recorded in meta.json (compute_precision; fp32 is left out, as in stores written before the field): a tf32 or bf16 store is a deployer of that precision to every proof that compares its rows with recomputed ones (recover, baseline -attack rowspace -deployer-rows)"

// extractEmbeddingHelp is store extract's -embedding help (decoder models only).
const extractEmbeddingHelp = "decoder models only: each text's candidate embedding (the learned attacks' candidates), the normalised mean over its tokens, BOS excluded, of: " +
	"final (the final norm's rows, hidden_states[num_layers]; every block runs) or stored (the stored point's rows at -layer, before -norm and -dedup; only the blocks up to -layer are loaded and run). " +
	"Recorded in meta.json (decoder.candidate_embedding; final is left out, as in stores written before the field); assess -learned computes the final one and refuses a stored store"

// extractDeviceHelp is store extract's -device help: decode's and assess's (decoderDeviceHelp)
// but for the GEMM precision, which -precision chooses here.
const extractDeviceHelp = "device the decoder's forward passes run on: auto (a GPU when the CUDA backend opens and has the decoder's kernels, else the CPU, logging why), cpu, cuda or cuda:N (fails when no GPU opens or its kernels lack the decoder's); " +
	"GEMMs run in -precision's precision on a GPU (fp32 by default), in fp32 on the CPU"

// extractPrecision checks -precision as every device flag is checked (device.ValidPrecision) and
// returns it, fp32 for empty.
func extractPrecision(p string) (string, error) {
	if err := device.ValidPrecision(p); err != nil {
		return "", fmt.Errorf("-precision: %w", err)
	}
	if p == "" {
		return store.PrecisionFP32, nil
	}
	return p, nil
}

// backendPrecision is the GEMM precision be computes in: a CUDA backend's, fp32 for the CPU.
func backendPrecision(be engine.Backend) string {
	if p, ok := be.(interface{ Precision() string }); ok && p.Precision() != "" {
		return p.Precision()
	}
	return store.PrecisionFP32
}

// openExtractDeviceWith is openDecoderDeviceWith with the backend opened in precision (fp32, tf32
// or bf16). A backend that computes in another precision (the CPU, opened by -device cpu or by
// auto's fallback, computes in fp32 only) is closed and refused: the store would record a
// precision its rows were not computed in, or the run would be silently slower than asked.
func openExtractDeviceWith(spec, precision string, log func(string), open openFunc) (engine.Backend, error) {
	be, err := openDecoderDeviceWith(spec, log, func(spec, _ string, log func(string)) (engine.Backend, error) {
		return open(spec, precision, log)
	})
	if err != nil {
		return nil, err
	}
	if got := backendPrecision(be); got != precision {
		name := be.Name()
		device.Close(be)
		return nil, fmt.Errorf("-precision %s: the decoder would run on %s, which computes its GEMMs in %s only; give -device cuda on a machine with a GPU, or -precision %s", precision, name, got, got)
	}
	return be, nil
}
