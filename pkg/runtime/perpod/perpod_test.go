package perpod

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/process"
)

// newFakes is a Runtime over the process runtime (on the host's network, with a stand-in for raysim)
// and, in containerd's place, the fake runtime.
func newFakes(t *testing.T) *Runtime {
	t.Helper()
	dir := t.TempDir()
	nm, err := network.New(network.Config{StateDir: filepath.Join(dir, "net"), HostOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ray := filepath.Join(dir, "fake-raysim")
	if err := os.WriteFile(ray, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pr, err := process.New(context.Background(), process.Options{StateDir: filepath.Join(dir, "process"), Network: nm, RayBinary: ray})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Sibling{Handler: "process", Runtime: pr, Runs: "Ray's images"},
		Sibling{Handler: "containerd", Runtime: fake.New(fake.Options{}), Runs: "images"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs, _ := pr.ListContainers(context.Background())
		for _, c := range cs {
			_ = pr.StopContainer(context.Background(), c.ID, 0)
			_ = pr.RemoveContainer(context.Background(), c.ID)
		}
		r.Close()
	})
	return r
}

// TestRoute is the rule a pod's runtime is chosen by: its RuntimeClass's handler when it has one, else
// Ray's images on the process runtime and every other image (raysim's included) on containerd.
func TestRoute(t *testing.T) {
	r := newFakes(t)
	for _, tc := range []struct {
		name, class string
		images      []string
		want, err   string
	}{
		{name: "a Ray head", images: []string{"rayproject/ray:2.60.0"}, want: "process"},
		{name: "ray-ml", images: []string{"docker.io/rayproject/ray-ml:2.9.0-gpu"}, want: "process"},
		{name: "the lightweight submitter", images: []string{"quay.io/kuberay/submitter:v1.7.0"}, want: "containerd"},
		{name: "redis", images: []string{"redis:7.4.0"}, want: "containerd"},
		{name: "raysim's image", images: []string{"rayctl.local/raysim:latest"}, want: "containerd"},
		{name: "Ray with a sidecar", images: []string{"busybox:1.36", "rayproject/ray:2.60.0", "fluent/fluent-bit:3"}, want: "process"},
		{name: "no images", want: "containerd"},
		{name: "class process", class: "process", images: []string{"redis:7.4.0"}, want: "process"},
		{name: "class containerd", class: "containerd", images: []string{"rayproject/ray:2.60.0"}, want: "containerd"},
		{name: "unknown class", class: "gvisor", images: []string{"redis:7.4.0"},
			err: `unknown runtime handler "gvisor": this node's runtime handlers are "containerd" (images) and "process" (Ray's images)`},
	} {
		got, err := r.Route(runtime.SandboxConfig{RuntimeHandler: tc.class, Images: tc.images})
		switch {
		case tc.err != "":
			if err == nil || !errors.Is(err, ErrUnknownHandler) || err.Error() != tc.err {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got.Handler != tc.want:
			t.Errorf("%s: runs on %s, want %s", tc.name, got.Handler, tc.want)
		}
	}
}

// TestCallsReachTheOwner: containers are made, listed, stopped and removed on the sibling that holds
// their pod, the status names it, a pod of an unknown handler gets no sandbox, and a new Runtime over
// the same siblings finds each pod's owner again from its sandbox's label.
func TestCallsReachTheOwner(t *testing.T) {
	ctx := context.Background()
	r := newFakes(t)
	if _, err := r.RunSandbox(ctx, runtime.SandboxConfig{PodUID: "bad", RuntimeHandler: "kata"}); !errors.Is(err, ErrUnknownHandler) {
		t.Fatalf("unknown class: %v", err)
	}
	pods := map[string]string{"head": "rayproject/ray:2.60.0", "submitter": "rayctl.local/raysim:latest"}
	ids := map[string]string{}
	for uid, img := range pods {
		sb, err := r.RunSandbox(ctx, runtime.SandboxConfig{PodUID: uid, Name: uid, Namespace: "default", Dir: t.TempDir(), Images: []string{img}, Labels: map[string]string{"x": "y"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.EnsureImage(runtime.WithPod(ctx, uid), img, runtime.PullIfNotPresent, nil); err != nil {
			t.Fatal(err)
		}
		id, err := r.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "c", Image: img, Command: []string{"ray", "start"},
			LogPath: filepath.Join(sb.Config.Dir, "c.log"), Labels: map[string]string{"io.kubernetes.pod.uid": uid}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids[uid] = id
	}
	want := map[string]string{"head": "process", "submitter": "containerd"}
	for uid, id := range ids {
		st, err := r.ContainerStatus(ctx, id)
		if err != nil || st.Runtime != want[uid] {
			t.Errorf("%s: status %+v, %v; want runtime %s", uid, st, err, want[uid])
		}
		sib := r.byHandler(want[uid])
		if _, err := sib.Runtime.ContainerStatus(ctx, id); err != nil {
			t.Errorf("%s: not on %s: %v", uid, want[uid], err)
		}
	}
	list, err := r.ListContainers(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListContainers: %d, %v", len(list), err)
	}

	// A restarted rayctl: the same siblings, a new router.
	again, err := New(r.ray, r.images)
	if err != nil {
		t.Fatal(err)
	}
	sbs, err := again.ListSandboxes(ctx)
	if err != nil || len(sbs) != 2 {
		t.Fatalf("ListSandboxes: %d, %v", len(sbs), err)
	}
	for _, sb := range sbs {
		if sb.Labels[LabelRuntime] != want[sb.PodUID] || sb.Labels["x"] != "y" {
			t.Errorf("sandbox %s labels %v", sb.PodUID, sb.Labels)
		}
	}
	imgs, err := again.ListImages(runtime.WithPod(ctx, "submitter"))
	if err != nil || len(imgs) != 1 || imgs[0].Ref != pods["submitter"] {
		t.Errorf("the submitter's images: %v, %v", imgs, err)
	}
	for uid, id := range ids {
		if err := again.StopContainer(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
		if err := again.RemoveContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := again.RemoveSandbox(ctx, uid); err != nil {
			t.Fatal(err)
		}
		if _, err := r.byHandler(want[uid]).Runtime.ContainerStatus(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("%s: container still on %s: %v", uid, want[uid], err)
		}
	}
	if v, err := again.Version(ctx); err != nil || !strings.Contains(v, "fake://") || !strings.Contains(v, "process://") || again.Name() != "containerd+process" {
		t.Errorf("name %s version %s %v", again.Name(), v, err)
	}
}

// TestSandboxesOfOneRuntimeAreAdopted: pods left by a rayctl that ran the process runtime alone (their
// sandboxes carry no LabelRuntime) stay on it: their next containers go there too.
func TestSandboxesOfOneRuntimeAreAdopted(t *testing.T) {
	ctx := context.Background()
	r := newFakes(t)
	pr := r.ray.Runtime
	sb, err := pr.RunSandbox(ctx, runtime.SandboxConfig{PodUID: "old", Name: "old", Namespace: "default", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pr.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "c", Image: "redis:7.4.0", Command: []string{"/bin/true"},
		LogPath: filepath.Join(sb.Config.Dir, "c.log")}); err != nil {
		t.Fatal(err)
	}
	again, err := New(r.ray, r.images)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.ListSandboxes(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := again.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: "d", Image: "redis:7.4.0", Attempt: 1, Command: []string{"/bin/true"},
		LogPath: filepath.Join(sb.Config.Dir, "d.log")})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := again.ContainerStatus(ctx, id); err != nil || st.Runtime != "process" {
		t.Errorf("the old pod's new container: %+v %v, want it on the process runtime", st, err)
	}
}
