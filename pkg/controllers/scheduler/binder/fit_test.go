package binder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

func testNode(name string, labels map[string]string, taints []corev1.Taint, alloc ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	for i := 0; i+1 < len(alloc); i += 2 {
		n.Status.Allocatable[corev1.ResourceName(alloc[i])] = resource.MustParse(alloc[i+1])
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func pendingPod(name string, labels map[string]string, req ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}}}
	for i := 0; i+1 < len(req); i += 2 {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(req[i])] = resource.MustParse(req[i+1])
	}
	return p
}

// decide runs one placement of pod over nodes with the pods already placed, as reconciler.place does, and
// returns the node chosen or the FailedScheduling message.
func decide(pod *corev1.Pod, nodes []*corev1.Node, placed []placedPod) (string, string) {
	p := &placement{pod: pod, required: nodeaffinity.GetRequiredNodeAffinity(pod), nodeLabels: map[string]map[string]string{},
		others: placed, namespaceLabels: func(string) map[string]string { return nil }}
	list := make([]corev1.Node, len(nodes))
	for i, n := range nodes {
		p.nodeLabels[n.Name] = n.Labels
		list[i] = *n
	}
	node, reasons, unhelpful := p.choose(list, func(string) nodeUsage { return nodeUsage{} })
	if node == "" {
		return "", unschedulableMessage(len(nodes), reasons, unhelpful)
	}
	return node, ""
}

var gpuTaint = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}

// TestDecideGPU: a GPU pod that tolerates the GPU node's taint goes there; one that does not waits with
// kube-scheduler's message naming each node's reason.
func TestDecideGPU(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("cpu", nil, nil, "cpu", "4", "memory", "8Gi"),
		testNode("gpu1", nil, gpuTaint, "cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "1"),
		testNode("gpu2", nil, gpuTaint, "cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "1"),
	}
	pod := pendingPod("w", nil, "cpu", "1", "nvidia.com/gpu", "1")
	if got, msg := decide(pod, nodes, nil); got != "" {
		t.Fatalf("a toleration-less GPU pod went to %s", got)
	} else if want := "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint {nvidia.com/gpu: present}. " +
		"preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."; msg != want {
		t.Errorf("message\n got %q\nwant %q", msg, want)
	}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if got, _ := decide(pod, nodes, nil); got != "gpu1" && got != "gpu2" {
		t.Errorf("a tolerating GPU pod went to %q", got)
	}
	// A CPU pod tolerating nothing never lands on the tainted nodes.
	if got, _ := decide(pendingPod("cpu-pod", nil, "cpu", "1"), nodes, nil); got != "cpu" {
		t.Errorf("cpu pod went to %q", got)
	}
}

// TestDecidePreferences: PreferNoSchedule and preferred node affinity steer; they never refuse.
func TestDecidePreferences(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("a", map[string]string{"zone": "a"}, []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}, "cpu", "4"),
		testNode("b", map[string]string{"zone": "b"}, nil, "cpu", "4"),
	}
	if got, _ := decide(pendingPod("p", nil), nodes, nil); got != "b" {
		t.Errorf("PreferNoSchedule: went to %q, want b", got)
	}
	pod := pendingPod("p", nil)
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
	}}}}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}
	if got, _ := decide(pod, nodes, nil); got != "a" {
		t.Errorf("preferred affinity: went to %q, want a", got)
	}
	pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}}}}}}
	if _, msg := decide(pod, nodes, nil); msg != "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "+
		"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling." {
		t.Errorf("required affinity message %q", msg)
	}
}

// TestDecidePodAffinity: TPU hosts of one slice go together (affinity by a topology label) and apart
// (anti-affinity by hostname), and an existing pod's anti-affinity keeps others off its node.
func TestDecidePodAffinity(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("t1", map[string]string{"kubernetes.io/hostname": "t1", "slice": "s1"}, nil, "google.com/tpu", "4"),
		testNode("t2", map[string]string{"kubernetes.io/hostname": "t2", "slice": "s1"}, nil, "google.com/tpu", "4"),
		testNode("t3", map[string]string{"kubernetes.io/hostname": "t3", "slice": "s2"}, nil, "google.com/tpu", "4"),
	}
	group := map[string]string{"group": "tpu"}
	sel := &metav1.LabelSelector{MatchLabels: group}
	host := pendingPod("h", group, "google.com/tpu", "4")
	host.Spec.Affinity = &corev1.Affinity{
		PodAffinity:     &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: "slice"}}},
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: "kubernetes.io/hostname"}}},
	}
	placed := []placedPod{{node: "t3", namespace: "default", labels: group, affinity: host.Spec.Affinity}}
	// One host is on t3 (slice s2): the next must join its slice but not its node.
	if _, msg := decide(host, nodes, placed); msg != "0/3 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules, 2 node(s) didn't match pod affinity rules. "+
		"preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling." {
		t.Errorf("message %q", msg)
	}
	// With the first host on t1, the second goes to t2, the other node of slice s1.
	placed[0].node = "t1"
	if got, msg := decide(host, nodes, placed); got != "t2" {
		t.Errorf("second host went to %q (%s), want t2", got, msg)
	}
	// The first host of a group may go anywhere its topology key is.
	if got, msg := decide(host, nodes, nil); got == "" {
		t.Errorf("first host: %s", msg)
	}
	// A pod of another group is not kept off t1 by the host's anti-affinity.
	if got, _ := decide(pendingPod("other", nil), nodes[:1], placed); got != "t1" {
		t.Errorf("unrelated pod went to %q", got)
	}
}
