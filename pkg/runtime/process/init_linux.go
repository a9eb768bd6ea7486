package process

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/selfpages"
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
// container sees only its own processes), takes from the container the
// privileges no container has (see dropPrivileges), starts the program as
// uid:gid ("-" keeps root) in a process group of its own, forwards every
// signal it gets to that group, reaps orphans, and exits with the program's
// status. Once the program runs it gives back the pages of this binary that
// starting up touched (selfpages.Drop).
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
	if err := dropPrivileges(); err != nil {
		return fail(err)
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
	_, _ = selfpages.Drop() // the binary's start-up pages; what it runs now faults back in
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

// containerCaps are the capabilities a container's processes may hold: a container runtime's usual
// default set. Without CAP_SYS_ADMIN a container cannot undo its mounts (the read-only host, the hidden
// data dir) nor enter other namespaces, which matters where its uid 0 is rayctl's user (rootless).
var containerCaps = map[uintptr]bool{
	unix.CAP_CHOWN: true, unix.CAP_DAC_OVERRIDE: true, unix.CAP_FSETID: true, unix.CAP_FOWNER: true,
	unix.CAP_MKNOD: true, unix.CAP_NET_RAW: true, unix.CAP_SETGID: true, unix.CAP_SETUID: true,
	unix.CAP_SETFCAP: true, unix.CAP_SETPCAP: true, unix.CAP_NET_BIND_SERVICE: true, unix.CAP_SYS_CHROOT: true,
	unix.CAP_KILL: true, unix.CAP_AUDIT_WRITE: true,
}

// dropPrivileges limits the capabilities every later program of the container can gain to
// containerCaps (the bounding set), and sets no_new_privs, so that no set-user-ID program or file
// capability of the host (su, mount, …) raises a container's process above the user it runs as.
func dropPrivileges() error {
	last := uintptr(unix.CAP_LAST_CAP)
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 8); err == nil {
			last = uintptr(n)
		}
	}
	for c := uintptr(0); c <= last; c++ {
		if containerCaps[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}
