package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
)

// realRayFixture is an isolated fixture whose Ray images run the Ray of
// `make ray` (the repository's _output/ray venv).
func realRayFixture(t *testing.T) (*fixture, *Runtime) {
	t.Helper()
	if testing.Short() {
		t.Skip("a real Ray head is heavy")
	}
	f := isolatedFixture(t)
	bin, _ := filepath.Abs("../../../_output/ray/bin/ray")
	ray, err := hostray.Find(testCtx(t), []string{bin}, false, "")
	if err != nil {
		t.Skipf("no Ray from `make ray`: %v", err)
	}
	f.opts.HostRay = ray
	return f, f.open(t)
}

// waitLogFor is waitLog for slow starters.
func waitLogFor(t *testing.T, path, want string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
			return
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("log %s never showed %q:\n%s", path, want, b)
}

// One Ray head only: a second pod runs `ray stop`, as KubeRay's preStop
// hooks do, and must find none of the head's processes.
func TestRayStopInOnePodLeavesAnotherPodsRay(t *testing.T) {
	f, r := realRayFixture(t)
	head := f.pod(t, "head")
	cfg := runtime.ContainerConfig{Name: "ray-head", Image: "rayproject/ray:2.60.0",
		Command:   []string{"ray", "start", "--head", "--block", "--num-cpus=1", "--include-dashboard=false", "--object-store-memory=100000000"},
		Resources: runtime.Resources{MemoryBytes: 3 << 30}}
	hid, hlog := f.run(t, r, head, cfg)
	waitLogFor(t, hlog, "Ray runtime started", 3*time.Minute)
	if out, code := execOut(t, r, hid, "pgrep -c raylet"); code != 0 {
		t.Fatalf("no raylet in the head's pod: %s", out)
	}
	if _, err := os.Lstat(filepath.Join(head.Config.Dir, "rt", "ray-head", "tmp", "ray", "session_latest")); err != nil {
		t.Errorf("the head's session is not in its private /tmp: %v", err)
	}

	other := f.pod(t, "other")
	sid, slog := f.run(t, r, other, runtime.ContainerConfig{Name: "stopper", Image: "rayproject/ray:2.60.0",
		Command: []string{"/bin/sh", "-c", "ray stop --force; echo stopped"}})
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		s, err := r.ContainerStatus(testCtx(t), sid)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == runtime.StateExited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ray stop never ended")
		}
	}
	waitLog(t, slog, "stdout F stopped")
	if b, _ := os.ReadFile(slog); !strings.Contains(string(b), "Did not find any active Ray processes") {
		t.Errorf("ray stop in another pod saw Ray processes:\n%s", b)
	}
	if s, _ := r.ContainerStatus(testCtx(t), hid); s.State != runtime.StateRunning {
		t.Fatalf("the head: %+v", s)
	}
	if out, code := execOut(t, r, hid, "pgrep -c raylet"); code != 0 {
		t.Errorf("the head's raylet is gone after another pod's ray stop: %s", out)
	}
}
