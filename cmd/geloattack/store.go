package main

import (
	"context"
	"fmt"
)

// runStore dispatches the store subcommands.
func runStore(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: geloattack store synth|import|info|validate|extract [flags]")
	}
	switch args[0] {
	case "extract":
		return runStoreExtract(ctx, args[1:])
	}
	return errNotYet("store " + args[0])
}
