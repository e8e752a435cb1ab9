package mirror

import (
	"testing"

	"golang.org/x/sys/unix"
)

// refuseEmptyPath has linking a descriptor by itself fail as a kernel
// before Linux 6.10 makes it fail for a process without
// CAP_DAC_READ_SEARCH, counting the tries in asked, until the test ends.
func refuseEmptyPath(t *testing.T, asked *int) {
	t.Helper()
	was, refused := linkEmptyPath, emptyPathRefused.Load()
	linkEmptyPath = func(fd, dfd int, name string) error {
		*asked++
		return unix.ENOENT
	}
	emptyPathRefused.Store(false)
	t.Cleanup(func() {
		linkEmptyPath = was
		emptyPathRefused.Store(refused)
	})
}
