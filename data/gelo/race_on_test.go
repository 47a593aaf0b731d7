//go:build race

package gelo

// raceEnabled: the race detector slows float loops ~50x, so the largest sizes are cut under it.
const raceEnabled = true
