// Package sweep runs grids of training runs: a sweep file names a base run config and the config
// fields to vary (by dotted YAML path), every cell is validated by the one strict run-config schema,
// and each cell trains in its own run directory, so that finished cells are skipped, interrupted
// ones resume, and shards of a job array split the cells between them. Package sweep/report merges
// the cells into the paper's tables and plots.
package sweep
