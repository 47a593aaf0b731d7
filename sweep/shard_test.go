package sweep

import (
	"strings"
	"testing"

	"github.com/gelo-research/geloattack/internal/shard"
)

func TestShardsPartitionTheCells(t *testing.T) {
	for n := 0; n <= 25; n++ {
		for count := 1; count <= 7; count++ {
			owners := make([]int, n)
			for i := 0; i < count; i++ {
				s := Shard{Index: i, Count: count}
				for c := 0; c < n; c++ {
					if s.Owns(c) {
						owners[c]++
					}
				}
			}
			for c, k := range owners {
				if k != 1 {
					t.Fatalf("%d cells, %d shards: cell %d is in %d shards", n, count, c, k)
				}
			}
		}
	}
	// Shard i takes every N-th cell starting at i.
	var got []int
	for c := 0; c < 10; c++ {
		if (Shard{Index: 1, Count: 4}).Owns(c) {
			got = append(got, c)
		}
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 5 || got[2] != 9 {
		t.Fatalf("shard 1/4 of 10 cells: %v, want [1 5 9]", got)
	}
}

func TestShardFromEnv(t *testing.T) {
	cases := []struct {
		name   string
		env    map[string]string
		shards int
		want   Shard
		err    string
	}{
		{"nothing", nil, 0, shard.All(), ""},
		{"slurm from 0", map[string]string{"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0"}, 0, Shard{Index: 3, Count: 4}, ""},
		{"slurm from 1", map[string]string{"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"}, 0, Shard{Index: 2, Count: 4}, ""},
		{"slurm count flag", map[string]string{"SLURM_ARRAY_TASK_ID": "3"}, 6, Shard{Index: 3, Count: 6}, ""},
		{"slurm no count", map[string]string{"SLURM_ARRAY_TASK_ID": "3"}, 0, Shard{}, "SLURM_ARRAY_TASK_COUNT"},
		{"slurm sparse", map[string]string{"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_COUNT": "4"}, 0, Shard{}, "contiguous"},
		{"slurm garbage", map[string]string{"SLURM_ARRAY_TASK_ID": "x"}, 0, Shard{}, "not an integer"},
		{"k8s flag", map[string]string{"JOB_COMPLETION_INDEX": "2"}, 3, Shard{Index: 2, Count: 3}, ""},
		{"k8s env", map[string]string{"JOB_COMPLETION_INDEX": "0", EnvShards: "5"}, 0, Shard{Index: 0, Count: 5}, ""},
		{"k8s no count", map[string]string{"JOB_COMPLETION_INDEX": "0"}, 0, Shard{}, EnvShards},
		{"k8s out of range", map[string]string{"JOB_COMPLETION_INDEX": "3"}, 3, Shard{}, "index 3 of 3"},
		{"shards without index", nil, 4, Shard{}, "without a job index"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _, err := ShardFromEnv(func(k string) string { return c.env[k] }, c.shards)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, %v; want an error with %q", s, err, c.err)
				}
				return
			}
			if err != nil || s != c.want {
				t.Fatalf("got %v, %v; want %v", s, err, c.want)
			}
		})
	}
}
