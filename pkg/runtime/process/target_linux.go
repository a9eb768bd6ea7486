package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// targetMaker makes the missing paths of an isolated container (mount
// targets, its working dir) in the calling thread's mount namespace without
// writing the host's filesystem: a path below a mount the container already
// has (a volume, its private /tmp or home) is made there, as a kubelet makes
// it in a volume; any other is made on a tmpfs that covers its nearest
// existing ancestor and shows that ancestor's entries as they were (see
// mimic). As root the host would otherwise keep dirs such as
// /var/run/secrets/ray.io for good, and rootless it may not make them at all.
type targetMaker struct {
	// mounts are the resolved paths of the container's mounts made so far.
	mounts []string
	// mimics are the dirs covered by mimic so far: each is a tmpfs of the
	// container's, the entries on it the host's.
	mimics []string
}

// mounted records that the container's path p (as given, resolved here) is now one of its mounts.
func (tm *targetMaker) mounted(p string) {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	tm.mounts = append(tm.mounts, filepath.Clean(p))
}

// make makes p, a dir when dir, else an empty file (with its parents), unless it exists.
func (tm *targetMaker) make(p string, dir bool) error {
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	anc := filepath.Dir(filepath.Clean(p))
	for {
		if _, err := os.Stat(anc); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		anc = filepath.Dir(anc)
	}
	anc, err := filepath.EvalSymlinks(anc)
	if err != nil {
		return err
	}
	if !underAny(anc, tm.mounts) && !slices.Contains(tm.mimics, anc) {
		if err := mimic(anc); err != nil {
			return fmt.Errorf("covering %s with a tmpfs: %w", anc, err)
		}
		tm.mimics = append(tm.mimics, anc)
	}
	if dir {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// mimicEntry is one entry of a dir being mimicked: a copy of its symlink, or
// a detached copy of its mount tree (tree) bound onto a dir or empty file of
// the same name.
type mimicEntry struct {
	name, link string
	dir        bool
	tree       int
}

// mimic covers dir (resolved) with a new tmpfs, in the calling thread's mount
// namespace, on which each of dir's entries is a symlink of the same target
// or the same file or dir bound back, with what is mounted below it: what is
// made in dir afterwards lands on the tmpfs, not on the host's filesystem, and
// nothing of dir disappears from sight. The tmpfs has dir's mode and, where
// the owner can be mapped (not in a rootless user namespace), its owner. When
// dir is / the thread's root moves onto the tmpfs.
func mimic(dir string) (err error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	names, err := readDirNames(dir)
	if err != nil {
		return err
	}
	entries := make([]mimicEntry, 0, len(names))
	defer func() {
		for _, e := range entries {
			if e.tree >= 0 {
				unix.Close(e.tree)
			}
		}
	}()
	for _, name := range names {
		p := filepath.Join(dir, name)
		var lst unix.Stat_t
		if err := unix.Lstat(p, &lst); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
		e := mimicEntry{name: name, tree: -1}
		if lst.Mode&unix.S_IFMT == unix.S_IFLNK {
			if e.link, err = os.Readlink(p); err != nil {
				return err
			}
		} else {
			e.dir = lst.Mode&unix.S_IFMT == unix.S_IFDIR
			if e.tree, err = unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fmt.Errorf("copying the mount of %s: %w", p, err)
			}
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
	// An owner this namespace does not map (host root, rootless) cannot be given: the tmpfs is then its root's.
	_ = unix.Fchownat(root, "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH)
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

// readDirNames lists dir's entry names.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
