package main

import "context"

// runBaseline runs a training-free attack on sampled examples.
func runBaseline(ctx context.Context, args []string) error { return errNotYet("baseline") }
