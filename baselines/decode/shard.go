package decode

import "github.com/gelo-research/geloattack/internal/shard"

// Shard is one of Count interleaved parts of a decode's batches (internal/shard): batch b is
// shard b mod Count's, so every shard's batches spread over the run and adding batches to a plan
// leaves each earlier batch in its shard. Merge joins the shards' output directories.
type Shard = shard.Shard
