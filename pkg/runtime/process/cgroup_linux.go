package process

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// cgroupRoot is where the cgroup v1 controllers are mounted, one dir each.
const cgroupRoot = "/sys/fs/cgroup"

// cfsPeriod is the CFS period, in µs, that CPU limits are quotas of (as runc's).
const cfsPeriod = 100000

// cgroupFile is one limit: a value for a file of a controller's cgroup.
type cgroupFile struct {
	ctrl, file string
	value      int64
}

// cgroupFiles are res's limits as runc writes them for cgroup v1.
func cgroupFiles(res runtime.Resources) []cgroupFile {
	var out []cgroupFile
	if res.MemoryBytes > 0 {
		out = append(out, cgroupFile{"memory", "memory.limit_in_bytes", res.MemoryBytes})
	}
	if res.CPUMillis > 0 {
		quota := max(res.CPUMillis*cfsPeriod/1000, 1000) // 1 ms: the kernel's minimum
		out = append(out, cgroupFile{"cpu", "cpu.cfs_period_us", cfsPeriod}, cgroupFile{"cpu", "cpu.cfs_quota_us", quota})
	}
	if res.CPUShares > 0 {
		out = append(out, cgroupFile{"cpu", "cpu.shares", res.CPUShares})
	}
	return out
}

// makeCgroups makes container id's cgroup v1 cgroups (memory, cpu: those
// res limits), under rayctl's own (rayctl.process/<id>), with res's limits.
// Each is to be mounted over its controller's dir inside the container,
// where the container init joins it and programs such as Ray read their
// limits. No limits: no cgroups. Where rayctl may not make them (rootless:
// the cgroup v1 dirs belong to the host's root) the error is errNoCgroups'
// kind, and the container runs without limits.
func makeCgroups(id string, res runtime.Resources) (cgs []runtime.Mount, err error) {
	defer func() {
		if err != nil {
			removeCgroups(cgs)
		}
	}()
	dirs := map[string]string{}
	for _, f := range cgroupFiles(res) {
		dir, ok := dirs[f.ctrl]
		if !ok {
			own, err := ownCgroup(f.ctrl)
			if err != nil {
				return cgs, err
			}
			dir = filepath.Join(cgroupRoot, f.ctrl, own, "rayctl.process", id)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return cgs, deniedOr(err)
			}
			dirs[f.ctrl] = dir
			cgs = append(cgs, runtime.Mount{HostPath: dir, ContainerPath: filepath.Join(cgroupRoot, f.ctrl)})
		}
		if err := os.WriteFile(filepath.Join(dir, f.file), []byte(strconv.FormatInt(f.value, 10)), 0o644); err != nil {
			return cgs, deniedOr(fmt.Errorf("cgroup %s: %w", f.file, err))
		}
	}
	return cgs, nil
}

// ownCgroup is this process's cgroup path in the v1 hierarchy of ctrl.
func ownCgroup(ctrl string) (string, error) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, ctrl, "cgroup.procs")); err != nil {
		return "", errNoCgroups
	}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == ctrl {
				return parts[2], nil
			}
		}
	}
	return "", errNoCgroups
}

// removeCgroups removes the cgroups of a container whose processes are
// gone. A cgroup stays busy until the last of them is reaped (a container
// re-adopted after a restart is seen gone while a zombie), so a busy one is
// retried for a while; one still busy then is left.
func removeCgroups(cgs []runtime.Mount) {
	for _, cg := range cgs {
		for i := 0; i < 100; i++ {
			if err := unix.Rmdir(cg.HostPath); err != unix.EBUSY {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// joinCgroups moves the calling process (the container init, before it
// starts the program) into the cgroups mounted at dirs.
func joinCgroups(dirs []string) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte("0"), 0o644); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", d, err)
		}
	}
	return nil
}

// cgroupsDenied says rayctl may not make cgroups: like errNoCgroups, the
// container then runs without limits, and its message says why.
type cgroupsDenied struct{ err error }

// Error says limits are not applied, and why.
func (e *cgroupsDenied) Error() string {
	return "resource limits are not applied: rayctl may not make cgroups here (rootless, the cgroup v1 hierarchy is the host root's): " + e.err.Error()
}

// Is makes a cgroupsDenied errNoCgroups to errors.Is.
func (e *cgroupsDenied) Is(target error) bool { return target == errNoCgroups }

// Unwrap is the refusal.
func (e *cgroupsDenied) Unwrap() error { return e.err }

// deniedOr is err as a cgroupsDenied when it is a refusal (no permission, or a
// read-only cgroup filesystem), else err.
func deniedOr(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
		return &cgroupsDenied{err: err}
	}
	return err
}
