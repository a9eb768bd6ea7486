package mimic

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// entry is one entry of a dir being mimicked: a copy of its symlink, or
// a detached copy of its mount tree (tree) bound onto a dir or empty file of
// the same name.
type entry struct {
	name, link string
	dir        bool
	tree       int
}

// capture copies dir's entry name: a symbolic link's target, else a detached
// copy of what is mounted there and below (automounts not triggered), whose
// kind is that of the copy.
func capture(dir, name string) (entry, error) {
	p := filepath.Join(dir, name)
	e := entry{name: name, tree: -1}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return e, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		var err error
		e.link, err = os.Readlink(p)
		return e, err
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT)
	if err != nil {
		return e, fmt.Errorf("copying the mount of %s: %w", p, err)
	}
	if err := unix.Fstat(tree, &st); err != nil {
		unix.Close(tree)
		return e, err
	}
	e.tree, e.dir = tree, st.Mode&unix.S_IFMT == unix.S_IFDIR
	return e, nil
}

// Cover covers dir (an absolute path without symbolic links) with a new
// tmpfs in the calling thread's mount namespace, which must not share
// propagation with the host's (made private), on which each of dir's entries
// but those named in omit is a symbolic link of the same target or the same
// file or dir bound back, with what is mounted below it: what is made in dir
// afterwards lands on the tmpfs, not on dir's filesystem, and nothing of dir
// disappears from sight. The tmpfs has dir's mode and, where the owner is
// mapped (not host root in a rootless user namespace), its owner. On an error
// after the tmpfs covered dir it is taken away again. When dir is / the
// calling thread's root moves onto the tmpfs (the thread must have a
// filesystem context of its own: CLONE_FS unshared, as CLONE_NEWNS does).
func Cover(dir string, omit ...string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	dirEntries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	entries := make([]entry, 0, len(dirEntries))
	defer func() {
		for _, e := range entries {
			if e.tree >= 0 {
				unix.Close(e.tree)
			}
		}
	}()
	for _, de := range dirEntries {
		name := de.Name()
		if slices.Contains(omit, name) {
			continue
		}
		e, err := capture(dir, name)
		if errors.Is(err, unix.ENOENT) { // gone since the listing
			continue
		}
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", fmt.Sprintf("%o", st.Mode&0o7777)); err != nil {
		return err
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return err
	}
	root, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	// An owner this namespace does not map (host root, rootless) shows as the overflow id, which may itself
	// be mapped (subordinate ids) but is not the owner: the tmpfs is then left to the namespace's root.
	if overflow := overflowIDs(); st.Uid != overflow[0] && st.Gid != overflow[1] {
		_ = unix.Fchownat(root, "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH)
	}
	for _, e := range entries {
		switch {
		case e.tree < 0:
			err = unix.Symlinkat(e.link, root, e.name)
		case e.dir:
			err = unix.Mkdirat(root, e.name, 0o755)
		default:
			var fd int
			if fd, err = unix.Openat(root, e.name, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644); err == nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			return fmt.Errorf("copying %s: %w", filepath.Join(dir, e.name), err)
		}
	}
	if err := unix.MoveMount(root, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return err
	}
	for _, e := range entries {
		if e.tree < 0 {
			continue
		}
		if err := unix.MoveMount(e.tree, "", root, e.name, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			// Not left half made: dir shows what it showed before (reached through the tmpfs's descriptor,
			// since a path to / would name the root below it).
			_ = unix.Unmount(fmt.Sprintf("/proc/thread-self/fd/%d", root), unix.MNT_DETACH)
			return fmt.Errorf("binding %s back: %w", filepath.Join(dir, e.name), err)
		}
	}
	if dir != "/" {
		return nil
	}
	// A mount on / is not reached from the thread's root, which stays the one below: move the root up.
	cwd, _ := os.Getwd()
	if err := unix.Fchdir(root); err != nil {
		return err
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	if cwd != "" {
		_ = unix.Chdir(cwd)
	}
	return nil
}

// overflowIDs are the uid and gid that stand for ids the caller's user
// namespace does not map (65534 where they cannot be read), read once.
var overflowIDs = sync.OnceValue(func() [2]uint32 {
	return [2]uint32{readOverflowID("uid"), readOverflowID("gid")}
})

func readOverflowID(kind string) uint32 {
	b, err := os.ReadFile("/proc/sys/kernel/overflow" + kind)
	if err != nil {
		return 65534
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 65534
	}
	return uint32(id)
}
