package containerd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/snapshots"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/crilog"
	"github.com/rayctl/rayctl/pkg/runtime/image"
	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// env is one private containerd, network and test image shared by the
// package's tests.
type env struct {
	daemon *Daemon
	net    *network.Manager
	ref    string
	dir    string
}

var shared *env

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.close()
	}
	os.Exit(code)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// setup starts the shared containerd on first use, with a test image (busybox
// as the raysim image's /usr/bin/ray, which is all these tests need of it).
func setup(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the containerd runtime needs root")
	}
	if !Available() {
		t.Skip("containerd is not installed (apt-get install -y containerd runc)")
	}
	if shared != nil {
		return shared
	}
	dir, err := os.MkdirTemp("", "rayctl-ctrd-test-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := StartPrivate(ctx, filepath.Join(dir, "containerd"))
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	a, _ := rand.Int(rand.Reader, big.NewInt(50))
	b, _ := rand.Int(rand.Reader, big.NewInt(256))
	nm, err := network.New(network.Config{StateDir: filepath.Join(dir, "net"), Bridge: "rt" + randHex(5), CIDR: fmt.Sprintf("10.%d.%d.0/24", 200+a.Int64(), b.Int64())})
	if err != nil {
		d.Stop()
		t.Fatal(err)
	}
	shared = &env{daemon: d, net: nm, dir: dir}
	busybox := image.DefaultBusyboxPaths[0]
	var buf bytes.Buffer
	ref, err := image.BuildSimImage(&buf, image.SimImageOptions{RayBinary: busybox, Ref: "rayctl.local/rt-test:" + randHex(4)})
	if err != nil {
		t.Fatal(err)
	}
	shared.ref = ref
	r := shared.runtime(t)
	names, err := r.ImportImage(ctx, &buf)
	if err != nil || len(names) != 1 || names[0] != ref {
		t.Fatalf("ImportImage = %v, %v; want [%s]", names, err, ref)
	}
	return shared
}

func (e *env) close() {
	// Whatever a failed test left running goes, so no shim outlives the daemon.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r, err := New(ctx, Options{Address: e.daemon.Address, FIFODir: e.daemon.FIFODir, Network: e.net, StateDir: e.daemon.StateDir}); err == nil {
		cs, _ := r.ListContainers(ctx)
		for _, c := range cs {
			_ = r.RemoveContainer(ctx, c.ID)
		}
		_, _ = r.Sweep(ctx, nil)
		r.Close()
	}
	_, _ = e.net.Cleanup(nil)
	_ = e.net.RemoveBridge()
	_ = e.daemon.Stop()
	_ = os.RemoveAll(e.dir)
}

func (e *env) runtime(t *testing.T) *Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := New(ctx, Options{Address: e.daemon.Address, FIFODir: e.daemon.FIFODir, Network: e.net, StateDir: e.daemon.StateDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// pod makes a sandbox that goes away with the test (after its containers).
func (e *env) pod(t *testing.T, r *Runtime, name string) *runtime.Sandbox {
	t.Helper()
	uid := "uid-" + randHex(6)
	sb, err := r.RunSandbox(testCtx(t), runtime.SandboxConfig{PodUID: uid, Namespace: "default", Name: name, Dir: t.TempDir(),
		DNS: runtime.DNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A runtime of its own: the test may have closed r.
		r := e.runtime(t)
		ctx := context.Background()
		cs, _ := r.ListContainers(ctx)
		for _, c := range cs {
			if c.PodUID == uid {
				_ = r.RemoveContainer(ctx, c.ID)
			}
		}
		if err := r.RemoveSandbox(ctx, uid); err != nil {
			t.Error(err)
		}
	})
	return sb
}

// run creates and starts a container running script with sh -c.
func (e *env) run(t *testing.T, r *Runtime, sb *runtime.Sandbox, name, script string, mod ...func(*runtime.ContainerConfig)) (string, string) {
	t.Helper()
	ctx := testCtx(t)
	logPath := filepath.Join(sb.Config.Dir, name, "0.log")
	cfg := runtime.ContainerConfig{Name: name, Image: e.ref, Command: []string{"/bin/sh", "-c", script}, LogPath: logPath,
		Labels: map[string]string{"io.kubernetes.container.name": name}}
	for _, m := range mod {
		m(&cfg)
	}
	id, err := r.CreateContainer(ctx, sb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id, logPath
}

// waitExited polls the container's status until it has exited.
func waitExited(t *testing.T, r *Runtime, id string) *runtime.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := r.ContainerStatus(testCtx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == runtime.StateExited {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still %s after a minute", id, s.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logLines reads the CRI log as "stream text" strings.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if rec == "" {
			continue
		}
		ln, err := crilog.Parse(rec)
		if err != nil {
			t.Fatalf("log record %q: %v", rec, err)
		}
		out = append(out, ln.Stream+" "+ln.Text)
	}
	return out
}

// waitLog waits until the log holds want.
func waitLog(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("log %s never showed %q:\n%s", path, want, b)
}

func TestContainerRunsExitsAndLogs(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "echo")
	id, logPath := e.run(t, r, sb, "echo", `echo "foo=$FOO path=$PATH"; echo "cwd=$(pwd)"; echo "host=$(hostname)"; grep -c "^`+sb.IP+`" /etc/hosts; cat /etc/resolv.conf; echo "nofile=$(ulimit -n)"; ulimit -n 65536 && echo "raised"; echo oops >&2; exit 3`,
		func(c *runtime.ContainerConfig) {
			c.Env = []runtime.EnvVar{{Name: "FOO", Value: "bar"}}
			c.WorkingDir = "/tmp"
		})
	s := waitExited(t, r, id)
	if s.ExitCode != 3 || s.Reason != "Error" || s.StartedAt.IsZero() || s.FinishedAt.Before(s.StartedAt) {
		t.Errorf("status %+v", s)
	}
	if s.PodUID != sb.PodUID || s.Name != "echo" || s.Image != e.ref || !strings.HasPrefix(s.ImageID, "sha256:") || s.Labels["io.kubernetes.container.name"] != "echo" {
		t.Errorf("status identity %+v", s)
	}
	lines := logLines(t, logPath)
	want := []string{"stdout foo=bar path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "stdout cwd=/tmp", "stdout host=echo", "stdout 1",
		"stdout nameserver 10.96.0.10", "stdout search default.svc.cluster.local", "stderr oops",
		// A Kubernetes node's open-files limit, not containerd's default 1024: KubeRay's `ulimit -n 65536` works.
		fmt.Sprintf("stdout nofile=%d", openFilesLimit)}
	if openFilesLimit >= 65536 {
		want = append(want, "stdout raised")
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("log lacks %q; it has %q", w, lines)
		}
	}
}

// TestStartErrorIsAnExit: a container whose process cannot be started is reported exited with code 128
// and reason StartError, the runtime's error as its message, as containerd's CRI reports one; the
// kubelet then restarts it per its pod's policy instead of leaving it created for ever.
func TestStartErrorIsAnExit(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "starterror")
	ctx := testCtx(t)
	id, err := r.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "missing", Image: e.ref, Command: []string{"/no/such/program"},
		LogPath: filepath.Join(sb.Config.Dir, "missing", "0.log")})
	if err != nil {
		t.Fatal(err)
	}
	startErr := r.StartContainer(ctx, id)
	if startErr == nil {
		t.Fatal("starting a container whose program does not exist succeeded")
	}
	s, err := r.ContainerStatus(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != runtime.StateExited || s.ExitCode != 128 || s.Reason != "StartError" || !s.StartedAt.IsZero() || s.FinishedAt.IsZero() ||
		!strings.Contains(s.Message, "/no/such/program") {
		t.Errorf("status after the failed start (%v): %+v; want exited, 128, StartError, the error as message", startErr, s)
	}
	if err := r.StartContainer(ctx, id); err == nil {
		t.Error("a second start of the failed container succeeded")
	}
	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Errorf("removing the failed container: %v", err)
	}
}

func TestStopHonoursGraceThenKills(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "stop")
	polite, politeLog := e.run(t, r, sb, "polite", `trap 'echo got TERM; exit 0' TERM; echo ready; while true; do sleep 0.05; done`)
	stubborn, _ := e.run(t, r, sb, "stubborn", `trap '' TERM; echo ready; while true; do sleep 0.05; done`)
	waitLog(t, politeLog, "ready")
	ctx := testCtx(t)
	if err := r.StopContainer(ctx, polite, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if s, _ := r.ContainerStatus(ctx, polite); s.State != runtime.StateExited || s.ExitCode != 0 || s.Reason != "Completed" {
		t.Errorf("polite container after stop: %+v", s)
	}
	waitLog(t, politeLog, "got TERM")
	if err := r.StopContainer(ctx, stubborn, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s, _ := r.ContainerStatus(ctx, stubborn); s.State != runtime.StateExited || s.ExitCode != 137 {
		t.Errorf("stubborn container after stop: %+v", s)
	}
	if err := r.StopContainer(ctx, stubborn, time.Second); err != nil {
		t.Errorf("stopping a stopped container: %v", err)
	}
}

func TestMemoryLimitOOMKills(t *testing.T) {
	e := setup(t)
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err != nil {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
			t.Skip("no memory cgroup controller here")
		}
	}
	r := e.runtime(t)
	sb := e.pod(t, r, "oom")
	id, _ := e.run(t, r, sb, "hog", `exec dd if=/dev/zero of=/dev/null bs=200M count=1`, func(c *runtime.ContainerConfig) {
		c.Resources.MemoryBytes = 32 << 20
	})
	s := waitExited(t, r, id)
	if s.Reason != "OOMKilled" || s.ExitCode != 137 {
		t.Fatalf("status %+v, want OOMKilled with 137", s)
	}
	// A container within its limit is not called OOMKilled.
	ok, _ := e.run(t, r, sb, "modest", `dd if=/dev/zero of=/dev/null bs=1M count=1`, func(c *runtime.ContainerConfig) {
		c.Resources.MemoryBytes = 64 << 20
		c.Resources.CPUMillis = 500
	})
	if s := waitExited(t, r, ok); s.Reason != "Completed" || s.ExitCode != 0 {
		t.Fatalf("modest container: %+v", s)
	}
}

func TestExec(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "exec")
	id, logPath := e.run(t, r, sb, "main", `echo ready; exec sleep 1000`)
	waitLog(t, logPath, "ready")
	ctx := testCtx(t)
	var out, errOut bytes.Buffer
	code, err := r.Exec(ctx, id, []string{"sh", "-c", `echo "in $(hostname)"; read line; echo "got $line"; echo bad >&2; exit 7`},
		runtime.ExecIO{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	if code != 7 || out.String() != "in exec\ngot hello\n" || errOut.String() != "bad\n" {
		t.Errorf("exec: code %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	code, err = r.Exec(ctx, id, []string{"tty"}, runtime.ExecIO{Stdout: &out, TTY: true})
	if err != nil || code != 0 || !strings.HasPrefix(out.String(), "/dev/pts/") {
		t.Errorf("exec with a TTY: %d %q %v", code, out.String(), err)
	}
	if _, err := r.Exec(ctx, "no-such-container", []string{"true"}, runtime.ExecIO{}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("exec in a missing container: %v", err)
	}
}

func TestPodsReachEachOther(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	a := e.pod(t, r, "server")
	b := e.pod(t, r, "client")
	if a.IP == b.IP {
		t.Fatalf("both pods have %s", a.IP)
	}
	_, serverLog := e.run(t, r, a, "server", `echo ready; while true; do echo "hello from $(hostname)" | nc -l -p 8080; done`)
	client, clientLog := e.run(t, r, b, "client", `echo ready; exec sleep 1000`)
	waitLog(t, serverLog, "ready")
	waitLog(t, clientLog, "ready")
	ctx := testCtx(t)
	var out bytes.Buffer
	// The listener may need a moment after "ready"; nc's exit code says whether it connected.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out.Reset()
		code, err := r.Exec(ctx, client, []string{"nc", "-w", "2", a.IP, "8080"}, runtime.ExecIO{Stdout: &out, Stdin: strings.NewReader("")})
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 && strings.Contains(out.String(), "hello from server") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client pod could not reach %s:8080: exit %d, %q", a.IP, code, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The node namespace reaches the pod too (retrying: the loop restarts nc after each
	// connection, leaving a moment with no listener); the host's namespace has no route to it.
	deadline = time.Now().Add(30 * time.Second)
	for {
		line, err := nodeRead(e.net, net.JoinHostPort(a.IP, "8080"))
		if err == nil && line == "hello from server\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host could not reach %s:8080: %q %v", a.IP, line, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nodeRead(nm *network.Manager, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := nm.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

func TestANewRuntimeReadoptsRunningContainers(t *testing.T) {
	e := setup(t)
	first := e.runtime(t)
	sb := e.pod(t, first, "adopt")
	id, logPath := e.run(t, first, sb, "ticker", `i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.05; done`,
		func(c *runtime.ContainerConfig) { c.Labels["rayctl.test/owner"] = "first" })
	waitLog(t, logPath, "tick 1\n")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := e.runtime(t)
	cs, err := second.ListContainers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var found *runtime.ContainerStatus
	for _, c := range cs {
		if c.ID == id {
			found = c
		}
	}
	if found == nil || found.State != runtime.StateRunning || found.Labels["rayctl.test/owner"] != "first" || found.PodUID != sb.PodUID || found.LogPath != logPath {
		t.Fatalf("second runtime lists %+v", found)
	}
	// Its output keeps reaching the log through the new runtime.
	n := len(logLines(t, logPath))
	waitLog(t, logPath, fmt.Sprintf("tick %d\n", n+5))
	if err := second.StopContainer(testCtx(t), id, time.Second); err != nil {
		t.Fatal(err)
	}
	if s, _ := second.ContainerStatus(testCtx(t), id); s.State != runtime.StateExited {
		t.Errorf("after stop: %+v", s)
	}
}

// TestRemoveCutShortLeavesNoShim: a removal whose caller gives up half-way (rayctl stopping while the
// kubelet removes a deleted pod's container) must not leave the task's shim running with containerd
// no longer knowing of it, which no later removal or purge could find. Each container is removed with
// a context that ends after a different delay, then once more with one that does not end.
func TestRemoveCutShortLeavesNoShim(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "cutshort")
	var ids []string
	for i := range 8 {
		id, _ := e.run(t, r, sb, fmt.Sprintf("c%d", i), "exec sleep 1000")
		ids = append(ids, id)
	}
	for i, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*4*time.Millisecond)
		_ = r.RemoveContainer(ctx, id)
		cancel()
		if err := r.RemoveContainer(testCtx(t), id); err != nil {
			t.Errorf("removing %s again: %v", id, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for len(pidsWith("-id\x00"+id+"\x00")) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if pids := pidsWith("-id\x00" + id + "\x00"); len(pids) > 0 {
			t.Errorf("container %s is removed but its shim (pids %v) still runs", id, pids)
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func TestRemoveLeavesNothingBehind(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	ctx := testCtx(t)
	uid := "uid-" + randHex(6)
	sb, err := r.RunSandbox(ctx, runtime.SandboxConfig{PodUID: uid, Namespace: "default", Name: "gone", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	running, _ := e.run(t, r, sb, "running", `exec sleep 1000`)
	exited, _ := e.run(t, r, sb, "exited", `exit 0`)
	created, err := r.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "created", Image: e.ref, Command: []string{"true"}, LogPath: filepath.Join(sb.Config.Dir, "c.log")})
	if err != nil {
		t.Fatal(err)
	}
	waitExited(t, r, exited)
	for _, id := range []string{running, exited, created} {
		if err := r.RemoveContainer(ctx, id); err != nil {
			t.Fatalf("remove %s: %v", id, err)
		}
		if _, err := r.ContainerStatus(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("status of removed %s: %v", id, err)
		}
		if err := r.RemoveContainer(ctx, id); err != nil {
			t.Errorf("removing %s twice: %v", id, err)
		}
	}
	if err := r.RemoveSandbox(ctx, uid); err != nil {
		t.Fatal(err)
	}
	cctx := r.ctx(ctx)
	for _, id := range []string{running, exited, created} {
		if _, err := r.client.SnapshotService(r.snap).Stat(cctx, id); err == nil {
			t.Errorf("snapshot %s left behind", id)
		}
	}
	tasks, err := r.client.TaskService().List(cctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks.Tasks {
		for _, id := range []string{running, exited, created} {
			if tk.ID == id {
				t.Errorf("task %s left behind", id)
			}
		}
	}
	var snaps []string
	_ = r.client.SnapshotService(r.snap).Walk(cctx, func(_ context.Context, info snapshots.Info) error {
		snaps = append(snaps, info.Name)
		return nil
	})
	for _, s := range snaps {
		for _, id := range []string{running, exited, created} {
			if s == id {
				t.Errorf("snapshot %s left behind", s)
			}
		}
	}
	if _, err := os.Stat(e.net.NetNSPath(uid)); !os.IsNotExist(err) {
		t.Errorf("netns of the pod left behind: %v", err)
	}
	if entries, _ := os.ReadDir(e.daemon.FIFODir); len(entries) > 0 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		// Other tests' live containers may hold FIFOs; none may be named for ours.
		for _, n := range names {
			for _, id := range []string{running, exited, created} {
				if strings.Contains(n, id) {
					t.Errorf("FIFO dir %s left behind", n)
				}
			}
		}
	}
}

func TestImages(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	ctx := testCtx(t)
	imgs, err := r.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var img *runtime.Image
	for _, i := range imgs {
		if i.Ref == e.ref {
			img = i
		}
	}
	if img == nil || !strings.HasPrefix(img.ID, "sha256:") || len(img.Cmd) != 1 || img.Cmd[0] != "/bin/sh" || img.WorkingDir != "/" || len(img.Env) == 0 || img.Size == 0 {
		t.Fatalf("ListImages gave %+v", img)
	}
	for _, p := range []runtime.PullPolicy{runtime.PullNever, runtime.PullIfNotPresent, runtime.PullAlways} {
		got, err := r.EnsureImage(ctx, e.ref, p, nil)
		if err != nil || got.ID != img.ID {
			t.Errorf("EnsureImage(%s, %s) = %+v, %v", e.ref, p, got, err)
		}
	}
	if _, err := r.EnsureImage(ctx, "rayctl.local/absent:1", runtime.PullIfNotPresent, nil); err == nil || !strings.Contains(err.Error(), "rayctl image load") {
		t.Errorf("absent local image: %v", err)
	}
	if _, err := r.EnsureImage(ctx, "nosuch.invalid/app:1", runtime.PullNever, nil); !errors.Is(err, runtime.ErrImageNeverPull) {
		t.Errorf("policy Never: %v", err)
	}
	var progress []string
	_, err = r.EnsureImage(ctx, "nosuch.invalid/app:1", runtime.PullIfNotPresent, func(s string) { progress = append(progress, s) })
	if err == nil || !strings.Contains(err.Error(), "pulling image nosuch.invalid/app:1") || !strings.Contains(err.Error(), "nosuch.invalid") {
		t.Errorf("unreachable registry: %v", err)
	}
	t.Logf("pull error as the kubelet would show it: %v", err)
	if len(progress) == 0 {
		t.Errorf("no progress reported")
	}
	if v, err := r.Version(ctx); err != nil || !strings.HasPrefix(v, "containerd://") {
		t.Errorf("Version = %q, %v", v, err)
	}
}
