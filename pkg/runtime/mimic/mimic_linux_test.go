package mimic

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// inPrivateMountNamespace runs f on a thread of its own in a new mount
// namespace whose mounts are private; the thread dies afterwards.
func inPrivateMountNamespace(t *testing.T, f func() error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace needs root")
	}
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // left locked: the thread dies with this goroutine
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
			return f()
		}()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// check returns an error when p does not read as want.
func check(p, want string) error {
	got, err := os.ReadFile(p)
	if err != nil || string(got) != want {
		return fmt.Errorf("%s reads %q, %v; want %q", p, got, err, want)
	}
	return nil
}

func TestCoverShowsTheEntriesAndTakesTheWrites(t *testing.T) {
	dir := t.TempDir()
	for _, err := range []error{
		os.WriteFile(filepath.Join(dir, "file"), []byte("host file"), 0o644),
		os.MkdirAll(filepath.Join(dir, "dir", "sub"), 0o755),
		os.WriteFile(filepath.Join(dir, "dir", "below"), []byte("below"), 0o644),
		os.Symlink("file", filepath.Join(dir, "link")),
		os.WriteFile(filepath.Join(dir, "omitted"), nil, 0o644),
		os.Chmod(dir, 0o751),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	inPrivateMountNamespace(t, func() error {
		sub := filepath.Join(dir, "dir", "sub")
		if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=64k"); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, "mounted"), []byte("mounted"), 0o644); err != nil {
			return err
		}
		if err := Cover(dir, "omitted"); err != nil {
			return fmt.Errorf("Cover: %w", err)
		}
		for p, want := range map[string]string{"file": "host file", "link": "host file", "dir/below": "below", "dir/sub/mounted": "mounted"} {
			if err := check(filepath.Join(dir, p), want); err != nil {
				return err
			}
		}
		if target, err := os.Readlink(filepath.Join(dir, "link")); err != nil || target != "file" {
			return fmt.Errorf("link: %q %v, want a copy of the symbolic link", target, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "omitted")); !os.IsNotExist(err) {
			return fmt.Errorf("omitted is there: %v", err)
		}
		if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o751 {
			return fmt.Errorf("the tmpfs's mode: %v %v, want dir's 0751", st.Mode(), err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "new", "deeper"), 0o755); err != nil {
			return err
		}
		// Writes through a bound entry still reach the host's file.
		return os.WriteFile(filepath.Join(dir, "file"), []byte("written"), 0o644)
	})
	if _, err := os.Lstat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("what was made under the cover is on the host: %v", err)
	}
	if err := check(filepath.Join(dir, "file"), "written"); err != nil {
		t.Error(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dir", "sub", "mounted")); !os.IsNotExist(err) {
		t.Errorf("the namespace's tmpfs shows on the host: %v", err)
	}
}

func TestCoverOfTheRootMovesTheThreadsRoot(t *testing.T) {
	name := fmt.Sprintf("/rayctl-mimic-test-%d", os.Getpid())
	t.Cleanup(func() { os.RemoveAll(name) })
	hostname, err := os.ReadFile("/etc/hostname")
	if err != nil {
		t.Skip("no /etc/hostname to read back")
	}
	inPrivateMountNamespace(t, func() error {
		if err := Cover("/"); err != nil {
			return fmt.Errorf("Cover: %w", err)
		}
		if err := os.MkdirAll(name+"/data", 0o755); err != nil {
			return err
		}
		if _, err := os.Stat(name + "/data"); err != nil {
			return err
		}
		return check("/etc/hostname", string(hostname))
	})
	if _, err := os.Lstat(name); !os.IsNotExist(err) {
		t.Errorf("%s was made on the host: %v", name, err)
	}
}
