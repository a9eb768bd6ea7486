package e2e

import (
	"os"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestRayClusterWithWorkersReadyOnFakeRuntime: on `rayctl up --runtime fake` (what the scale benchmark
// runs on) a RayCluster with workers becomes ready — the workers' wait-gcs-ready init container ends as
// an init container does, and the workers go Running and Ready after it.
func TestRayClusterWithWorkersReadyOnFakeRuntime(t *testing.T) {
	t.Parallel()
	in, err := framework.Start("", "--runtime", "fake")
	if err != nil {
		t.Fatalf("rayctl up --runtime fake: %v", err)
	}
	t.Cleanup(func() { in.Stop(); os.RemoveAll(in.DataDir) })
	e := newRayEnv(t, in)
	c := sampleCluster(t, "fake")
	c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3)
	e.createCluster(t, c)
	_, _, workers := e.waitClusterReady(t, "fake", 3)
	for _, w := range workers {
		if cs := w.Status.InitContainerStatuses; len(cs) != 1 || cs[0].Name != "wait-gcs-ready" || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
			t.Errorf("worker %s: init containers %+v, want wait-gcs-ready terminated with exit code 0", w.Name, cs)
		}
	}
}
