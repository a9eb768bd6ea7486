package binder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// spreadPod is a pod of app=spread with one topology spread constraint over key.
func spreadPod(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction) *corev1.Pod {
	p := pendingPod("s", map[string]string{"app": "spread"}, "cpu", "100m")
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
	}}
	return p
}

// placedOn is n pods of app=spread counted against node.
func placedOn(node string, n int) []placedPod {
	out := make([]placedPod, n)
	for i := range out {
		out[i] = placedPod{node: node, namespace: "default", labels: map[string]string{"app": "spread"}}
	}
	return out
}

// TestDecideSpreadDoNotSchedule: a DoNotSchedule constraint keeps a zone within maxSkew of the zone with
// the fewest matching pods, with kube-scheduler's reasons for the nodes it refuses.
func TestDecideSpreadDoNotSchedule(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("a1", map[string]string{"zone": "a"}, nil, "cpu", "4"),
		testNode("a2", map[string]string{"zone": "a"}, nil, "cpu", "4"),
		testNode("b1", map[string]string{"zone": "b"}, nil, "cpu", "4"),
	}
	pod := spreadPod("zone", 1, corev1.DoNotSchedule)
	placed := placedOn("a1", 2)
	if got, msg := decide(pod, nodes, placed); got != "b1" {
		t.Errorf("with 2 pods in zone a and none in b, the pod went to %q (%s), want b1", got, msg)
	}
	// Pods of another namespace or other labels do not count.
	other := append(placedOn("b1", 3), placedPod{node: "b1", namespace: "default", labels: map[string]string{"app": "other"}})
	for i := range other[:3] {
		other[i].namespace = "elsewhere"
	}
	if got, _ := decide(pod, nodes, append(placed, other...)); got != "b1" {
		t.Errorf("pods of another namespace or app counted: went to %q, want b1", got)
	}
	// Zone b's only node tainted: zone b still counts (nodeTaintsPolicy Ignore), so zone a is full.
	nodes[2] = testNode("b1", map[string]string{"zone": "b"}, gpuTaint, "cpu", "4")
	want := "0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, 2 node(s) didn't match pod topology spread constraints. " +
		"preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
	if got, msg := decide(pod, nodes, placed); got != "" || msg != want {
		t.Errorf("went to %q with message\n %q\nwant\n %q", got, msg, want)
	}
	// nodeTaintsPolicy Honor leaves zone b out: zone a is the only domain, and the pod goes there.
	pod.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
	if got, msg := decide(pod, nodes, placed); got != "a1" && got != "a2" {
		t.Errorf("nodeTaintsPolicy Honor: went to %q (%s), want zone a", got, msg)
	}
	// minDomains 2 with one domain counted: the fewest is 0, so 2 pods there already are too many.
	pod.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](2)
	if got, _ := decide(pod, nodes, placed); got != "" {
		t.Errorf("minDomains 2: went to %q, want nowhere", got)
	}
	// A node without the topology key cannot take the pod, and no preemption would change that.
	nodes = []*corev1.Node{testNode("bare", nil, nil, "cpu", "4")}
	want = "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label). " +
		"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
	if _, msg := decide(spreadPod("zone", 1, corev1.DoNotSchedule), nodes, nil); msg != want {
		t.Errorf("message\n %q\nwant\n %q", msg, want)
	}
}

// TestDecideSpreadScheduleAnyway: a ScheduleAnyway constraint steers towards the node with fewer
// matching pods and refuses nothing, a node without its key included.
func TestDecideSpreadScheduleAnyway(t *testing.T) {
	host := func(name string) map[string]string { return map[string]string{corev1.LabelHostname: name} }
	nodes := []*corev1.Node{
		testNode("n1", host("n1"), nil, "cpu", "4"),
		testNode("n2", host("n2"), nil, "cpu", "4"),
	}
	pod := spreadPod(corev1.LabelHostname, 1, corev1.ScheduleAnyway)
	if got, _ := decide(pod, nodes, placedOn("n1", 3)); got != "n2" {
		t.Errorf("went to %q, want n2 (no matching pods)", got)
	}
	if got, _ := decide(pod, nodes, placedOn("n2", 3)); got != "n1" {
		t.Errorf("went to %q, want n1 (no matching pods)", got)
	}
	// Only a node without the key: it still takes the pod.
	if got, msg := decide(pod, []*corev1.Node{testNode("bare", nil, nil, "cpu", "4")}, nil); got != "bare" {
		t.Errorf("went to %q (%s), want bare", got, msg)
	}
}
