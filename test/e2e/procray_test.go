package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// rayHeadPod is one real Ray head (light: no dashboard, 1 CPU, a 100 MB object store) with a 3 GiB limit.
const rayHeadPod = `apiVersion: v1
kind: Pod
metadata:
  name: head
spec:
  containers:
  - name: ray-head
    image: rayproject/ray:2.60.0
    command: ["ray", "start", "--head", "--block", "--num-cpus=1", "--include-dashboard=false", "--object-store-memory=100000000"]
    resources:
      limits:
        memory: 3Gi
`

// rayStopPod runs `ray stop`, as KubeRay's preStop hooks do, and shows whether rayctl's environment leaked in.
const rayStopPod = `apiVersion: v1
kind: Pod
metadata:
  name: stopper
spec:
  restartPolicy: Never
  containers:
  - name: stopper
    image: rayproject/ray:2.60.0
    command: ["/bin/sh", "-c", "ray stop --force; echo leak=${RAY_LEAK:-none} stats=$RAY_USAGE_STATS_ENABLED"]
`

// TestRayStopInOnePodLeavesAnotherPodsRay runs a real Ray head in a pod on the process runtime, then
// `ray stop` in a second pod: it finds no Ray process, the head keeps running with its raylet, and
// neither pod sees rayctl's own environment (RAY_LEAK) while Ray's images get Ray's quiet defaults.
// The head's memory limit is its cgroup's, where Ray reads it.
func TestRayStopInOnePodLeavesAnotherPodsRay(t *testing.T) {
	hostRay(t)
	t.Setenv("RAY_LEAK", "1") // inherited by rayctl up
	in := framework.StartTest(t, "--runtime", "process", "--controllers=none")
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	ns := in.NewNamespace(t, ctx, "procray")
	t.Cleanup(func() { deleteNamespaceAndWait(t, in, ns, nil) })

	kubectl(t, ctx, in, ns, rayHeadPod, "apply", "-f", "-")
	framework.WaitFor(t, ctx, "the Ray head to start", func() (bool, error) {
		out, _, err := in.Kubectl(ctx, "", "-n", ns, "logs", "head")
		return err == nil && strings.Contains(out, "Ray runtime started"), nil
	})
	if got := strings.TrimSpace(kubectl(t, ctx, in, ns, "", "exec", "head", "--", "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes")); got != "3221225472" {
		t.Errorf("the head's memory limit inside is %q, want 3Gi", got)
	}

	kubectl(t, ctx, in, ns, rayStopPod, "apply", "-f", "-")
	framework.WaitFor(t, ctx, "ray stop to end", func() (bool, error) {
		out, _, err := in.Kubectl(ctx, "", "-n", ns, "get", "pod", "stopper", "-o", "jsonpath={.status.phase}")
		return err == nil && (out == "Succeeded" || out == "Failed"), nil
	})
	logs := kubectl(t, ctx, in, ns, "", "logs", "stopper")
	for _, want := range []string{"Did not find any active Ray processes", "leak=none stats=0"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the stopper's log lacks %q:\n%s", want, logs)
		}
	}
	if out := kubectl(t, ctx, in, ns, "", "get", "pod", "head", "-o", "jsonpath={.status.phase} {.status.containerStatuses[0].restartCount}"); out != "Running 0" {
		t.Errorf("the head after another pod's ray stop: %q", out)
	}
	kubectl(t, ctx, in, ns, "", "exec", "head", "--", "pgrep", "raylet")
}
