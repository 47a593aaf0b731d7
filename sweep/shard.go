package sweep

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gelo-research/geloattack/internal/shard"
)

// Shard is one of Count interleaved parts of a sweep's cells (internal/shard): it runs cells
// Index, Index+Count, ... of the expansion order, so N shards cover every cell exactly once and
// each mixes cheap and expensive settings evenly.
type Shard = shard.Shard

// Environment variables that select a shard when no -shard flag is given.
const (
	// EnvShards is the shard count of a Kubernetes Indexed Job (its completions), when -shards
	// is not given.
	EnvShards = "GELOATTACK_SHARDS"
)

// ShardFromEnv selects the shard of a job array from the environment (getenv is os.Getenv in
// the CLI). A Slurm job array gives SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT and
// SLURM_ARRAY_TASK_MIN (the index is ID - MIN, so --array=1-8 works as well as 0-7; the array must
// be contiguous). A Kubernetes Indexed Job gives JOB_COMPLETION_INDEX; its count is shards when > 0,
// else $GELOATTACK_SHARDS. shards > 0 also overrides Slurm's count. With none of these set the
// result is All. The second result says where the shard came from, for the log.
func ShardFromEnv(getenv func(string) string, shards int) (Shard, string, error) {
	atoi := func(name string) (int, bool, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, true, fmt.Errorf("$%s = %q: not an integer", name, v)
		}
		return n, true, nil
	}
	if id, ok, err := atoi("SLURM_ARRAY_TASK_ID"); ok || err != nil {
		if err != nil {
			return Shard{}, "", err
		}
		lo, _, err := atoi("SLURM_ARRAY_TASK_MIN")
		if err != nil {
			return Shard{}, "", err
		}
		n, haveN, err := atoi("SLURM_ARRAY_TASK_COUNT")
		if err != nil {
			return Shard{}, "", err
		}
		if shards > 0 {
			n, haveN = shards, true
		}
		if !haveN {
			return Shard{}, "", fmt.Errorf("$SLURM_ARRAY_TASK_ID is set but not $SLURM_ARRAY_TASK_COUNT; pass -shards N")
		}
		s := Shard{Index: id - lo, Count: n}
		if err := s.Validate(); err != nil {
			return Shard{}, "", fmt.Errorf("Slurm array task %d (min %d, count %d): %w; use a contiguous --array", id, lo, n, err)
		}
		return s, "Slurm job array", nil
	}
	if idx, ok, err := atoi("JOB_COMPLETION_INDEX"); ok || err != nil {
		if err != nil {
			return Shard{}, "", err
		}
		n := shards
		if n <= 0 {
			var have bool
			if n, have, err = atoi(EnvShards); err != nil {
				return Shard{}, "", err
			}
			if !have {
				return Shard{}, "", fmt.Errorf("$JOB_COMPLETION_INDEX is set: pass -shards N or set $%s to the job's completions", EnvShards)
			}
		}
		s := Shard{Index: idx, Count: n}
		if err := s.Validate(); err != nil {
			return Shard{}, "", fmt.Errorf("Kubernetes Indexed Job index %d of %d: %w", idx, n, err)
		}
		return s, "Kubernetes Indexed Job", nil
	}
	if shards > 1 {
		return Shard{}, "", fmt.Errorf("-shards %d without a job index: pass -shard i/N, or run as a Slurm job array or a Kubernetes Indexed Job", shards)
	}
	return shard.All(), "", nil
}
