package selector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/containerd"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/network"
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
