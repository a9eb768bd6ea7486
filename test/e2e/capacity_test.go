package e2e

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestNodeCapacity: a pod asking for more CPU than the machine has stays Pending, and its
// FailedScheduling event names --node-capacity; with `rayctl up --node-capacity cpu=64,memory=64Gi`
// the Node advertises that (start-up warns that it overcommits the machine) and the same pod runs.
// A capacity that does not parse is refused before anything starts.
func TestNodeCapacity(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	in, err := framework.Start("", "--controllers=none")
	if err != nil {
		t.Fatalf("rayctl up: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	ns := newNamespace(t, ctx, in)
	big := nodePod("big", corev1.RestartPolicyNever, 0, nodeSh("c", "echo fits"))
	big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("48")}
	_, err = in.Client.CoreV1().Pods(ns).Create(ctx, big, metav1.CreateOptions{})
	must(t, "creating a pod asking for 48 CPUs", err)
	events := nodeWaitEvents(t, ctx, in, ns, "big", "FailedScheduling")
	if msg := events[0].Message; !strings.Contains(msg, "Insufficient cpu") || !strings.Contains(msg, "rayctl up --node-capacity cpu=8,memory=16Gi advertises more") {
		t.Errorf("FailedScheduling says %q, want Insufficient cpu and the --node-capacity flag", msg)
	}
	must(t, "stopping", in.Stop())

	in.ExtraArgs = append(in.ExtraArgs, "--node-capacity", "cpu=eight")
	if err := in.Restart(); err == nil || !strings.Contains(err.Error(), "--node-capacity cpu=eight: quantities must match") {
		t.Errorf("rayctl up --node-capacity cpu=eight: %v, want a refusal naming it", err)
	}
	in.ExtraArgs = append(in.ExtraArgs, "--node-capacity", "cpu=64,memory=64Gi")
	must(t, "rayctl up --node-capacity cpu=64,memory=64Gi", in.Restart())
	if out := in.Output.String(); !strings.Contains(out, "warning: --node-capacity advertises more than this machine has: cpu 64 (the host has") {
		t.Errorf("start-up does not warn of the overcommit:\n%s", out)
	}
	framework.WaitFor(t, ctx, "the pod to succeed", func() (bool, error) {
		p, err := in.Client.CoreV1().Pods(ns).Get(ctx, "big", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("the pod failed: %s", nodePodSummary(p))
		}
		return err == nil && p.Status.Phase == corev1.PodSucceeded, err
	})
	nodes, err := in.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	must(t, "listing nodes", err)
	if c := nodes.Items[0].Status.Capacity[corev1.ResourceCPU]; c.Value() != 64 {
		t.Errorf("the Node's capacity cpu is %s, want 64", c.String())
	}
	if m := nodes.Items[0].Status.Allocatable[corev1.ResourceMemory]; m.Cmp(resource.MustParse("64Gi")) != 0 {
		t.Errorf("the Node's allocatable memory is %s, want 64Gi", m.String())
	}
}
