package containerd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
)

// Shim is a running containerd shim, as its command line and /proc describe it.
type Shim struct {
	// PID is the shim's process; Children the processes it started (a container's init, runc init).
	PID      int
	Children []int
	// ID is the container's, Namespace containerd's, Address the socket of the containerd it serves.
	ID, Namespace, Address string
	// Bundle is its working directory: the task's bundle, where containerd started it.
	Bundle string
}

// unknownShims lists the shims of the namespace serving this data dir's containerd (by its address, or
// a bundle under its state dir) whose task containerd does not know.
func (r *Runtime) unknownShims(tasks map[string]bool) []Shim {
	var out []Shim
	for _, sh := range Shims() {
		if sh.Namespace != r.ns || tasks[sh.ID] {
			continue
		}
		if sh.Address == r.address || within(sh.Bundle, r.stateDir) {
			out = append(out, sh)
		}
	}
	return out
}

// Shims lists the containerd shims running on this machine, for any containerd (their command lines
// name namespace, id and address).
func Shims() []Shim {
	var out []Shim
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		sh := Shim{PID: pid}
		for i := 1; i+1 < len(args); i++ {
			switch args[i] {
			case "-id":
				sh.ID = args[i+1]
			case "-namespace":
				sh.Namespace = args[i+1]
			case "-address":
				sh.Address = args[i+1]
			}
		}
		if sh.ID == "" {
			continue // the short-lived `start` or `delete` invocation
		}
		sh.Bundle, _ = os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		sh.Bundle = strings.TrimSuffix(sh.Bundle, " (deleted)")
		sh.Children = childrenOf(pid)
		out = append(out, sh)
	}
	return out
}

// childrenOf lists a process's children.
func childrenOf(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(field); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// killShim kills a shim's processes (`runc init` or a `runc create` in flight) and then the shim, and
// waits a little for them to be gone.
func killShim(sh Shim) {
	pids := append(append([]int{}, sh.Children...), sh.PID)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// within reports whether path lies under dir (both absolute).
func within(path, dir string) bool {
	return dir != "" && path != "" && strings.HasPrefix(path, filepath.Clean(dir)+string(filepath.Separator))
}

// runcState is one entry of `runc list --format json`.
type runcState struct {
	ID     string `json:"id"`
	Bundle string `json:"bundle"`
}

// unknownRuncContainers lists the runc containers of the namespace whose bundle is (or was) under this
// data dir's state dir and whose task containerd does not know: made by a shim nobody follows.
func (r *Runtime) unknownRuncContainers(tasks map[string]bool) ([]string, error) {
	if _, err := os.Stat(r.runcRoot()); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	out, err := exec.Command(runcBinary, "--root", r.runcRoot(), "list", "--format", "json").Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("runc list: %w", err)
	}
	var states []runcState
	if len(bytes.TrimSpace(out)) > 0 && !bytes.Equal(bytes.TrimSpace(out), []byte("null")) {
		if err := json.Unmarshal(out, &states); err != nil {
			return nil, fmt.Errorf("runc list: %w", err)
		}
	}
	var ids []string
	for _, st := range states {
		if !tasks[st.ID] && within(st.Bundle, r.stateDir) {
			ids = append(ids, st.ID)
		}
	}
	return ids, nil
}

// runcBinary is the runc containerd's shims run.
var runcBinary = "runc"

// runcDelete kills a runc container's processes and deletes it with its cgroups.
func runcDelete(root, id string) error {
	out, err := exec.Command(runcBinary, "--root", root, "delete", "--force", id).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("runc delete --force %s: %v: %s", id, err, bytes.TrimSpace(out))
	}
	return nil
}

// unknownMounts lists the mounts under the state dir that are not in the bundle of a task containerd
// knows (nor in another namespace's), deepest first.
func (r *Runtime) unknownMounts(tasks map[string]bool) []string {
	taskRoot := filepath.Dir(r.taskDir())
	var out []string
	for _, m := range mountPoints() {
		if !within(m, r.stateDir) {
			continue
		}
		if rel, err := filepath.Rel(taskRoot, m); err == nil && !strings.HasPrefix(rel, "..") {
			parts := strings.SplitN(rel, string(filepath.Separator), 3)
			if parts[0] != r.ns || len(parts) < 2 || tasks[parts[1]] {
				continue
			}
		}
		out = append(out, m)
	}
	sortDeepestFirst(out)
	return out
}

// mountPoints lists this mount namespace's mount points.
func mountPoints() []string {
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(infos))
	for _, m := range infos {
		out = append(out, m.Mountpoint)
	}
	return out
}

// unknownBundles lists the bundle directories of tasks containerd does not know.
func (r *Runtime) unknownBundles(tasks map[string]bool) []string {
	entries, err := os.ReadDir(r.taskDir())
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && !tasks[e.Name()] {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// removeBundle deletes a bundle directory, unless something is still mounted in it (deleting through
// a mounted root filesystem would reach into its snapshot).
func (r *Runtime) removeBundle(id string) error {
	dir := filepath.Join(r.taskDir(), id)
	for _, m := range mountPoints() {
		if m == dir || within(m, dir) {
			return fmt.Errorf("bundle %s: %s is still mounted", dir, m)
		}
	}
	return os.RemoveAll(dir)
}
