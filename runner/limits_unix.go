//go:build unix

package runner

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// diskFree is the space an unprivileged writer has left on the file system holding path (false
// when it cannot be read).
func diskFree(path string) (int64, bool) {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0, false
	}
	return Product(int64(st.Bavail), int64(st.Bsize)), true
}

// addressSpaceLeft is what the process's address-space limit (ulimit -v, RLIMIT_AS) leaves it
// beyond what it has mapped already (VmSize); false when there is no limit or it cannot be read.
func addressSpaceLeft() (int64, bool) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur > maxBytes {
		return 0, false
	}
	b, err := safefile.Read("/proc/self/status", safefile.Kernel)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, false
			}
			return max(int64(lim.Cur)-kb<<10, 0), true
		}
	}
	return 0, false
}
