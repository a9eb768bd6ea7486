package containerd

import (
	"os"
	"syscall"
)

// crashAtEnv names a point where rayctl kills itself with SIGKILL, for end-to-end tests of what a crash
// at that point leaves (test/e2e/orphans_test.go). Unset, as for every user, it does nothing.
const crashAtEnv = "RAYCTL_TEST_CRASH_AT"

// Crash points.
const (
	// crashAfterNewTask is between a task's creation and its start: a shim with `runc init` waiting.
	crashAfterNewTask = "containerd-after-new-task"
)

// crashPoint kills this process, as `kill -9` would, if the environment names point.
func crashPoint(point string) {
	if os.Getenv(crashAtEnv) == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
