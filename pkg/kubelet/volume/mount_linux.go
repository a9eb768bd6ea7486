package volume

import "golang.org/x/sys/unix"

// tmpfsHere says a memory-backed emptyDir can be a tmpfs on this platform.
const tmpfsHere = true

// mountTmpfs mounts a tmpfs with opts (mode, size) on target, as a memory-backed emptyDir.
func mountTmpfs(target, opts string) error {
	return unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// unmountDetached unmounts path lazily (MNT_DETACH), so a busy mount does not hold up teardown.
func unmountDetached(path string) error { return unix.Unmount(path, unix.MNT_DETACH) }
