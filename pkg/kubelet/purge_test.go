package kubelet_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rayctl/rayctl/pkg/kubelet"
	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
)

// TestPurge: every pod the runtime or the pods dir knows is removed, containers, sandbox and directory.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	rt := fake.New(fake.Options{Images: []string{"img"}})
	podsDir := t.TempDir()
	sb, err := rt.RunSandbox(ctx, runtime.SandboxConfig{PodUID: "pod-a", Namespace: "default", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c1", "c2"} {
		id, err := rt.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: name, Image: "img"})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// A pod the runtime no longer knows, with a volume and a log left behind.
	for _, d := range []string{"pod-a/volumes/cache", "pod-b/volumes/data", "pod-b/logs"} {
		if err := os.MkdirAll(filepath.Join(podsDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := kubelet.Purge(ctx, rt, podsDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := (kubelet.Purged{Containers: 2, Sandboxes: 1, PodDirs: 2}); got != want {
		t.Errorf("Purge = %+v, want %+v", got, want)
	}
	cs, _ := rt.ListContainers(ctx)
	sbs, _ := rt.ListSandboxes(ctx)
	left, _ := os.ReadDir(podsDir)
	if len(cs)+len(sbs)+len(left) != 0 {
		t.Errorf("left: %d containers, %d sandboxes, %d pod dirs", len(cs), len(sbs), len(left))
	}
}
