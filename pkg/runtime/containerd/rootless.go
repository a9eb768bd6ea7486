package containerd

import (
	"path/filepath"
	"time"

	"github.com/rayctl/rayctl/pkg/userns"
)

// rootlessLimits says why containers get no cgroup ("" as root, where they do): inside rayctl's user
// namespace runc may not make cgroups in a hierarchy the host's root owns, and is let run a container
// without one only when the spec names none.
func rootlessLimits() string {
	if !userns.Inside() {
		return ""
	}
	return "CPU and memory limits are not enforced: containerd runs inside rayctl's user namespace (rootless), where it may not make cgroups (as root they are enforced)"
}

// unmappedHint is what an image that cannot be unpacked rootless without subordinate ids is told ("" when
// they are mapped, or as root).
func unmappedHint() string {
	if ok, why := userns.SubordinateIDs(); !ok {
		return "; rayctl's user namespace maps only your own uid and gid (" + why + "), so files of an image that belong to other users cannot be unpacked"
	}
	return ""
}

// EndPrivate ends a private containerd started on dir (StartPrivate) by a rayctl that is gone, with its
// shims and their containers (EndShims), as the launcher of a rootless rayctl does once that rayctl has
// ended: nothing of it can be reached from the next one. It says how many shims it ended.
func EndPrivate(dir string) int {
	_ = stopOrphans(filepath.Join(dir, configFile), 5*time.Second)
	return EndShims(filepath.Join(dir, stateSubdir))
}

// EndShims kills every shim whose task bundle lies under stateDir (a private containerd's StateDir),
// with the containers it runs. A containerd run inside rayctl's user namespace (rootless) needs it: its
// shims sit in that namespace's mounts and network namespaces, which the next rayctl cannot enter, so
// its containers end with the rayctl that started them, as the process runtime's do rootless. It says
// how many shims it ended.
func EndShims(stateDir string) int {
	n := 0
	for _, sh := range Shims() {
		if within(sh.Bundle, stateDir) {
			killShim(sh)
			n++
		}
	}
	return n
}
