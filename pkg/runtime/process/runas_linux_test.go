package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// lockedDownFixture is an isolated fixture whose containers run as a pod
// user, on a read-only host, as rayctl runs them as real root.
func lockedDownFixture(t *testing.T) (*fixture, User) {
	t.Helper()
	var u User
	f := isolatedFixtureWith(t, func(o *Options) {
		u = PodUser(o.StateDir)
		o.RunAs, o.ReadOnlyHost = &u, true
	})
	return f, u
}

// tryWrites is a shell loop that appends to each of paths and says, one
// line each, "<path> ok" or "<path> no: <the shell's error>".
func tryWrites(paths ...string) string {
	return `for f in ` + strings.Join(paths, " ") + `; do if { echo hi >> "$f"; } 2>/tmp/.err; then echo "$f ok"; else echo "$f no: $(cat /tmp/.err)"; fi; done; `
}

// writable returns a new host dir anyone may write, so that a write refused
// in it is refused by its mount, not by its owner.
func writable(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestARunAsContainerIsThePodUserOnAReadOnlyHost(t *testing.T) {
	f, u := lockedDownFixture(t)
	sb := f.pod(t, "locked")
	vol, rovol := writable(t), writable(t)
	// A host file anyone may write: only the read-only host keeps the pod off it.
	hostFile, err := os.CreateTemp("/var/tmp", "rayctl-runas-")
	if err != nil {
		t.Fatal(err)
	}
	hostFile.Close()
	t.Cleanup(func() { os.Remove(hostFile.Name()) })
	if err := os.Chmod(hostFile.Name(), 0o666); err != nil {
		t.Fatal(err)
	}
	victim := "/root/pwned-" + fmtDigits()
	t.Cleanup(func() { os.Remove(victim) })
	cfg := runtime.ContainerConfig{Name: "ray-head", Image: "rayproject/ray:2.60.0",
		RunAsUser: int64p(0), RunAsGroup: int64p(0), // what the pod asks does not matter
		// Mount targets under the private /tmp: missing ones are made there, not on the host.
		Mounts: []runtime.Mount{{HostPath: vol, ContainerPath: "/tmp/data"}, {HostPath: rovol, ContainerPath: "/tmp/ro", ReadOnly: true}},
		Command: []string{"/bin/sh", "-c", `echo "ids $(id -u) $(id -g) $(id -G) $(whoami) $HOME $(pwd)"; ` +
			tryWrites(victim, "/etc/rayctl-x", hostFile.Name(), "/var/tmp/rayctl-new-"+fmtDigits(), "/tmp/ro/x", "/tmp/x", "/tmp/data/x", "/home/ray/x", "/dev/shm/rayctl-x-"+fmtDigits()) +
			`echo ready; exec sleep 1000`}}
	id, logPath := f.run(t, f.r, sb, cfg)
	waitLog(t, logPath, "ready")
	got := strings.Join(logLines(t, logPath), "\n")
	uid := strconv.FormatUint(uint64(u.UID), 10)
	for _, want := range []string{
		"stdout ids " + uid + " " + uid + " " + uid + " ray /home/ray /home/ray", // root's groups are gone
		victim + " no:", "/etc/rayctl-x no: ", hostFile.Name() + " no: ", "/var/tmp/rayctl-new-",
		"/tmp/ro/x no: ", "/tmp/x ok", "/tmp/data/x ok", "/home/ray/x ok", "/dev/shm/rayctl-x-",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q:\n%s", want, got)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		// Refused by the read-only host, not merely by the files' owners.
		if (strings.Contains(line, "/var/tmp/") || strings.Contains(line, "/tmp/ro/x") || strings.Contains(line, "/etc/rayctl-x")) && !strings.Contains(line, "Read-only file system") {
			t.Errorf("not refused as read-only: %s", line)
		}
		if strings.Contains(line, "/dev/shm/") && !strings.HasSuffix(line, " ok") {
			t.Errorf("/dev/shm is not writable: %s", line)
		}
	}
	if b, _ := os.ReadFile(hostFile.Name()); len(b) != 0 {
		t.Errorf("the container wrote the host's %s: %q", hostFile.Name(), b)
	}
	if _, err := os.Stat(victim); !os.IsNotExist(err) {
		t.Errorf("the container wrote %s: %v", victim, err)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "x")); err != nil || string(b) != "hi\n" {
		t.Errorf("the volume: %q %v", b, err)
	}
	st, err := os.Stat(filepath.Join(sb.Config.Dir, "rt", "ray-head", "home", "x"))
	if err != nil || !ownedBy(st, u) {
		t.Errorf("the home's file: %v %v", st, err)
	}
	// Exec is the pod user too, read-only host included.
	if out, code := execOut(t, f.r, id, "echo $(id -u) $(whoami); "+tryWrites(hostFile.Name())); code != 0 || !strings.HasPrefix(out, uid+" ray\n"+hostFile.Name()+" no: ") {
		t.Errorf("exec: %d %q", code, out)
	}
}

// ownedBy reports whether a file belongs to u.
func ownedBy(st os.FileInfo, u User) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && s.Uid == u.UID && s.Gid == u.GID
}

func TestAnotherImagesPodUserIsNamedAndWorksFromSlash(t *testing.T) {
	f, u := lockedDownFixture(t)
	sb := f.pod(t, "plain")
	// /dev/stdout reopens the container's output FIFO, which must be the user's to open.
	cfg := sh("plain", `echo "$(id -un) $(id -gn) $(pwd) $HOME" >/dev/stdout; grep -c "^rayctl-pod:" /etc/passwd`)
	cfg.RunAsUser = int64p(1000) // a host user's uid, on many hosts
	id, logPath := f.run(t, f.r, sb, cfg)
	if s := waitExited(t, f.r, id); s.ExitCode != 0 {
		t.Errorf("status %+v", s)
	}
	waitLog(t, logPath, "stdout F 1")
	if got := strings.Join(logLines(t, logPath), "|"); got != "stdout rayctl-pod rayctl-pod / /|stdout 1" {
		t.Errorf("log %q (pod user %d)", got, u.UID)
	}
}

func TestRaysimRunsForThePodUser(t *testing.T) {
	// rayctl's data dir and binary are where the pod user may not go (not under
	// /tmp, which containers do not share).
	private, err := os.MkdirTemp("/var/tmp", "rayctl-sim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(private) })
	ray := filepath.Join(private, "raysim")
	if err := os.WriteFile(ray, []byte("#!/bin/sh\necho \"raysim:$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := isolatedFixtureWith(t, func(o *Options) {
		u := PodUser(private)
		o.StateDir, o.RayBinary, o.RunAs, o.ReadOnlyHost = filepath.Join(private, "state"), ray, &u, true
	})
	sb := f.pod(t, "sim")
	direct, directLog := f.run(t, f.r, sb, runtime.ContainerConfig{Name: "direct", Image: "rayctl.local/raysim:dev", Command: []string{"ray", "--version"}})
	shell, shellLog := f.run(t, f.r, sb, runtime.ContainerConfig{Name: "shell", Image: "rayctl.local/raysim:dev", Command: []string{"/bin/sh", "-c", "ray --version; echo exit=$?"}})
	for _, id := range []string{direct, shell} {
		if s := waitExited(t, f.r, id); s.ExitCode != 0 {
			t.Errorf("status %+v", s)
		}
	}
	waitLog(t, directLog, "stdout F raysim:--version")
	waitLog(t, shellLog, "stdout F exit=0")
	waitLog(t, shellLog, "stdout F raysim:--version")
}

func TestWithoutRunAsTheContainersUserIsItsOwn(t *testing.T) {
	f := isolatedFixture(t)
	sb := f.pod(t, "own")
	cfg := sh("own", "echo $(id -u):$(id -g); echo ready; exec sleep 1000")
	cfg.RunAsUser, cfg.RunAsGroup = int64p(1234), int64p(2345)
	id, logPath := f.run(t, f.r, sb, cfg)
	waitLog(t, logPath, "stdout F 1234:2345")
	if out, _ := execOut(t, f.r, id, "echo $(id -u):$(id -g)"); out != "1234:2345\n" {
		t.Errorf("exec runs as %q", out)
	}
}

// A read-only mount on the point of a writable one hides it; making the host
// read-only, then the writable mounts writable again, must not reach through
// the hidden one's path to the read-only one on top.
func TestAReadOnlyMountOverAWritableOneStaysReadOnly(t *testing.T) {
	f, _ := lockedDownFixture(t)
	sb := f.pod(t, "stacked")
	ro := writable(t)
	if err := os.Mkdir(filepath.Join(ro, "rw"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Mount targets under the private /tmp: missing ones are made there, not on the host.
	cfg := sh("stacked", tryWrites("/tmp/data/x", "/tmp/data/rw/x"))
	cfg.Mounts = []runtime.Mount{{HostPath: writable(t), ContainerPath: "/tmp/data"}, {HostPath: ro, ContainerPath: "/tmp/data", ReadOnly: true},
		{HostPath: writable(t), ContainerPath: "/tmp/data/rw"}}
	id, logPath := f.run(t, f.r, sb, cfg)
	waitExited(t, f.r, id)
	waitLog(t, logPath, "/tmp/data/rw/x")
	got := strings.Join(logLines(t, logPath), "\n")
	if !hasLine(got, "stdout /tmp/data/x no: ", "Read-only file system") || !hasLine(got, "stdout /tmp/data/rw/x ok", "") {
		t.Errorf("log:\n%s", got)
	}
}

// TestHiddenDirsLookEmpty: a dir of HiddenDirs (rayctl's data dir, with its keys and kubeconfig) is an
// empty, read-only dir inside an isolated container, while the container's own mounts from under it
// still reach it.
func TestHiddenDirsLookEmpty(t *testing.T) {
	// Not under /tmp, which the container's private /tmp covers anyway.
	secretDir, err := os.MkdirTemp("/var/tmp", "rayctl-hidden-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(secretDir) })
	if err := os.WriteFile(filepath.Join(secretDir, "kubeconfig"), []byte("admin key"), 0o644); err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(secretDir, "volume")
	if err := os.Mkdir(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	f := isolatedFixtureWith(t, func(o *Options) { o.HiddenDirs = []string{secretDir} })
	sb := f.pod(t, "hidden")
	cfg := sh("look", `echo "listing:$(ls -A `+secretDir+` | tr '\n' ' ')"; cat `+secretDir+`/kubeconfig 2>/dev/null && echo READ; `+
		`touch `+secretDir+`/x 2>/dev/null || echo "no write"; echo mine > /data/file && echo "volume ok"; pwd`)
	cfg.Mounts = []runtime.Mount{{HostPath: vol, ContainerPath: "/data"}}
	id, logPath := f.run(t, f.r, sb, cfg)
	waitExited(t, f.r, id)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, want := range []string{"stdout F listing:\n", "no write", "volume ok", "stdout F /\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the container's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "READ") {
		t.Errorf("the container read a file of a hidden dir:\n%s", out)
	}
	if got, err := os.ReadFile(filepath.Join(vol, "file")); err != nil || string(got) != "mine\n" {
		t.Errorf("the volume under the hidden dir: %q, %v", got, err)
	}
}

// TestContainersHoldNoMorePrivileges: a container's processes can gain no capability beyond a container
// runtime's default set (no CAP_SYS_ADMIN to undo the read-only host) and no privilege from a set-user-ID
// program (no_new_privs), even as uid 0.
func TestContainersHoldNoMorePrivileges(t *testing.T) {
	f := isolatedFixtureWith(t, func(*Options) {})
	sb := f.pod(t, "caps")
	id, logPath := f.run(t, f.r, sb, sh("caps", `grep -E '^(CapBnd|CapEff|NoNewPrivs):' /proc/self/status; mount -o remount,rw / 2>/dev/null && echo REMOUNTED`))
	waitExited(t, f.r, id)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for c := range containerCaps {
		want |= 1 << c
	}
	out := string(b)
	for _, line := range []string{fmt.Sprintf("CapBnd:\t%016x", want), fmt.Sprintf("CapEff:\t%016x", want), "NoNewPrivs:\t1"} {
		if !strings.Contains(out, line) {
			t.Errorf("the container's status lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "REMOUNTED") {
		t.Errorf("the container remounted the host read-write:\n%s", out)
	}
}
