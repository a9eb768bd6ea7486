package procstop

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// start runs script under sh in its own process group and returns its pid and a channel closed at its
// exit. The script says "ready" on stdout once its traps are set.
func start(t *testing.T, script string) (int, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script+"; echo ready; while :; do sleep 0.1; done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })
	return cmd.Process.Pid, exited
}

func TestChildEndsWithSIGTERMWhenTheProcessHeedsIt(t *testing.T) {
	pid, exited := start(t, "trap 'exit 0' TERM")
	if killed := Child(pid, false, exited, time.Minute); killed {
		t.Error("Child killed a process that exits on SIGTERM")
	}
}

func TestChildKillsTheGroupOfAProcessThatIgnoresSIGTERM(t *testing.T) {
	pid, exited := start(t, "trap '' TERM")
	if killed := Child(pid, true, exited, 100*time.Millisecond); !killed {
		t.Error("Child did not report the kill of a process that ignores SIGTERM")
	}
	// The group's other members (the shell's sleep) are reaped by init, a moment later.
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(-pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the process group is still there 30 s after Child killed it")
		}
	}
}

func TestPIDsKillsOnlyThoseThatOutstayTheGrace(t *testing.T) {
	heeds, heedsExited := start(t, "trap 'exit 0' TERM")
	ignores, ignoresExited := start(t, "trap '' TERM")
	// Signal 0 still reaches a child that exited but is not reaped; these are this test's children.
	alive := func(pid int) bool {
		ch := map[int]<-chan struct{}{heeds: heedsExited, ignores: ignoresExited}[pid]
		select {
		case <-ch:
			return false
		default:
			return true
		}
	}
	killed, err := PIDs([]int{heeds, ignores}, syscall.SIGTERM, 200*time.Millisecond, alive)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(killed, []int{ignores}) {
		t.Errorf("killed %v, want only the process that ignores SIGTERM (%d)", killed, ignores)
	}
	<-ignoresExited
}

func TestPIDsSaysWhenTheSignalCannotBeSent(t *testing.T) {
	pid, exited := start(t, "true")
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-exited // reaped: the pid is free
	if _, err := PIDs([]int{pid}, syscall.SIGTERM, time.Second, nil); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
