package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The tests run as root, and the unprivileged path is what they test: so
// they run this test binary again as nobody, with scenarioEnv naming what it
// does instead of running tests (see TestMain and scenarios).
const (
	scenarioEnv = "RAYCTL_USERNS_TEST_SCENARIO"
	// dirEnv is a directory nobody owns, where a scenario leaves its files.
	dirEnv = "RAYCTL_USERNS_TEST_DIR"
)

// nobody is the user the scenarios run as.
const nobody = 65534

func TestMain(m *testing.M) {
	if s := os.Getenv(scenarioEnv); s != "" {
		os.Exit(runScenario(s))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// runScenario runs the scenario named s and returns the exit code.
// "launch:X" runs Reexec with scenario X for the child; "churn:X" does too,
// and once the child has written its pid, ends many OS threads (see churn);
// "rm:X" does too, after removing its own binary.
func runScenario(s string) int {
	if child, ok := strings.CutPrefix(s, "churn:"); ok {
		go churn(os.Getenv(dirEnv))
		s = "launch:" + child
	}
	if child, ok := strings.CutPrefix(s, "rm:"); ok {
		// The binary removed, as an upgrade may replace it while it runs.
		self, err := os.Executable()
		if err == nil {
			err = os.Remove(self)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "removing the binary:", err)
			return 124
		}
		s = "launch:" + child
	}
	if child, ok := strings.CutPrefix(s, "launch:"); ok {
		env := append(os.Environ(), scenarioEnv+"="+child)
		code, err := Reexec(os.Args[1:], env)
		if err != nil {
			fmt.Fprintln(os.Stderr, "Reexec:", err)
			return 125
		}
		return code
	}
	f, ok := scenarios[s]
	if !ok {
		fmt.Fprintln(os.Stderr, "no scenario", s)
		return 126
	}
	return f(os.Getenv(dirEnv))
}

// churn waits for dir/pid, then has the Go runtime end 200 OS threads (a
// goroutine that exits locked to its thread ends it), as a program's
// unrelated code might, and writes dir/churned. Were Reexec's child forked
// from one of those threads, its Pdeathsig would kill it.
func churn(dir string) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "pid")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 200 {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(done)
		}()
		<-done
		// Let the runtime start a thread and pick an idle one again.
		time.Sleep(time.Millisecond)
	}
	_ = writeFileAtomic(filepath.Join(dir, "churned"), "")
}

// scenarios are what the test binary does when run with scenarioEnv; each
// gets the directory dirEnv names and returns the exit code.
var scenarios = map[string]func(dir string) int{
	// outside: Supported and the helpers as nobody in the host's namespaces.
	"outside": func(string) int {
		r := outsideReport{
			Inside:           Inside(),
			MappedUID0:       MappedUID(0),
			MappedUID65534:   MappedUID(nobody),
			SetgroupsAllowed: SetgroupsAllowed(),
		}
		if err := Supported(); err != nil {
			r.Supported = err.Error()
		}
		if err := PrivateMounts(); err != nil {
			r.PrivateMounts = err.Error()
		}
		return printJSON(r)
	},
	// seccomp: Supported under a seccomp filter that forbids new user
	// namespaces, as Docker's default one does.
	"seccomp": func(string) int {
		if err := denyUserns(); err != nil {
			fmt.Fprintln(os.Stderr, "installing the filter:", err)
			return 3
		}
		return printJSON(errString(Supported()))
	},
	// netns: the child of Reexec does what rayctl will, reports, and waits
	// for SIGTERM, on which it exits 7.
	"netns": childNetns,
	// exit: the child exits 42.
	"exit": func(string) int { return 42 },
	// selfkill: the child dies of SIGKILL.
	"selfkill": func(string) int {
		_ = unix.Kill(os.Getpid(), unix.SIGKILL)
		time.Sleep(time.Minute)
		return 3
	},
	// nested: the child tries Reexec, which must refuse, and exits 0 if it
	// did.
	"nested": func(string) int {
		_, err := Reexec(nil, []string{scenarioEnv + "=exit"})
		if err == nil || !strings.Contains(err.Error(), "already inside") {
			fmt.Fprintln(os.Stderr, "Reexec inside:", err)
			return 5
		}
		return 0
	},
	// sleep: the child writes its pid and sleeps.
	"sleep": func(dir string) int {
		if err := writeFileAtomic(filepath.Join(dir, "pid"), strconv.Itoa(os.Getpid())); err != nil {
			return 3
		}
		time.Sleep(time.Minute)
		return 4
	},
	// maxuserns: the child sets user.max_user_namespaces to 0 in its user
	// namespace (where it holds CAP_SYS_RESOURCE; the limit binds that
	// namespace and its children only) and reports what Supported says.
	"maxuserns": func(string) int {
		if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
			fmt.Fprintln(os.Stderr, "setting the limit:", err)
			return 3
		}
		return printJSON(errString(Supported()))
	},
}

// outsideReport is what the scenario outside saw.
type outsideReport struct {
	Supported, PrivateMounts                             string
	Inside, MappedUID0, MappedUID65534, SetgroupsAllowed bool
}

// netnsReport is what the child of scenario netns saw and did; Err is the
// first step that failed.
type netnsReport struct {
	UID, GID, PID                              int
	Groups                                     []int
	Inside, MappedUID0, MappedUID1, MappedGID0 bool
	SetgroupsAllowed                           bool
	BindSees                                   string // what the bind mount of the tmpfs shows
	GroupFile                                  string // what dir/group (root:100, 0640) holds, or why it cannot be read
	Links                                      []string
	NetnsFileIsNsfs                            bool
	Listen                                     string // a listener on the host's loopback
	Err                                        string
}

// childNetns is scenario netns: in its user namespace, it makes its mounts
// private, mounts a tmpfs at dir/tmpfs and binds it at dir/bind, creates a
// network namespace with a bridge and a veth pair on it and binds it at
// dir/netns as `ip netns add` would, creates dir/owned, listens on
// 127.0.0.1 (the host's, since the process's network namespace is), then
// writes dir/report.json and waits for SIGTERM.
func childNetns(dir string) int {
	r := netnsReport{
		UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid(),
		Inside: Inside(), MappedUID0: MappedUID(0), MappedUID1: MappedUID(1), MappedGID0: MappedGID(0),
		SetgroupsAllowed: SetgroupsAllowed(),
	}
	r.Groups, _ = os.Getgroups()
	if b, err := os.ReadFile(filepath.Join(dir, "group")); err != nil {
		r.GroupFile = err.Error()
	} else {
		r.GroupFile = string(b)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM)
	var ln net.Listener
	err := func() error {
		if err := PrivateMounts(); err != nil {
			return err
		}
		tmpfs, bind := filepath.Join(dir, "tmpfs"), filepath.Join(dir, "bind")
		for _, d := range []string{tmpfs, bind} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
		}
		if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=1m"); err != nil {
			return fmt.Errorf("mounting a tmpfs: %w", err)
		}
		if err := os.WriteFile(filepath.Join(tmpfs, "hello"), []byte("inside"), 0o644); err != nil {
			return err
		}
		if err := unix.Mount(tmpfs, bind, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting the tmpfs: %w", err)
		}
		b, err := os.ReadFile(filepath.Join(bind, "hello"))
		if err != nil {
			return err
		}
		r.BindSees = string(b)
		nsFile := filepath.Join(dir, "netns")
		if err := makeNetns(nsFile); err != nil {
			return err
		}
		if r.Links, err = linksIn(nsFile); err != nil {
			return err
		}
		var st unix.Statfs_t
		if err := unix.Statfs(nsFile, &st); err != nil {
			return err
		}
		r.NetnsFileIsNsfs = st.Type == unix.NSFS_MAGIC
		if err := os.WriteFile(filepath.Join(dir, "owned"), nil, 0o644); err != nil {
			return err
		}
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		r.Listen = ln.Addr().String()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("inside\n"))
				c.Close()
			}
		}()
		return nil
	}()
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	if err := writeFileAtomic(filepath.Join(dir, "report.json"), string(b)); err != nil {
		return 3
	}
	select {
	case <-sigs:
		return 7
	case <-time.After(time.Minute): // the test is gone
		return 4
	}
}

// makeNetns creates a network namespace holding a bridge and a veth pair
// with one end on the bridge, and bind-mounts it at path.
func makeNetns(path string) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, in the new namespace, ends with the
		// goroutine.
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			}
			br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
			if err := netlink.LinkAdd(br); err != nil {
				return fmt.Errorf("creating a bridge: %w", err)
			}
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth0"}, PeerName: "veth1"}
			if err := netlink.LinkAdd(veth); err != nil {
				return fmt.Errorf("creating a veth pair: %w", err)
			}
			if err := netlink.LinkSetMaster(veth, br); err != nil {
				return fmt.Errorf("attaching the veth to the bridge: %w", err)
			}
			for _, l := range []netlink.Link{br, veth} {
				if err := netlink.LinkSetUp(l); err != nil {
					return fmt.Errorf("setting %s up: %w", l.Attrs().Name, err)
				}
			}
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				return err
			}
			self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
			if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind-mounting the network namespace: %w", err)
			}
			return nil
		}()
	}()
	return <-errc
}

// linksIn lists the links of the network namespace bound at path, from a
// thread that enters it.
func linksIn(path string) ([]string, error) {
	type result struct {
		names []string
		err   error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, as in makeNetns
		f, err := os.Open(path)
		if err != nil {
			c <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			c <- result{err: fmt.Errorf("entering %s: %w", path, err)}
			return
		}
		links, err := netlink.LinkList()
		var names []string
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		c <- result{names, err}
	}()
	r := <-c
	return r.names, r.err
}

// denyUserns installs, on every thread, a seccomp filter under which clone
// and unshare with CLONE_NEWUSER fail with EPERM (and clone3, whose flags a
// filter cannot read, with ENOSYS, which makes callers fall back to clone).
func denyUserns() error {
	const (
		offNr   = 0  // seccomp_data.nr
		offArg0 = 16 // seccomp_data.args[0], its low half on little-endian
		retErr  = unix.SECCOMP_RET_ERRNO
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
	}
	ld, jeq, jset, ret := uint16(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS), uint16(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K),
		uint16(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K), uint16(unix.BPF_RET|unix.BPF_K)
	prog := []unix.SockFilter{
		stmt(ld, offNr),
		jump(jeq, unix.SYS_CLONE3, 0, 1),
		stmt(ret, retErr|uint32(unix.ENOSYS)),
		jump(jeq, unix.SYS_CLONE, 2, 0),
		jump(jeq, unix.SYS_UNSHARE, 1, 0),
		stmt(ret, unix.SECCOMP_RET_ALLOW),
		stmt(ld, offArg0),
		jump(jset, unix.CLONE_NEWUSER, 0, 1),
		stmt(ret, retErr|uint32(unix.EPERM)),
		stmt(ret, unix.SECCOMP_RET_ALLOW),
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}

// errString is err's text, "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// printJSON prints v to stdout and returns the exit code.
func printJSON(v any) int {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		return 3
	}
	return 0
}

// writeFileAtomic writes s to path so that a reader sees all of it or no
// file.
func writeFileAtomic(path, s string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

var (
	binOnce sync.Once
	binDir  string // removed by TestMain
	binPath string
	binErr  error
)

// nobodyBinary is a copy of this test binary that nobody may run: the
// original may sit in a directory only root may enter.
func nobodyBinary(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the scenarios as another user")
	}
	binOnce.Do(func() {
		binPath, binErr = copyBinary(0o755, 0o755)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// copyBinary copies this test binary into a new directory with mode dirMode,
// as a file with mode fileMode, and returns its path.
func copyBinary(dirMode, fileMode os.FileMode) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "rayctl-userns-bin-")
	if err != nil {
		return "", err
	}
	if binDir == "" {
		binDir = dir
	}
	bin := filepath.Join(dir, "userns.test")
	if err := os.WriteFile(bin, b, 0o700); err != nil {
		return "", err
	}
	// Modes set after writing: the umask would mask those given to WriteFile.
	if err := os.Chmod(bin, fileMode); err != nil {
		return "", err
	}
	return bin, os.Chmod(dir, dirMode)
}

// skipUnlessUserns skips the test where this host's settings keep an
// ordinary user from making user namespaces: then the scenarios cannot pass.
func skipUnlessUserns(t *testing.T) {
	t.Helper()
	f := readFacts()
	switch {
	case f.noProc || f.noUserNS:
		t.Skip("no user namespaces here")
	case f.maxUserNS == "0" || f.unprivClone == "0" || f.apparmorRestrict == "1" || f.seccomp:
		t.Skipf("unprivileged user namespaces are off here: %+v", f)
	}
}

// nobodyDir is a new directory that nobody owns, removed after the test.
func nobodyDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rayctl-userns-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The child's mounts die with its mount namespace: nothing to unmount.
		os.RemoveAll(dir)
	})
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asNobody is the command that runs bin as nobody with scenario and dir, and
// extra environment.
func asNobody(bin, scenario, dir string, extra ...string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Env = append([]string{scenarioEnv + "=" + scenario, dirEnv + "=" + dir, "PATH=/usr/bin:/bin"}, extra...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// exitCodeOf is how cmd's run (its Wait, or Run, returning err) ended, as a
// shell reports it.
func exitCodeOf(t *testing.T, cmd *exec.Cmd, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %s: %v", cmd.Env[0], err)
	}
	return exitStatus(cmd.ProcessState)
}

// waitFile waits up to 30 s for path to exist and returns its content; it
// fails the test early if cmd ends first.
func waitFile(t *testing.T, path string, exited <-chan struct{}) []byte {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
		select {
		case <-exited:
			if b, err := os.ReadFile(path); err == nil {
				return b
			}
			t.Fatalf("the launcher ended before %s appeared", path)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not appear within 30 s", path)
	return nil
}

// gone reports whether pid has ended: it no longer exists, or is a zombie
// waiting for whoever adopted it.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(s[i+1:], " Z") || strings.HasPrefix(s[i+1:], " X")
}

func TestSupported(t *testing.T) {
	if err := Supported(); err != nil {
		t.Fatalf("Supported() as uid %d: %v", os.Getuid(), err)
	}
}

func TestOutsideAsNobody(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	for _, marker := range []string{"", MarkerEnv + "=1"} {
		var extra []string
		if marker != "" {
			extra = []string{marker} // Inside must not trust the variable alone
		}
		cmd := asNobody(bin, "outside", "/", extra...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("scenario outside (env %q): %v\n%s", marker, err, stderrOf(err))
		}
		var r outsideReport
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		t.Logf("env %q: %+v", marker, r)
		if r.Supported != "" {
			t.Errorf("Supported() as nobody: %s", r.Supported)
		}
		if r.Inside {
			t.Errorf("Inside() in the host's namespaces (env %q) = true", marker)
		}
		if !r.MappedUID0 || !r.MappedUID65534 || !r.SetgroupsAllowed {
			t.Errorf("in the initial user namespace every id is mapped and setgroups allowed: %+v", r)
		}
		if !strings.Contains(r.PrivateMounts, "not inside") {
			t.Errorf("PrivateMounts() outside = %q, want a refusal", r.PrivateMounts)
		}
	}
}

// stderrOf is the stderr that an *exec.ExitError from Output carries.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

func TestReexecNetnsAsNobody(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	dir := nobodyDir(t)
	cmd := asNobody(bin, "launch:netns", dir)
	// A supplementary group (users), to see what becomes of it inside, and a
	// file only that group may read.
	cmd.SysProcAttr.Credential.Groups = []uint32{100}
	groupFile := filepath.Join(dir, "group")
	if err := os.WriteFile(groupFile, []byte("for group 100"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(groupFile, 0, 100); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groupFile, 0o640); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	b := waitFile(t, filepath.Join(dir, "report.json"), exited)
	var r netnsReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	t.Logf("the child: %+v", r)
	if r.Err != "" {
		t.Fatalf("in the child: %s", r.Err)
	}
	if r.UID != 0 || r.GID != 0 || !r.Inside {
		t.Errorf("the child is uid %d gid %d, Inside %v; want 0, 0, true", r.UID, r.GID, r.Inside)
	}
	if !r.MappedUID0 || r.MappedUID1 || !r.MappedGID0 || r.SetgroupsAllowed {
		t.Errorf("inside, only uid 0 and gid 0 are mapped and setgroups is denied: %+v", r)
	}
	// Unmapped, the launcher's groups show as the overflow gid inside; they
	// still count for access to the host's files, and cannot be dropped.
	overflow, err := strconv.Atoi(sysctl("kernel/overflowgid"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Groups) != 1 || r.Groups[0] != overflow {
		t.Errorf("inside, the launcher's group 100 shows as %v, want [%d] (the overflow gid)", r.Groups, overflow)
	}
	if r.GroupFile != "for group 100" {
		t.Errorf("inside, a file of the launcher's group 100 reads %q", r.GroupFile)
	}
	if r.BindSees != "inside" {
		t.Errorf("the bind mount of the tmpfs shows %q", r.BindSees)
	}
	if want := []string{"lo", "br0", "veth1", "veth0"}; strings.Join(sorted(r.Links), ",") != strings.Join(sorted(want), ",") {
		t.Errorf("links in the bound network namespace: %v, want %v", r.Links, want)
	}
	if !r.NetnsFileIsNsfs {
		t.Errorf("%s/netns inside is not a namespace file", dir)
	}

	// Seen from the host, while the child and its mounts live.
	if st, err := os.Stat(filepath.Join(dir, "owned")); err != nil {
		t.Error(err)
	} else if uid := st.Sys().(*syscall.Stat_t).Uid; uid != nobody {
		t.Errorf("a file the child made is owned by uid %d on the host, want %d", uid, nobody)
	}
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.PID)); err != nil {
		t.Error(err)
	} else if !strings.Contains(string(status), fmt.Sprintf("\nUid:\t%d\t", nobody)) {
		t.Errorf("the child (pid %d) is not uid %d on the host:\n%s", r.PID, nobody, status)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mountinfo), dir) {
		t.Errorf("the child's mounts show on the host:\n%s", grepLines(string(mountinfo), dir))
	}
	for _, d := range []string{"tmpfs", "bind"} {
		if ents, err := os.ReadDir(filepath.Join(dir, d)); err != nil || len(ents) != 0 {
			t.Errorf("on the host %s/%s holds %v (%v), want nothing", dir, d, ents, err)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(dir, "netns"), &st); err != nil || st.Type == unix.NSFS_MAGIC {
		t.Errorf("on the host %s/netns is a namespace file (or %v)", dir, err)
	}
	c, err := net.DialTimeout("tcp", r.Listen, 5*time.Second)
	if err != nil {
		t.Errorf("the child's listener on the loopback is not the host's: %v", err)
	} else {
		c.Close()
	}

	// SIGTERM to the launcher reaches the child, which exits 7; so does the
	// launcher.
	if err := cmd.Process.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the launcher did not end within 30 s of SIGTERM")
	}
	if code := exitCodeOf(t, cmd, waitErr); code != 7 {
		t.Errorf("after SIGTERM the launcher exited %d, want the child's 7\n%s", code, stderr.String())
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// sorted is a sorted copy of s.
func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func TestReexecExitCodeAsNobody(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	for child, want := range map[string]int{"exit": 42, "selfkill": 128 + 9, "nested": 0} {
		cmd := asNobody(bin, "launch:"+child, "/")
		out, err := cmd.CombinedOutput()
		if code := exitCodeOf(t, cmd, err); code != want {
			t.Errorf("a child that %s: the launcher exited %d, want %d\n%s", child, code, want, out)
		}
	}
}

func TestReexecPdeathsigAsNobody(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	dir := nobodyDir(t)
	cmd := asNobody(bin, "launch:sleep", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b := waitFile(t, filepath.Join(dir, "pid"), exited)
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGKILL) })
	if gone(pid) {
		t.Fatalf("the child (pid %d) is not running", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	deadline := time.Now().Add(10 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the child (pid %d) still runs 10 s after its launcher was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReexecThreadChurnAsNobody checks that the child outlives the OS
// threads the launcher's runtime ends while it runs: only the launcher's
// death may fire its Pdeathsig.
func TestReexecThreadChurnAsNobody(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	dir := nobodyDir(t)
	cmd := asNobody(bin, "churn:sleep", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	b := waitFile(t, filepath.Join(dir, "pid"), exited)
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	// Should the churn kill the child, the launcher ends before this.
	waitFile(t, filepath.Join(dir, "churned"), exited)
	if gone(pid) {
		t.Fatalf("the child (pid %d) died while its launcher ended OS threads", pid)
	}
}

// TestSupportedMaxUserNamespacesZero runs Supported where
// user.max_user_namespaces is 0: in a user namespace whose own limit (which
// binds it and its children) the test set to 0, so the host's stays as it
// is.
func TestSupportedMaxUserNamespacesZero(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	cmd := asNobody(bin, "launch:maxuserns", "/")
	out, err := runWithin(t, cmd, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderrOf(err))
	}
	var msg string
	if err := json.Unmarshal(out, &msg); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if msg != "user.max_user_namespaces is 0" {
		t.Errorf("Supported() with user.max_user_namespaces=0: %q", msg)
	}
}

// TestSupportedSeccomp runs Supported under a seccomp filter that forbids
// user namespaces, as a container's may.
func TestSupportedSeccomp(t *testing.T) {
	bin := nobodyBinary(t)
	skipUnlessUserns(t)
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("the filter is written for amd64 and arm64")
	}
	cmd := asNobody(bin, "seccomp", "/")
	out, err := runWithin(t, cmd, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderrOf(err))
	}
	var msg string
	if err := json.Unmarshal(out, &msg); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.HasPrefix(msg, "a seccomp filter forbids making user namespaces") {
		t.Errorf("Supported() under seccomp: %q", msg)
	}
}

// runWithin runs cmd for its stdout, failing the test if it takes longer
// than d: Supported must answer, not hang.
func runWithin(t *testing.T, cmd *exec.Cmd, d time.Duration) ([]byte, error) {
	t.Helper()
	type result struct {
		out []byte
		err error
	}
	c := make(chan result, 1)
	go func() {
		out, err := cmd.Output()
		c <- result{out, err}
	}()
	select {
	case r := <-c:
		return r.out, r.err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		t.Fatalf("no answer within %v", d)
		return nil, nil
	}
}

// TestBinaryWhereAsNobody runs the launcher from where an ordinary user's
// rayctl may sit: a directory the user may search but not list, a binary
// removed since it started (both work, as /proc/self/exe does not look up a
// path), and a binary the user may execute but not read, which makes the
// launcher non-dumpable: its child's /proc files then belong to root, the
// launcher cannot write the child's id maps, and Supported says so.
func TestBinaryWhereAsNobody(t *testing.T) {
	nobodyBinary(t) // the root check, and binDir's removal
	skipUnlessUserns(t)
	searchOnly, err := copyBinary(0o711, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(filepath.Dir(searchOnly))
	cmd := asNobody(searchOnly, "launch:exit", "/")
	out, err := cmd.CombinedOutput()
	if code := exitCodeOf(t, cmd, err); code != 42 {
		t.Errorf("from a directory mode 0711: exit %d, want 42\n%s", code, out)
	}

	removable, err := copyBinary(0o755, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(filepath.Dir(removable))
	if err := os.Chown(filepath.Dir(removable), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd = asNobody(removable, "rm:exit", "/")
	out, err = cmd.CombinedOutput()
	if code := exitCodeOf(t, cmd, err); code != 42 {
		t.Errorf("with the binary removed: exit %d, want 42\n%s", code, out)
	}

	unreadable, err := copyBinary(0o755, 0o711)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(filepath.Dir(unreadable))
	cmd = asNobody(unreadable, "outside", "/")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderrOf(err))
	}
	var r outsideReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.HasPrefix(r.Supported, "rayctl's binary is not readable by this user") {
		t.Errorf("Supported() from a binary mode 0711: %q", r.Supported)
	}
}
