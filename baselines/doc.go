// Package baselines implements the training-free attacks of SPEC §7 on plain matrices: row-space
// containment retrieval, and classical blind source separation of U = A X treated as n mixtures
// (rows) of d samples (columns): FastICA, JADE, FOBI, second-order joint diagonalisation (SOBI)
// and anchor-based recovery.
//
// Everything runs in float64 on gonum matrices, whatever precision U was observed in; BSS methods
// return the estimated sources (rows, sign and scale unidentifiable) and the unmixing matrix, which
// applied to U itself (not its centred copy) gives those sources.
package baselines
