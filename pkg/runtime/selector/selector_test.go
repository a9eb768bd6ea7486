package selector

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/containerd"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/image"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/perpod"
)

func testOpts(t *testing.T) Options {
	dir := t.TempDir()
	return Options{DataDir: dir, SystemSocket: filepath.Join(dir, "no-such.sock"),
		Network: network.Config{Bridge: "rs" + randHex(5), CIDR: "10.250.7.0/24"}}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func closeChoice(t *testing.T, c *Choice) {
	t.Cleanup(func() {
		if c.Network != nil {
			_ = c.Network.RemoveBridge()
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
}

func TestAutoStartsAPrivateContainerdWhenInstalled(t *testing.T) {
	if !containerd.Available() || os.Geteuid() != 0 {
		t.Skip("needs containerd and root")
	}
	opts := testOpts(t)
	c, err := Select(ctx(t), Auto, opts)
	if err != nil {
		t.Fatal(err)
	}
	closeChoice(t, c)
	if c.Name != "containerd" || !strings.Contains(c.Reason, "private, started in") || c.Runtime.Name() != "containerd" {
		t.Fatalf("auto chose %s: %s", c.Name, c.Reason)
	}
	t.Logf("auto: %s", c.Reason)
	if _, err := os.Stat(filepath.Join(opts.DataDir, "containerd", "config.toml")); err != nil {
		t.Errorf("private containerd not under the data dir: %v", err)
	}
}

func TestAutoPrefersAnAnsweringSocket(t *testing.T) {
	if !containerd.Available() || os.Geteuid() != 0 {
		t.Skip("needs containerd and root")
	}
	d, err := containerd.StartPrivate(ctx(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	opts := testOpts(t)
	opts.SystemSocket = d.Address
	c, err := Select(ctx(t), Auto, opts)
	if err != nil {
		t.Fatal(err)
	}
	closeChoice(t, c)
	if c.Name != "containerd" || !strings.Contains(c.Reason, "existing socket "+d.Address) {
		t.Fatalf("auto chose %s: %s", c.Name, c.Reason)
	}
	if _, err := os.Stat(filepath.Join(opts.DataDir, "containerd")); !os.IsNotExist(err) {
		t.Errorf("a private containerd was started anyway")
	}
}

func TestAutoFallsBackToProcessWithoutContainerd(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	c, err := Select(ctx(t), Auto, testOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	closeChoice(t, c)
	if c.Name != "process" || !strings.Contains(c.Reason, "no containerd binary on PATH") {
		t.Fatalf("auto chose %s: %s", c.Name, c.Reason)
	}
	t.Logf("auto: %s", c.Reason)
	if _, err := Select(ctx(t), Containerd, testOpts(t)); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("containerd asked for without one: %v", err)
	}
}

type fakeRuntime struct{ runtime.Runtime }

func (fakeRuntime) Close() error { return nil }

func TestFakeAndUnknownNames(t *testing.T) {
	opts := testOpts(t)
	if _, err := Select(ctx(t), Fake, opts); err == nil {
		t.Error("fake without a constructor was accepted")
	}
	opts.NewFake = func() (runtime.Runtime, error) { return fakeRuntime{}, nil }
	c, err := Select(ctx(t), Fake, opts)
	if err != nil || c.Name != "fake" {
		t.Fatalf("fake: %+v %v", c, err)
	}
	opts.NewFake = func() (runtime.Runtime, error) { return nil, errors.New("boom") }
	if _, err := Select(ctx(t), Fake, opts); err == nil {
		t.Error("a failing constructor's error was lost")
	}
	if _, err := Select(ctx(t), "docker", opts); err == nil || !strings.Contains(err.Error(), "unknown runtime") {
		t.Errorf("unknown name: %v", err)
	}
	c, err = Select(ctx(t), Process, testOpts(t))
	if err != nil || c.Name != "process" || !strings.Contains(c.Reason, "asked for") {
		t.Fatalf("process: %+v %v", c, err)
	}
	closeChoice(t, c)
}

// TestPlan is the rule for --runtime and --ray together: the host's Ray takes the process runtime under
// auto (so KubeRay's samples run real Ray without a registry), containerd runs the images themselves,
// and a pair that contradicts itself is refused saying what to ask for.
func TestPlan(t *testing.T) {
	ray := &hostray.Ray{Path: "/venv/bin/ray", Version: "2.60.0"}
	for _, tc := range []struct {
		runtime, ray string
		found        *hostray.Ray
		want         RayPlan
		err          string
	}{
		{runtime: Auto, ray: RayAuto, found: ray, want: RayPlan{Runtime: Process, Ray: RayHost, HostRay: ray, Why: "the host's Ray runs Ray's images; containerd would pull them (--ray=image)"}},
		{runtime: Auto, ray: RayAuto, want: RayPlan{Runtime: Auto, Ray: RayImage}},
		{runtime: Process, ray: RayAuto, want: RayPlan{Runtime: Process, Ray: RaySim}},
		{runtime: Process, ray: RayAuto, found: ray, want: RayPlan{Runtime: Process, Ray: RayHost, HostRay: ray}},
		{runtime: Containerd, ray: RayAuto, found: ray, want: RayPlan{Runtime: Containerd, Ray: RayImage}},
		{runtime: Auto, ray: RayHost, found: ray, want: RayPlan{Runtime: Process, Ray: RayHost, HostRay: ray, Why: "--ray=host"}},
		{runtime: Auto, ray: RayHost, err: "no Ray found"},
		{runtime: Containerd, ray: RayHost, found: ray, err: "--runtime=containerd runs the images themselves (--ray=image)"},
		{runtime: Auto, ray: RaySim, found: ray, want: RayPlan{Runtime: Process, Ray: RaySim, Why: "--ray=sim"}},
		{runtime: Containerd, ray: RaySim, err: "(--ray=image)"},
		{runtime: Auto, ray: RayImage, found: ray, want: RayPlan{Runtime: Containerd, Ray: RayImage}},
		{runtime: Process, ray: RayImage, err: "--ray=image needs containerd"},
		{runtime: Fake, ray: RayAuto, found: ray, want: RayPlan{Runtime: Fake, Ray: RayImage}},
		{runtime: PerPod, ray: RayAuto, found: ray, want: RayPlan{Runtime: PerPod, Ray: RayHost, HostRay: ray}},
		{runtime: PerPod, ray: RayAuto, want: RayPlan{Runtime: PerPod, Ray: RaySim}},
		{runtime: Auto, ray: "hots", err: `--ray="hots": want auto, host, image or sim`},
	} {
		got, err := Plan(tc.runtime, tc.ray, tc.found)
		name := "--runtime=" + tc.runtime + " --ray=" + tc.ray
		if tc.found != nil {
			name += " (Ray found)"
		}
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

// TestContainerdPlatform: containerd is refused off Linux with a message naming the platform (on darwin
// --runtime=containerd fails with it, and auto takes the process runtime giving it as the reason).
func TestContainerdPlatform(t *testing.T) {
	if err := containerdPlatform("linux"); err != nil {
		t.Errorf("linux: %v", err)
	}
	for _, goos := range []string{"darwin", "freebsd"} {
		if err := containerdPlatform(goos); err == nil || !strings.Contains(err.Error(), "Linux only, not on "+goos) {
			t.Errorf("%s: %v, want an error naming %s", goos, err, goos)
		}
	}
}

// TestPerPodRunsEachPodOnItsRuntime: with the process runtime running Ray's images (here raysim, as
// --ray=sim asks) and containerd installed, auto runs each pod on one of the two, on one pod network:
// a pod of another image in a container, a pod of Ray's image as host processes, and the second reaches
// the first at its pod IP. The preloaded image goes into both.
func TestPerPodRunsEachPodOnItsRuntime(t *testing.T) {
	if !containerd.Available() || os.Geteuid() != 0 {
		t.Skip("needs containerd and root")
	}
	opts := testOpts(t)
	opts.Ray = RaySim
	c, err := Select(ctx(t), Auto, opts)
	if err != nil {
		t.Fatal(err)
	}
	closeChoice(t, c)
	if c.Name != PerPod || c.Ray != RaySim || !strings.Contains(c.Reason, "containerd") || !strings.Contains(c.Reason, "for every other image") {
		t.Fatalf("auto chose %s (ray %s): %s", c.Name, c.Ray, c.Reason)
	}
	t.Logf("auto: %s", c.Reason)
	rt := c.Runtime
	var buf bytes.Buffer
	ref, err := image.BuildSimImage(&buf, image.SimImageOptions{RayBinary: image.DefaultBusyboxPaths[0], Ref: "rayctl.local/raysim:t" + randHex(4)})
	if err != nil {
		t.Fatal(err)
	}
	if names, err := rt.ImportImage(ctx(t), &buf); err != nil || len(names) != 1 || names[0] != ref {
		t.Fatalf("ImportImage = %v, %v", names, err)
	}
	for _, s := range rt.(*perpod.Runtime).Siblings() {
		imgs, err := s.Runtime.ListImages(ctx(t))
		if err != nil || !slices.ContainsFunc(imgs, func(i *runtime.Image) bool { return i.Ref == ref }) {
			t.Errorf("%s does not hold %s: %v", s.Handler, ref, err)
		}
	}

	run := func(name, img, script string) (*runtime.Sandbox, string) {
		uid := "uid-" + randHex(6)
		sb, err := rt.RunSandbox(ctx(t), runtime.SandboxConfig{PodUID: uid, Namespace: "default", Name: name, Dir: t.TempDir(), Images: []string{img},
			Labels: map[string]string{"io.kubernetes.pod.uid": uid}})
		if err != nil {
			t.Fatal(err)
		}
		pctx := runtime.WithPod(ctx(t), uid)
		if _, err := rt.EnsureImage(pctx, img, runtime.PullIfNotPresent, nil); err != nil {
			t.Fatal(err)
		}
		id, err := rt.CreateContainer(pctx, sb, runtime.ContainerConfig{Name: name, Image: img, Command: []string{"/bin/sh", "-c", script},
			LogPath: filepath.Join(sb.Config.Dir, name+".log"), Labels: map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = rt.StopContainer(context.Background(), id, 0)
			_ = rt.RemoveContainer(context.Background(), id)
			_ = rt.RemoveSandbox(context.Background(), uid)
		})
		if err := rt.StartContainer(pctx, id); err != nil {
			t.Fatal(err)
		}
		return sb, id
	}
	server, serverID := run("server", ref, "mkdir -p /tmp/w && echo served-by-containerd > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w")
	_, clientID := run("client", "rayproject/ray:2.60.0",
		"until /bin/busybox wget -qO- http://"+server.IP+":8080/; do sleep 0.1; done")
	st := waitExited(t, rt, clientID)
	if st.ExitCode != 0 || st.Runtime != Process {
		t.Errorf("client: %+v", st)
	}
	if b, err := os.ReadFile(st.LogPath); err != nil || !strings.Contains(string(b), "served-by-containerd") {
		t.Errorf("the process pod did not reach the containerd pod at %s: %s %v", server.IP, b, err)
	}
	if st, err := rt.ContainerStatus(ctx(t), serverID); err != nil || st.Runtime != Containerd || st.State != runtime.StateRunning {
		t.Errorf("server: %+v %v", st, err)
	}
	if _, err := c.Runtime.(*perpod.Runtime).Siblings()[0].Runtime.ContainerStatus(ctx(t), serverID); err != nil {
		t.Errorf("containerd does not hold the server: %v", err)
	}
}

func waitExited(t *testing.T, rt runtime.Runtime, id string) *runtime.ContainerStatus {
	t.Helper()
	for {
		st, err := rt.ContainerStatus(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == runtime.StateExited {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAutoWithoutContainerdSaysWhatRunsOtherImages: where the process runtime runs Ray's images and
// containerd cannot run, auto takes the process runtime alone, saying why no other image runs, and a pod
// of another image fails naming what to install.
func TestAutoWithoutContainerdSaysWhatRunsOtherImages(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	opts := testOpts(t)
	opts.Ray = RaySim
	c, err := Select(ctx(t), Auto, opts)
	if err != nil {
		t.Fatal(err)
	}
	closeChoice(t, c)
	const why = "no other image runs: no containerd binary on PATH (apt-get install containerd runc)"
	if c.Name != Process || !strings.Contains(c.Reason, why) {
		t.Fatalf("auto chose %s: %s", c.Name, c.Reason)
	}
	// (KubeRay's light-weight submitter image is no example: the process runtime runs its /submitter as
	// rayctl's own.)
	sb, err := c.Runtime.RunSandbox(ctx(t), runtime.SandboxConfig{PodUID: "uid-" + randHex(6), Namespace: "default", Name: "web", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Runtime.RemoveSandbox(context.Background(), sb.PodUID) })
	id, err := c.Runtime.CreateContainer(ctx(t), sb, runtime.ContainerConfig{Name: "c", Image: "docker.io/library/nginx:1.27",
		Command: []string{"/docker-entrypoint.sh"}, LogPath: filepath.Join(sb.Config.Dir, "c.log")})
	if err == nil {
		t.Cleanup(func() { _ = c.Runtime.RemoveContainer(context.Background(), id) })
		err = c.Runtime.StartContainer(ctx(t), id)
	}
	const want = "/docker-entrypoint.sh: not found on this host (the process runtime runs host programs; other images run on containerd, not used here: no containerd binary on PATH (apt-get install containerd runc))"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a pod of another image: %v, want %q", err, want)
	}
}
