package process

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// rootlessEnv hands TestRootlessHelper the dir its checks use; set only in
// the re-executed test binary.
const rootlessEnv = "RAYCTL_TEST_ROOTLESS_DIR"

// rootlessID is the host uid and gid the user namespace maps 0 to, as a
// rootless rayctl's maps 0 to the user who started it.
const rootlessID = 3_999_000

// As root, the test makes what a rootless rayctl runs in: a user namespace
// mapping only 0 (to an unprivileged host uid) with a mount namespace of its
// own, whose mounts the kernel locks (here vol/sub, read-only beforehand),
// and runs TestRootlessHelper in it.
func TestSpawnInARootlessUserNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making the namespaces needs root")
	}
	dir, err := os.MkdirTemp("", "rayctl-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"vol/sub", "rovol", "other"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"vol", "vol/sub", "rovol", "other"} {
		if err := os.Chown(filepath.Join(dir, d), rootlessID, rootlessID); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runInUserNamespace(dir)
	if err != nil {
		t.Fatalf("the helper in the user namespace: %v\n%s", err, out)
	}
	if !strings.Contains(out, "--- PASS: TestRootlessHelper") {
		t.Fatalf("the helper did not run:\n%s", out)
	}
	t.Logf("helper:\n%s", out)
}

// runInUserNamespace runs TestRootlessHelper in a new user and mount
// namespace, from a thread whose own mount namespace has dir/vol/sub
// read-only, and returns its output.
func runInUserNamespace(dir string) (string, error) {
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		goruntime.LockOSThread() // left locked: the thread dies with this goroutine
		var out bytes.Buffer
		err := func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
			sub := filepath.Join(dir, "vol", "sub")
			if err := unix.Mount(sub, sub, "", unix.MS_BIND, ""); err != nil {
				return err
			}
			if err := unix.Mount("", sub, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return err
			}
			cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{os.Args[0], "-test.run=^TestRootlessHelper$", "-test.v"},
				Env: []string{rootlessEnv + "=" + dir, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Dir: "/", Stdout: &out, Stderr: &out,
				SysProcAttr: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS,
					// 0 inside, so host uid rootlessID: left host root's kuid, it would own root's files.
					Credential:  &syscall.Credential{NoSetGroups: true},
					UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: rootlessID, Size: 1}},
					GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: rootlessID, Size: 1}}}}
			return cmd.Run()
		}()
		done <- result{out.String(), err}
	}()
	r := <-done
	return r.out, r.err
}

// TestRootlessHelper checks, inside the namespaces TestSpawnInARootlessUserNamespace
// makes, what a rootless rayctl relies on: ids it cannot map become 0, limits
// are skipped, and a container spawned there (as 0, with supplementary groups
// it may not set) sees the host read-only save its writable volume, whose
// read-only submount stays so.
func TestRootlessHelper(t *testing.T) {
	dir := os.Getenv(rootlessEnv)
	if dir == "" {
		t.Skip("run by TestSpawnInARootlessUserNamespace")
	}
	maps := currentIDMaps()
	if !maps.uids.has(0) || maps.uids.has(1) {
		t.Fatalf("uid map %v: not a rootless namespace", maps.uids)
	}
	if uid, _, note := containerUser(nil, maps, int64p(1000), nil); uid == nil || *uid != 0 || note == "" {
		t.Errorf("runAsUser 1000: %v %q", uid, note)
	}
	if _, err := ownCgroup("memory"); err == nil {
		cgs, err := makeCgroups("rootless-"+randHex(4), runtime.Resources{MemoryBytes: 256 << 20})
		if !errors.Is(err, errNoCgroups) || len(cgs) != 0 {
			t.Errorf("makeCgroups: %v %v, want errNoCgroups' kind", cgs, err)
		}
		t.Logf("makeCgroups: %v", err)
	}
	vol, sub, rovol, other := filepath.Join(dir, "vol"), filepath.Join(dir, "vol", "sub"), filepath.Join(dir, "rovol"), filepath.Join(dir, "other")
	if err := clearReadOnly(sub); !errors.Is(err, unix.EPERM) {
		t.Errorf("%s is not locked read-only here (clearing it: %v): the test proves nothing", sub, err)
	}
	// Targets the host lacks, below host root's dirs: made in the container's mount namespace only.
	runTarget, topTarget := "/var/run/"+filepath.Base(dir)+"/sa", "/"+filepath.Base(dir)+"/data"
	var out bytes.Buffer
	cmd := &exec.Cmd{Path: "/bin/sh", Args: []string{"sh", "-c", `echo "ids $(id -u) $(hostname)"; ` +
		`for f in ` + runTarget + " " + topTarget + `; do test -d "$f/sub" && echo "$f has sub"; done; ` +
		`for f in ` + strings.Join([]string{vol, sub, rovol, other, "/tmp", "/dev/shm"}, " ") + `; do ` +
		`if { echo hi > "$f/x-$$"; } 2>/dev/null; then echo "$f ok"; rm -f "$f/x-$$"; else echo "$f no: $( { : > "$f/x-$$"; } 2>&1)"; fi; done`},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Dir: "/", Stdout: &out, Stderr: &out,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Credential: credential(0, 0)}}
	ns := nsSetup{hostname: "rootless", readOnlyHost: true,
		mounts: []runtime.Mount{{HostPath: vol, ContainerPath: vol}, {HostPath: rovol, ContainerPath: rovol, ReadOnly: true},
			{HostPath: vol, ContainerPath: runTarget, ReadOnly: true}, {HostPath: vol, ContainerPath: topTarget, ReadOnly: true}}}
	if err := spawn(cmd, true, ns); err != nil {
		t.Fatalf("spawn: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the container: %v\n%s", err, out.String())
	}
	got := out.String()
	t.Logf("the container:\n%s", got)
	for _, p := range []string{filepath.Dir(runTarget), filepath.Dir(topTarget)} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s was made on the host: %v", p, err)
		}
	}
	for _, want := range []string{"ids 0 rootless\n", vol + " ok\n", "/dev/shm ok\n", runTarget + " has sub\n", topTarget + " has sub\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the container's output lacks %q", want)
		}
	}
	for _, ro := range []string{sub, rovol, other, "/tmp"} {
		if !hasLine(got, ro+" no: ", "Read-only file system") {
			t.Errorf("%s is not refused as read-only", ro)
		}
	}
}

// hasLine reports whether a line of text starts with prefix and contains s.
func hasLine(text, prefix, s string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// clearReadOnly tries to make the mount at target writable, in a mount
// namespace of its own made for the try.
func clearReadOnly(target string) error {
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // left locked: the thread dies with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		errc <- unix.MountSetattr(unix.AT_FDCWD, target, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
	}()
	return <-errc
}
