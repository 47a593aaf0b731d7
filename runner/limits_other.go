//go:build !unix

package runner

// diskFree is not known on this system: disk parts are not checked.
func diskFree(string) (int64, bool) { return 0, false }

// addressSpaceLeft is not known on this system.
func addressSpaceLeft() (int64, bool) { return 0, false }
