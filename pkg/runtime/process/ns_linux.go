package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// spawn starts cmd; when isolated, from an OS thread that has entered a new
// mount namespace (with the mounts made, and the rest of the host's
// filesystem read-only when ns.readOnlyHost), a new UTS namespace (with the
// hostname) and the pod's network namespace, which the child inherits, and
// in a new PID namespace whose PID 1 is the container init (see
// containerInit), which runs cmd's program as cmd's user. The thread is
// never handed back to Go's scheduler.
func spawn(cmd *exec.Cmd, isolated bool, ns nsSetup) error {
	if !isolated {
		return cmd.Start()
	}
	wrapInit(cmd, ns.cgroups, ns.pidns == "")
	// The namespaces are opened before the mounts, which may hide their paths.
	var netns, pidns *os.File
	for _, n := range []struct {
		path string
		f    **os.File
	}{{ns.netns, &netns}, {ns.pidns, &pidns}} {
		if n.path == "" {
			continue
		}
		f, err := os.Open(n.path)
		if err != nil {
			return err
		}
		defer f.Close()
		*n.f = f
	}
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // left locked: the thread dies with this goroutine
		errc <- func() error {
			flags := unix.CLONE_NEWNS
			if ns.hostname != "" {
				flags |= unix.CLONE_NEWUTS
			}
			if err := unix.Unshare(flags); err != nil {
				return fmt.Errorf("unshare: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("making mounts private: %w", err)
			}
			var targets targetMaker
			if err := bindMounts(ns.mounts, &targets); err != nil {
				return err
			}
			if cmd.Dir != "" { // made while the host is writable
				if err := targets.create(cmd.Dir, true); err != nil {
					return fmt.Errorf("working dir: %w", err)
				}
			}
			if err := hideDirs(ns.hidden); err != nil {
				return err
			}
			if ns.readOnlyHost {
				if err := makeHostReadOnly(writableTargets(ns.mounts)); err != nil {
					return err
				}
			}
			if ns.hostname != "" {
				if err := unix.Sethostname([]byte(ns.hostname)); err != nil {
					return fmt.Errorf("sethostname: %w", err)
				}
			}
			if netns != nil {
				if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
					return fmt.Errorf("entering %s: %w", ns.netns, err)
				}
			}
			if pidns != nil { // for the child
				if err := unix.Setns(int(pidns.Fd()), unix.CLONE_NEWPID); err != nil {
					return fmt.Errorf("entering the pod's PID namespace: %w", err)
				}
			}
			return cmd.Start()
		}()
	}()
	return <-errc
}

// hideDirs mounts an empty read-only tmpfs over each of dirs that exists, after the container's own
// mounts are made (their sources were opened first), so that nothing of what lies below is in sight.
func hideDirs(dirs []string) error {
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0755"); err != nil {
			return fmt.Errorf("hiding %s: %w", d, err)
		}
	}
	return nil
}

// wrapInit makes cmd run its program under the container init, as PID 1 of
// a new PID namespace when newPIDNS (else in the pod's); the init, not the kernel, drops to cmd's user, since
// it must mount /proc first.
func wrapInit(cmd *exec.Cmd, cgroups []string, newPIDNS bool) {
	uid, gid, cgs := "-", "-", "-"
	if len(cgroups) > 0 {
		cgs = strings.Join(cgroups, ",")
	}
	if c := cmd.SysProcAttr.Credential; c != nil {
		uid, gid = strconv.FormatUint(uint64(c.Uid), 10), strconv.FormatUint(uint64(c.Gid), 10)
		cmd.SysProcAttr.Credential = nil
	}
	cmd.Args = append([]string{initArg0, uid, gid, cgs, cmd.Path}, cmd.Args...)
	cmd.Path = "/proc/self/exe" // this binary, even where its path is hidden
	if newPIDNS {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWPID
	}
}

// bindMounts makes ms in order, their missing targets through targets. Every
// source is opened first, so a mount that covers a host dir (a private /tmp)
// does not hide later sources.
func bindMounts(ms []runtime.Mount, targets *targetMaker) error {
	srcs := make([]*os.File, len(ms))
	defer func() {
		for _, f := range srcs {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i, m := range ms {
		f, err := os.OpenFile(m.HostPath, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("mount source: %w", err)
		}
		srcs[i] = f
	}
	for i, m := range ms {
		if err := bindMount(m, srcs[i], targets); err != nil {
			return err
		}
		targets.mounted(m.ContainerPath)
	}
	return nil
}

// bindMount mounts src (m.HostPath, opened) at m.ContainerPath, making the
// target (an empty dir or file) through targets if it is missing.
func bindMount(m runtime.Mount, src *os.File, targets *targetMaker) error {
	st, err := src.Stat()
	if err != nil {
		return fmt.Errorf("mount source: %w", err)
	}
	if err := targets.create(m.ContainerPath, st.IsDir()); err != nil {
		return fmt.Errorf("making mount target %s: %w", m.ContainerPath, err)
	}
	from := fmt.Sprintf("/proc/self/fd/%d", src.Fd())
	if err := unix.Mount(from, m.ContainerPath, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting %s at %s: %w", m.HostPath, m.ContainerPath, err)
	}
	if m.ReadOnly {
		if err := makeReadOnly(m.ContainerPath); err != nil {
			return fmt.Errorf("making %s read-only: %w", m.ContainerPath, err)
		}
	}
	return nil
}

// enter starts cmd inside the namespaces of process pid (mount, UTS,
// network, and its PID namespace for the child) when isolated. Every
// namespace is opened before any is entered: inside the container's mount
// namespace /proc shows only the container's processes.
func enter(cmd *exec.Cmd, isolated bool, pid int) error {
	if !isolated {
		return cmd.Start()
	}
	kinds := []struct {
		name string
		kind int
	}{{"pid", unix.CLONE_NEWPID}, {"mnt", unix.CLONE_NEWNS}, {"uts", unix.CLONE_NEWUTS}, {"net", unix.CLONE_NEWNET}}
	var fds []*os.File
	defer func() {
		for _, f := range fds {
			f.Close()
		}
	}()
	for _, k := range kinds {
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/%s", pid, k.name))
		if err != nil {
			return err
		}
		fds = append(fds, f)
	}
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // left locked: the thread dies with this goroutine
		errc <- func() error {
			// Joining a mount namespace needs a filesystem context of our own.
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return err
			}
			for i, k := range kinds {
				if err := unix.Setns(int(fds[i].Fd()), k.kind); err != nil {
					return fmt.Errorf("entering the container's %s namespace: %w", k.name, err)
				}
			}
			return cmd.Start()
		}()
	}()
	return <-errc
}

// startTicks is the process's start time in clock ticks since boot
// (/proc/<pid>/stat field 22), which tells a process from a later one that
// reuses its pid.
func startTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, errors.New("short stat")
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, errors.New("process is a zombie")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// sameProcess reports whether pid is still the process that started at ticks.
func sameProcess(pid int, ticks uint64) bool {
	if pid <= 0 {
		return false
	}
	t, err := startTicks(pid)
	return err == nil && t == ticks
}
