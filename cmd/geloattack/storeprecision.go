package main

import (
	"fmt"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/baselines/membership"
	"github.com/gelo-research/geloattack/data/store"
)

// withStoreRows widens rc, a recomputation error derived for a deployer's rows against an fp32
// recomputation of them (content.DefaultRecompute), for candidates that are meta's stored rows
// instead: rows `store extract -precision` computed in tf32 or bf16 are a deployer of that
// precision themselves, so both sides err. With c_dep = rc.Compute bounding ||x_32 - x_dep|| /
// ||x_dep|| and c_st = membership.RecomputeError(meta.RecomputePrecision()) bounding
// ||x_st - x_32|| / ||x_st|| (through the store's layer at its width), the triangle inequality
// and ||x_st|| <= ||x_dep|| + ||x_st - x_dep|| give
//
//	||x_st - x_dep|| / ||x_dep|| <= (c_dep + c_st) / (1 - c_st),
//
// widened for the store's float16 rounding as rc was (membership.StoredRecompute). An fp32 store,
// or an rc given outright (-recompute-error: the user's own bound), is returned as it is; the
// note says what was widened ("" when nothing).
func withStoreRows(rc content.Recompute, meta store.Meta) (content.Recompute, string, error) {
	prec := meta.RecomputePrecision()
	if prec == store.PrecisionFP32 || rc.Precision == "" {
		return rc, "", nil
	}
	cst, err := membership.RecomputeError(prec, rc.Blocks, rc.Width)
	if err != nil {
		return rc, "", err
	}
	if !(cst < 1) {
		return rc, "", fmt.Errorf("the store's %s rows: recomputation error %.3g through %d blocks: no bound", meta.RowPrecision(), cst, rc.Blocks)
	}
	c := (rc.Compute + cst) / (1 - cst)
	note := fmt.Sprintf("the candidates are the store's rows, computed in %s GEMMs (meta.json compute_precision; bounded as a %s deployer, %.3g): rho widened from %.3g to %.3g",
		meta.RowPrecision(), prec, cst, rc.Rho, membership.StoredRecompute(c, rc.StoreRoundoff))
	rc.Compute, rc.Rho = c, membership.StoredRecompute(c, rc.StoreRoundoff)
	return rc, note, nil
}
