//go:build !linux

package process

import (
	"os/exec"
	"syscall"
)

func spawn(cmd *exec.Cmd, _ bool, _ nsSetup) error { return cmd.Start() }

func enter(cmd *exec.Cmd, _ bool, _ int) error { return cmd.Start() }

// startTicks has no portable source here; 0 matches any process with the pid.
func startTicks(int) (uint64, error) { return 0, nil }

// sameProcess reports whether pid is alive (pid reuse goes undetected).
func sameProcess(pid int, _ uint64) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}
