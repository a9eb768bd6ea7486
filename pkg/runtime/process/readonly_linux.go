package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// mountEntry is one mount of the calling thread's mount namespace, from its
// mountinfo.
type mountEntry struct {
	id       uint64
	point    string
	readOnly bool
}

// threadMounts lists the calling thread's mounts. The thread's, not the
// process's (/proc/self is the main thread's): spawn unshares its mount
// namespace on one thread only.
func threadMounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	infos, err := mountinfo.GetMountsFromReader(f, nil)
	if err != nil {
		return nil, err
	}
	out := make([]mountEntry, 0, len(infos))
	for _, m := range infos {
		ro := false
		for _, o := range strings.Split(m.Options, ",") {
			ro = ro || o == "ro"
		}
		out = append(out, mountEntry{id: uint64(m.ID), point: m.Mountpoint, readOnly: ro})
	}
	return out, nil
}

// writableTargets are the container paths that stay writable when the host is
// read-only: those of mounts not ReadOnly (resolved, as mountinfo shows
// them), and /dev.
func writableTargets(ms []runtime.Mount) []string {
	out := []string{"/dev"}
	for _, m := range ms {
		if m.ReadOnly {
			continue
		}
		p, err := filepath.EvalSymlinks(m.ContainerPath)
		if err != nil {
			p = filepath.Clean(m.ContainerPath)
		}
		out = append(out, p)
	}
	return out
}

// under reports whether p is dir or lies below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// makeHostReadOnly makes every mount of the calling thread's (new) mount
// namespace read-only, then writable again those it made read-only that are
// at or below one of writable. Mounts that were read-only before are left so:
// in a user namespace a mount that was read-only when the namespace was made
// is locked that way, and a ReadOnly volume must stay read-only even below a
// writable one. Only the read-only flag is touched: nosuid, nodev and noexec,
// which a user namespace may not drop, stay as they are.
func makeHostReadOnly(writable []string) error {
	before, err := threadMounts()
	if err != nil {
		return fmt.Errorf("read-only host: %w", err)
	}
	rdonly := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, rdonly); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			err = errors.New("this kernel has no mount_setattr (Linux 5.12 and later have)")
		}
		return fmt.Errorf("making the host's filesystem read-only: %w", err)
	}
	rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	for _, m := range before {
		if m.readOnly || !underAny(m.point, writable) || !topMount(m) {
			continue
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, m.point, unix.AT_SYMLINK_NOFOLLOW, rw); err != nil {
			return fmt.Errorf("keeping %s writable: %w", m.point, err)
		}
	}
	return nil
}

// underAny reports whether p is one of dirs or lies below one.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

// topMount reports whether m is the mount its mount point's path reaches: a
// mount hidden by another on the same point (a private /tmp over the host's)
// cannot be reached to be changed, and changing the one on top in its stead
// could make a read-only mount writable.
func topMount(m mountEntry) bool {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, m.point, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_MNT_ID, &st)
	return err == nil && st.Mask&unix.STATX_MNT_ID != 0 && st.Mnt_id == m.id
}

// makeReadOnly makes the mount at target, and every mount below it,
// read-only, touching no other flag (a user namespace may not drop nosuid,
// nodev or noexec, which a remount would). Kernels before 5.12 get a remount
// of target alone.
func makeReadOnly(target string) error {
	err := unix.MountSetattr(unix.AT_FDCWD, target, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if errors.Is(err, unix.ENOSYS) {
		err = unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	return err
}
