package containerd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// shimRunDir is where containerd 1.6's runc shims put their sockets and runc its state, whatever
// containerd's configuration says: a directory only the host's root may write.
const shimRunDir = "/run/containerd"

// privateRunDir gives a containerd run inside rayctl's user namespace (rootless) a /run/containerd of
// its own, in rayctl's private mount namespace: /run becomes a fresh tmpfs in which each of the host's
// entries is mounted again in place (bind mounts, reached through a descriptor of the host's /run
// opened before the tmpfs hides it; symbolic links copied as they are), beside an empty containerd
// directory. Programs in the namespace, the process runtime's containers among them, see the host's
// /run as before; nothing outside rayctl's namespace sees a change, and no mount of the host's /run is
// left anywhere else (under the data dir, a removal would walk into it). Done once per namespace: a
// second call finds the marker and returns. Only for inside a user namespace of rayctl's: as root,
// containerd's own /run/containerd is right.
func privateRunDir() error {
	marker := filepath.Join("/run", ".rayctl-private")
	if _, err := os.Stat(marker); err == nil {
		return nil // made already by this rayctl
	}
	fd, err := unix.Open("/run", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	hostRun := fmt.Sprintf("/proc/self/fd/%d", fd)
	entries, err := os.ReadDir("/run")
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mounting a private /run for containerd's shims: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == filepath.Base(shimRunDir) {
			continue
		}
		errs = append(errs, remount(filepath.Join(hostRun, e.Name()), filepath.Join("/run", e.Name()), e.Type()))
	}
	errs = append(errs, os.Mkdir(shimRunDir, 0o700), os.WriteFile(marker, nil, 0o600))
	return errors.Join(errs...)
}

// remount puts the host's entry src (of type typ) at dst: a symbolic link as a copy, anything else as a
// bind mount (recursive for a directory, so what is mounted below it comes too) over an empty directory
// or file made for it.
func remount(src, dst string, typ fs.FileMode) error {
	switch {
	case typ&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case typ.IsDir():
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
	default:
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mounting the host's %s again: %w", dst, err)
	}
	return nil
}
