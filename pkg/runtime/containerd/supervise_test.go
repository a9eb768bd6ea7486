package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// TestSupervisedRestartKeepsContainers kills the daemon with SIGKILL while two containers run and kills
// one of them while containerd is gone. The supervisor starts containerd again on the same socket and
// the runtime reconnects: the survivor still runs and its output still reaches its log; the other one
// reports its exit (SIGKILL: 137).
func TestSupervisedRestartKeepsContainers(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "supervised")
	survivorID, survivorLog := e.run(t, r, sb, "survivor", `i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.05; done`)
	marker := "victim-" + randHex(4)
	victimID, _ := e.run(t, r, sb, "victim", "while true; do sleep 0.1; done # "+marker)
	waitLog(t, survivorLog, "tick 1\n")

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	restarted := make(chan time.Duration, 4)
	failed := e.daemon.Supervise(ctx, SuperviseOptions{Backoff: 300 * time.Millisecond, OnRestart: func(d time.Duration) { restarted <- d }})

	old := e.daemon.Pid()
	killed := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pids := pidsWith(marker)
	if len(pids) == 0 {
		t.Fatalf("no process of the victim container (%s) found", marker)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	var down time.Duration
	select {
	case down = <-restarted:
	case err := <-failed:
		t.Fatalf("the supervisor gave up: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("containerd was not restarted within a minute")
	}
	if err := r.Reconnect(testCtx(t)); err != nil {
		t.Fatalf("reconnecting: %v", err)
	}
	t.Logf("containerd back (pid %d) after the kill (down %s), runtime reconnected %s after it", e.daemon.Pid(), down.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if e.daemon.Pid() == old {
		t.Fatal("the daemon's pid did not change")
	}

	st, err := r.ContainerStatus(testCtx(t), survivorID)
	if err != nil || st.State != runtime.StateRunning {
		t.Fatalf("the survivor after the restart: %+v, %v", st, err)
	}
	n := len(logLines(t, survivorLog))
	waitLog(t, survivorLog, fmt.Sprintf("tick %d\n", n+5))
	// Nothing the survivor wrote while containerd was gone is lost or doubled.
	for i, l := range logLines(t, survivorLog) {
		if want := fmt.Sprintf("stdout tick %d", i); l != want {
			t.Fatalf("survivor log line %d is %q, want %q (lines lost or doubled across the restart)", i, l, want)
		}
	}
	vs := waitExited(t, r, victimID)
	if vs.ExitCode != 137 {
		t.Errorf("the victim's exit: %+v, want code 137", vs)
	}
}

// TestSuperviseGivesUp: a containerd that cannot start again makes the supervisor give up after
// MaxFailures attempts, with an error naming the log.
func TestSuperviseGivesUp(t *testing.T) {
	if !Available() || os.Geteuid() != 0 {
		t.Skip("needs containerd and root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := StartPrivate(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	broken := filepath.Join(t.TempDir(), "containerd")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'cannot start' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var attempts int
	failed := d.Supervise(ctx, SuperviseOptions{Backoff: 10 * time.Millisecond, MaxFailures: 3,
		OnRestartFailed: func(error) { attempts++ }})
	d.mu.Lock()
	d.bin = broken
	d.mu.Unlock()
	if err := syscall.Kill(d.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-failed:
		if err == nil || !strings.Contains(err.Error(), "giving up") || !strings.Contains(err.Error(), d.LogPath) {
			t.Fatalf("gave up with %v", err)
		}
		t.Logf("gave up after %d failed restarts: %v", attempts, err)
	case <-ctx.Done():
		t.Fatal("the supervisor did not give up")
	}
	if attempts != 3 {
		t.Errorf("%d restart attempts, want 3", attempts)
	}
}

// pidsWith lists processes whose command line contains s.
func pidsWith(s string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), s) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestReconnectSparesCallsInFlight: the supervisor reconnects the runtime while the kubelet may be
// starting containers through it. Containers created and started while Reconnect runs must all start:
// a start cut off by the reconnection would leave a container that never runs.
func TestReconnectSparesCallsInFlight(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "reconnect")
	ctx := testCtx(t)
	stop := make(chan struct{})
	errs := make(chan error, 64)
	started := make(chan int, 4)
	for w := 0; w < 3; w++ {
		go func() {
			n := 0
			defer func() { started <- n }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				cfg := runtime.ContainerConfig{Name: name, Image: e.ref, Command: []string{"/bin/sh", "-c", "sleep 30"},
					LogPath: filepath.Join(sb.Config.Dir, name, "0.log")}
				id, err := r.CreateContainer(ctx, sb, cfg)
				if err == nil {
					err = r.StartContainer(ctx, id)
				}
				if err == nil {
					err = r.RemoveContainer(ctx, id)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				n++
			}
		}()
	}
	for i := 0; i < 10; i++ {
		time.Sleep(100 * time.Millisecond)
		if err := r.Reconnect(ctx); err != nil {
			t.Fatalf("reconnect %d: %v", i, err)
		}
	}
	close(stop)
	total := 0
	for w := 0; w < 3; w++ {
		total += <-started
	}
	close(errs)
	for err := range errs {
		t.Errorf("a call made while the runtime reconnected failed: %v", err)
	}
	t.Logf("%d containers created, started and removed across 10 reconnections", total)
}
