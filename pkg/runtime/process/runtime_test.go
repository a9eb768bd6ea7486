package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/crilog"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/image"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/network/nettest"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fixture is a runtime with its own state dir and network (a bridge of its
// own as root, the host's network otherwise) and a fake raysim that prints
// its arguments.
type fixture struct {
	opts Options
	r    *Runtime
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// newFixtureWith is newFixture with options set by set (which may be nil).
func newFixtureWith(t *testing.T, set func(*Options)) *fixture {
	t.Helper()
	dir := t.TempDir()
	a, _ := rand.Int(rand.Reader, big.NewInt(50))
	b, _ := rand.Int(rand.Reader, big.NewInt(256))
	netCfg := network.Config{StateDir: filepath.Join(dir, "net"), Bridge: "rt" + randHex(5),
		CIDR: fmt.Sprintf("10.%d.%d.0/24", 200+a.Int64(), b.Int64()), HostOnly: os.Geteuid() != 0}
	nm, err := network.New(netCfg)
	if err != nil {
		t.Fatal(err)
	}
	ray := filepath.Join(dir, "fake-raysim")
	if err := os.WriteFile(ray, []byte("#!/bin/sh\necho \"raysim:$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{opts: Options{StateDir: filepath.Join(dir, "state"), Network: nm, RayBinary: ray}}
	if set != nil {
		set(&f.opts)
	}
	f.r = f.open(t)
	t.Cleanup(func() {
		r, err := New(context.Background(), f.opts)
		if err == nil {
			cs, _ := r.ListContainers(context.Background())
			for _, c := range cs {
				_ = r.RemoveContainer(context.Background(), c.ID)
			}
			r.Close()
		}
		_, _ = nm.Cleanup(nil)
		_ = nm.RemoveBridge()
	})
	return f
}

func (f *fixture) open(t *testing.T) *Runtime {
	t.Helper()
	r, err := New(context.Background(), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (f *fixture) pod(t *testing.T, name string) *runtime.Sandbox {
	t.Helper()
	sb, err := f.r.RunSandbox(testCtx(t), runtime.SandboxConfig{PodUID: "uid-" + randHex(6), Namespace: "default", Name: name, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func (f *fixture) run(t *testing.T, r *Runtime, sb *runtime.Sandbox, cfg runtime.ContainerConfig) (string, string) {
	t.Helper()
	if cfg.Image == "" {
		cfg.Image = "docker.io/library/busybox:latest"
	}
	if cfg.LogPath == "" {
		cfg.LogPath = filepath.Join(sb.Config.Dir, cfg.Name, "0.log")
	}
	id, err := r.CreateContainer(testCtx(t), sb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	return id, cfg.LogPath
}

func sh(name, script string) runtime.ContainerConfig {
	return runtime.ContainerConfig{Name: name, Command: []string{"/bin/sh", "-c", script}}
}

func waitExited(t *testing.T, r *Runtime, id string) *runtime.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := r.ContainerStatus(testCtx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == runtime.StateExited {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still %s", id, s.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitLog(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("log %s never showed %q:\n%s", path, want, b)
}

func logLines(t *testing.T, path string) []string {
	t.Helper()
	b, _ := os.ReadFile(path)
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

func TestExitCodeLogsEnvAndWorkingDir(t *testing.T) {
	f := newFixture(t)
	sb := f.pod(t, "echo")
	work := t.TempDir()
	cfg := sh("echo", `echo "foo=$FOO"; pwd; echo oops >&2; exit 3`)
	cfg.Env = []runtime.EnvVar{{Name: "FOO", Value: "bar"}}
	cfg.WorkingDir = work
	cfg.Labels = map[string]string{"k": "v"}
	id, logPath := f.run(t, f.r, sb, cfg)
	s := waitExited(t, f.r, id)
	if s.ExitCode != 3 || s.Reason != "Error" || s.StartedAt.IsZero() || s.FinishedAt.Before(s.StartedAt) || s.Labels["k"] != "v" || s.PodUID != sb.PodUID {
		t.Errorf("status %+v", s)
	}
	waitLog(t, logPath, "oops")
	got := strings.Join(logLines(t, logPath), "|")
	for _, want := range []string{"stdout foo=bar", "stdout " + work, "stderr oops"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	ok, _ := f.run(t, f.r, sb, sh("ok", "true"))
	if s := waitExited(t, f.r, ok); s.ExitCode != 0 || s.Reason != "Completed" {
		t.Errorf("true: %+v", s)
	}
	if _, err := f.r.CreateContainer(testCtx(t), sb, runtime.ContainerConfig{Name: "nope", Image: "x", Command: []string{"/no/such/program-" + randHex(3)}, LogPath: filepath.Join(t.TempDir(), "l")}); err == nil {
		t.Error("a missing program was accepted")
	}
}

func TestStopWithGrace(t *testing.T) {
	f := newFixture(t)
	sb := f.pod(t, "stop")
	polite, politeLog := f.run(t, f.r, sb, sh("polite", `trap 'echo got TERM; exit 0' TERM; echo ready; while true; do sleep 0.05; done`))
	stubborn, stubbornLog := f.run(t, f.r, sb, sh("stubborn", `trap '' TERM; echo ready; while true; do sleep 0.05; done`))
	plain, plainLog := f.run(t, f.r, sb, sh("plain", `echo ready; exec sleep 1000`))
	for _, l := range []string{politeLog, stubbornLog, plainLog} {
		waitLog(t, l, "ready")
	}
	ctx := testCtx(t)
	if err := f.r.StopContainer(ctx, polite, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.r.ContainerStatus(ctx, polite); s.State != runtime.StateExited || s.ExitCode != 0 {
		t.Errorf("polite: %+v", s)
	}
	waitLog(t, politeLog, "got TERM")
	if err := f.r.StopContainer(ctx, stubborn, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.r.ContainerStatus(ctx, stubborn); s.ExitCode != 137 {
		t.Errorf("stubborn: %+v", s)
	}
	if err := f.r.StopContainer(ctx, plain, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.r.ContainerStatus(ctx, plain); s.ExitCode != 143 {
		t.Errorf("plain: %+v", s)
	}
	if err := f.r.StopContainer(ctx, plain, time.Second); err != nil {
		t.Errorf("stopping twice: %v", err)
	}
}

func TestRayRunsAsRaysim(t *testing.T) {
	f := newFixture(t)
	sb := f.pod(t, "ray")
	direct, directLog := f.run(t, f.r, sb, runtime.ContainerConfig{Name: "direct", Image: "rayctl.local/raysim:dev", Command: []string{"ray", "start", "--head"}})
	shell, shellLog := f.run(t, f.r, sb, runtime.ContainerConfig{Name: "shell", Image: "rayctl.local/raysim:dev", Command: []string{"/bin/bash", "-c", "ray status --address x"}})
	waitExited(t, f.r, direct)
	waitExited(t, f.r, shell)
	waitLog(t, directLog, "stdout F raysim:start --head")
	waitLog(t, shellLog, "stdout F raysim:status --address x")
	// The fixture's runtime has no host Ray: raysim stands in for Ray's images, and says so.
	id, logPath := f.run(t, f.r, sb, runtime.ContainerConfig{Name: "real", Image: "rayproject/ray:2.9.0", Command: []string{"ray", "start"}})
	s := waitExited(t, f.r, id)
	if !strings.Contains(s.Message, "raysim") {
		t.Errorf("no warning that raysim stands in for Ray: %+v", s)
	}
	waitLog(t, logPath, "raysim:start")
}

func TestImportAndListImages(t *testing.T) {
	f := newFixture(t)
	var buf bytes.Buffer
	ref, err := image.BuildSimImage(&buf, image.SimImageOptions{RayBinary: image.DefaultBusyboxPaths[0], Ref: "rayctl.local/raysim:test"})
	if err != nil {
		t.Skipf("cannot build an image here: %v", err)
	}
	names, err := f.r.ImportImage(testCtx(t), &buf)
	if err != nil || len(names) != 1 || names[0] != ref {
		t.Fatalf("ImportImage = %v, %v", names, err)
	}
	if _, err := f.r.EnsureImage(testCtx(t), "busybox", runtime.PullAlways, nil); err != nil {
		t.Fatal(err)
	}
	imgs, err := f.r.ListImages(testCtx(t))
	if err != nil || len(imgs) != 2 {
		t.Fatalf("ListImages = %+v, %v", imgs, err)
	}
	var sim *runtime.Image
	for _, i := range imgs {
		if i.Ref == ref {
			sim = i
		}
	}
	if sim == nil || !strings.HasPrefix(sim.ID, "sha256:") || len(sim.Cmd) != 1 || sim.Cmd[0] != "/bin/sh" || sim.WorkingDir != "/" || len(sim.Env) == 0 {
		t.Errorf("imported image %+v", sim)
	}
	if _, err := f.r.ImportImage(testCtx(t), strings.NewReader("not a tar")); err == nil {
		t.Error("garbage imported")
	}
}

func TestANewRuntimeReadoptsRunningProcesses(t *testing.T) {
	f := newFixture(t)
	sb := f.pod(t, "adopt")
	cfg := sh("ticker", `i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.05; done`)
	cfg.Labels = map[string]string{"owner": "first"}
	id, logPath := f.run(t, f.r, sb, cfg)
	waitLog(t, logPath, "tick 1\n")
	if err := f.r.Close(); err != nil {
		t.Fatal(err)
	}
	second := f.open(t)
	cs, err := second.ListContainers(testCtx(t))
	if err != nil || len(cs) != 1 || cs[0].ID != id || cs[0].State != runtime.StateRunning || cs[0].Labels["owner"] != "first" {
		t.Fatalf("second runtime lists %+v, %v", cs, err)
	}
	n := len(logLines(t, logPath))
	waitLog(t, logPath, fmt.Sprintf("tick %d\n", n+5))
	if err := second.StopContainer(testCtx(t), id, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if s, _ := second.ContainerStatus(testCtx(t), id); s.State != runtime.StateExited {
		t.Errorf("after stop: %+v", s)
	}
	if err := second.RemoveContainer(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	if cs, _ := second.ListContainers(testCtx(t)); len(cs) != 0 {
		t.Errorf("after remove: %+v", cs)
	}
}

func TestAProcessThatDiedUnwatchedIsReportedExited(t *testing.T) {
	f := newFixture(t)
	sb := f.pod(t, "gone")
	id, _ := f.run(t, f.r, sb, sh("gone", `exec sleep 1000`))
	s, _ := f.r.ContainerStatus(testCtx(t), id)
	rec, err := f.r.load(id)
	if err != nil {
		t.Fatal(err)
	}
	// Once its record no longer matches, no runtime kills it: the test does.
	t.Cleanup(func() { _ = syscall.Kill(rec.Pid, syscall.SIGKILL) })
	// Simulate a rayctl that crashed: its record says running, the pid is someone else's now.
	if err := f.r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.r.update(id, func(rec *record) { rec.StartTicks++ }); err != nil {
		t.Fatal(err)
	}
	second := f.open(t)
	got, err := second.ContainerStatus(testCtx(t), id)
	if err != nil || got.State != runtime.StateExited || got.ExitCode == 0 || got.Message == "" {
		t.Fatalf("status after a pid reuse: %+v %v (was %+v)", got, err, s)
	}
}

func TestPodsGetTheirOwnIPsAndMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pod network namespaces need root")
	}
	f := newFixture(t)
	if !f.r.Isolated() {
		t.Fatal("root on Linux should isolate")
	}
	a, b := f.pod(t, "alpha"), f.pod(t, "beta")
	if a.IP == b.IP {
		t.Fatalf("both pods have %s", a.IP)
	}
	// The same port in both pods, each answering with its hostname.
	script := `echo ready; while true; do echo "hello from $(hostname)" | busybox nc -l -p 9000; done`
	ida, la := f.run(t, f.r, a, sh("server", script))
	_, lb := f.run(t, f.r, b, sh("server", script))
	waitLog(t, la, "ready")
	waitLog(t, lb, "ready")
	for _, pod := range []*runtime.Sandbox{a, b} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			line, err := nettest.ReadLine(f.opts.Network.DialContext, net.JoinHostPort(pod.IP, "9000"))
			if err == nil && line == "hello from "+pod.Config.Name {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s at %s: %q %v", pod.Config.Name, pod.IP, line, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Exec runs in the pod: its hostname, its /etc/hosts, its network.
	var out bytes.Buffer
	code, err := f.r.Exec(testCtx(t), ida, []string{"sh", "-c", "hostname; grep -c " + a.IP + " /etc/hosts; exit 4"}, runtime.ExecIO{Stdout: &out})
	if err != nil || code != 4 || out.String() != "alpha\n1\n" {
		t.Errorf("exec: %d %q %v", code, out.String(), err)
	}
	// A mount's ContainerPath shows the host dir inside, and only inside.
	src, dst := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "data.txt"), []byte("mounted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := sh("reader", "cat "+dst+"/data.txt")
	cfg.Mounts = []runtime.Mount{{HostPath: src, ContainerPath: dst, ReadOnly: true}}
	id, logPath := f.run(t, f.r, a, cfg)
	if s := waitExited(t, f.r, id); s.ExitCode != 0 {
		t.Errorf("reader: %+v", s)
	}
	waitLog(t, logPath, "stdout F mounted")
	if _, err := os.Stat(filepath.Join(dst, "data.txt")); !os.IsNotExist(err) {
		t.Errorf("the bind mount leaked to the host: %v", err)
	}
}

func TestImageNotesSayWhichRayRuns(t *testing.T) {
	host := &hostray.Ray{Path: "/opt/ray/bin/ray", BinDir: "/opt/ray/bin", Version: "2.60.0"}
	for _, tc := range []struct {
		ref     string
		host    *hostray.Ray
		reasons []string
		warn    []bool
	}{
		{"rayproject/ray:2.60.0", host, []string{"HostRay"}, []bool{false}},
		{"rayproject/ray:2.46.0-py310-gpu", host, []string{"HostRay", "RayVersionMismatch"}, []bool{false, true}},
		{"docker.io/rayproject/ray:latest", host, []string{"HostRay"}, []bool{false}},
		{"rayproject/ray:2.60.0", nil, []string{"RaySim"}, []bool{true}},
		{"rayctl.local/raysim:latest", host, []string{"RaySim"}, []bool{false}},
		{"busybox:1.36", host, nil, nil},
	} {
		r := &Runtime{hostRay: tc.host}
		notes := r.imageNotes(tc.ref)
		var reasons []string
		var warn []bool
		for _, n := range notes {
			reasons, warn = append(reasons, n.Reason), append(warn, n.Warning)
		}
		if !slices.Equal(reasons, tc.reasons) || !slices.Equal(warn, tc.warn) {
			t.Errorf("%s (host Ray %v): notes %+v, want reasons %v warnings %v", tc.ref, tc.host != nil, notes, tc.reasons, tc.warn)
		}
	}
}
