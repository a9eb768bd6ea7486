// Package procstop ends processes the one way rayctl does everywhere: a signal asking the process to
// exit (SIGTERM), a grace period for it to do so, then SIGKILL. Child serves processes this one started
// and waits on; PIDs serves processes it only knows by id (a detached rayctl, an orphaned containerd,
// raysim's background nodes).
package procstop

import (
	"errors"
	"syscall"
	"time"
)

// pollInterval is how often PIDs looks whether a process is gone.
const pollInterval = 20 * time.Millisecond

// Child ends the child process pid, whose exit closes exited: SIGTERM to the process, up to grace for
// it to exit, then SIGKILL — to its whole process group when group is set, so that what it started goes
// too — and a wait for the exit. It reports whether SIGKILL was needed.
func Child(pid int, group bool, exited <-chan struct{}, grace time.Duration) (killed bool) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
		return false
	case <-t.C:
	}
	target := pid
	if group {
		target = -pid
	}
	_ = syscall.Kill(target, syscall.SIGKILL)
	<-exited
	return true
}

// PIDs ends processes that are not this one's children: first (SIGTERM; SIGKILL to force) to each, up
// to grace for all of them to be gone, then SIGKILL to those that are not. alive says whether a process
// still runs; nil means that signal 0 reaches it (which counts a zombie as alive). It returns the
// processes it had to kill, and the errors of sending first, if any.
func PIDs(pids []int, first syscall.Signal, grace time.Duration, alive func(pid int) bool) (killed []int, err error) {
	if alive == nil {
		alive = func(pid int) bool { return syscall.Kill(pid, 0) == nil }
	}
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, first); err != nil {
			errs = append(errs, err)
		}
	}
	deadline := time.Now().Add(grace)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(pollInterval)
		}
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
	}
	return killed, errors.Join(errs...)
}
