package main

import "context"

func runSweep(ctx context.Context, args []string) error  { return errNotYet("sweep") }
func runReport(ctx context.Context, args []string) error { return errNotYet("report") }
