package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// nsSetup is a container's isolation: the pod's network namespace, its
// hostname (empty: the host's) and its bind mounts.
type nsSetup struct {
	netns    string
	hostname string
	mounts   []runtime.Mount
}

// spawn starts cmd; when isolated, from an OS thread that has entered a new
// mount namespace (with the mounts made), a new UTS namespace (with the
// hostname) and the pod's network namespace, which the child inherits. The
// thread is never handed back to Go's scheduler.
func spawn(cmd *exec.Cmd, isolated bool, ns nsSetup) error {
	if !isolated {
		return cmd.Start()
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
			for _, m := range ns.mounts {
				if err := bindMount(m); err != nil {
					return err
				}
			}
			if ns.hostname != "" {
				if err := unix.Sethostname([]byte(ns.hostname)); err != nil {
					return fmt.Errorf("sethostname: %w", err)
				}
			}
			if ns.netns != "" {
				if err := setns(ns.netns, unix.CLONE_NEWNET); err != nil {
					return err
				}
			}
			return cmd.Start()
		}()
	}()
	return <-errc
}

// bindMount mounts m.HostPath at m.ContainerPath, making the target (an
// empty dir or file, on the host's filesystem) if it is missing.
func bindMount(m runtime.Mount) error {
	src, err := os.Stat(m.HostPath)
	if err != nil {
		return fmt.Errorf("mount source: %w", err)
	}
	if _, err := os.Stat(m.ContainerPath); errors.Is(err, os.ErrNotExist) {
		if src.IsDir() {
			err = os.MkdirAll(m.ContainerPath, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(m.ContainerPath), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(m.ContainerPath, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("making mount target %s: %w", m.ContainerPath, err)
		}
	}
	if err := unix.Mount(m.HostPath, m.ContainerPath, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting %s at %s: %w", m.HostPath, m.ContainerPath, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", m.ContainerPath, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", m.ContainerPath, err)
		}
	}
	return nil
}

func setns(path string, kind int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), kind); err != nil {
		return fmt.Errorf("entering %s: %w", path, err)
	}
	return nil
}

// enter starts cmd inside the namespaces of process pid (mount, UTS,
// network) when isolated.
func enter(cmd *exec.Cmd, isolated bool, pid int) error {
	if !isolated {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // left locked: the thread dies with this goroutine
		errc <- func() error {
			// Joining a mount namespace needs a filesystem context of our own.
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return err
			}
			for _, ns := range []struct {
				name string
				kind int
			}{{"mnt", unix.CLONE_NEWNS}, {"uts", unix.CLONE_NEWUTS}, {"net", unix.CLONE_NEWNET}} {
				if err := setns(fmt.Sprintf("/proc/%d/ns/%s", pid, ns.name), ns.kind); err != nil {
					return err
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
