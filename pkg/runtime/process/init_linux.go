package process

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// initArg0 is argv[0] of a container's init: the runtime re-executes its own
// binary (/proc/self/exe) under this name as PID 1 of the container's new
// PID namespace.
const initArg0 = "rayctl-container-init"

// The container init runs from init() so that any binary linking this package
// (rayctl, this package's tests) can be it, before main or the tests start.
func init() {
	if len(os.Args) < 6 || os.Args[0] != initArg0 {
		return
	}
	os.Exit(containerInit(os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5:]))
}

// containerInit is PID 1 of a container: it joins the cgroups mounted at
// cgroups (comma-separated dirs, "-" for none), mounts a fresh /proc (so the
// container sees only its own processes), starts the program as uid:gid
// ("-" keeps root) in a process group of its own, forwards every signal it
// gets to that group, reaps orphans, and exits with the program's status.
// Its exit ends the PID namespace: the kernel kills whatever is left in it.
func containerInit(uid, gid, cgroups, prog string, argv []string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "container init: %v\n", err)
		return 128
	}
	if cgroups != "-" {
		if err := joinCgroups(strings.Split(cgroups, ",")); err != nil {
			return fail(err)
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fail(fmt.Errorf("mounting /proc: %w", err))
	}
	attr := &syscall.SysProcAttr{Setpgid: true}
	if uid != "-" {
		u, err1 := strconv.ParseUint(uid, 10, 32)
		g, err2 := strconv.ParseUint(gid, 10, 32)
		if err1 != nil || err2 != nil {
			return fail(fmt.Errorf("bad user %s:%s", uid, gid))
		}
		attr.Credential = credential(uint32(u), uint32(g))
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs)
	p, err := os.StartProcess(prog, argv, &os.ProcAttr{Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}, Sys: attr})
	if err != nil {
		return fail(err)
	}
	go forward(sigs, p.Pid)
	return reap(p.Pid)
}

// forward passes signals on to the program's process group.
func forward(sigs <-chan os.Signal, pid int) {
	for s := range sigs {
		sig, ok := s.(syscall.Signal)
		if !ok || sig == unix.SIGCHLD || sig == unix.SIGURG || sig == unix.SIGPIPE {
			continue
		}
		_ = unix.Kill(-pid, sig)
	}
}

// reap waits for every child (orphans are re-parented to PID 1) until pid
// ends, and returns its status the shell's way (128+signal when killed).
func reap(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 255
		}
		if got != pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
