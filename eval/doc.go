// Package eval computes the metrics of SPEC §6, each beside the chance level that the same figure
// would reach with no information, computed from the example at hand rather than hard-coded:
// retrieval positive mass, top-1 and recall@|P|; the unmix same-embedding mass with matched-cosine
// figures; and the classical p95 |cos| and Gram error after Hungarian matching.
//
// Matrices are gonum *mat.Dense in float64 with one row per token (or per candidate). Data held as
// float32 converts losslessly with FromFloat32, so bit-identity of float32 rows survives.
package eval
