package main

import "context"

// runStoreExtract builds a store from a real model over real text.
func runStoreExtract(ctx context.Context, args []string) error { return errNotYet("store extract") }
