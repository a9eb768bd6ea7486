package e2e

// Several nodes on one machine (rayctl up --node, --node-labels, --node-taints): GPU and TPU worker
// groups scheduled as kube-scheduler would, onto nodes that advertise the accelerators, and kept off
// nodes whose taints they do not tolerate with kube-scheduler's message.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// The nodes of TestSeveralNodes besides the first: a GPU node tainted as GKE taints its GPU nodes, and
// two TPU hosts of one v4 slice, labelled as GKE labels them (what KubeRay's TPU samples select on).
var severalNodesArgs = []string{
	"--ray=sim", "--node-capacity", "cpu=16,memory=64Gi",
	"--node", "gpu1:cpu=4,memory=16Gi,nvidia.com/gpu=1",
	"--node-taints", "gpu1:nvidia.com/gpu=present:NoSchedule",
	"--node-labels", "gpu1:cloud.google.com/gke-accelerator=nvidia-tesla-t4",
	"--node", "tpu-a:cpu=4,memory=64Gi,google.com/tpu=4",
	"--node", "tpu-b:cpu=4,memory=64Gi,google.com/tpu=4",
	"--node-labels", "tpu-a:cloud.google.com/gke-tpu-accelerator=tpu-v4-podslice,cloud.google.com/gke-tpu-topology=2x2x2",
	"--node-labels", "tpu-b:cloud.google.com/gke-tpu-accelerator=tpu-v4-podslice,cloud.google.com/gke-tpu-topology=2x2x2",
}

// TestSeveralNodes runs a four-node rayctl (raysim standing in for Ray's images) and checks each node is
// its own Node, and that GPU, TPU and toleration-less pods are placed as kube-scheduler places them.
func TestSeveralNodes(t *testing.T) {
	t.Parallel()
	in, err := framework.Start("", severalNodesArgs...)
	if err != nil {
		t.Fatalf("rayctl up with four nodes: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	for _, tc := range []struct {
		name string
		test func(t *testing.T, e *rayEnv)
	}{
		{"Nodes", testNodesRegistered},
		{"GPUWorkerGroup", testGPUWorkerGroup},
		{"UntoleratedTaint", testUntoleratedTaint},
		{"TPUMultiHost", testTPUMultiHost},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, raySetup(t, in)) })
	}
}

// Each node is a Node with its own Lease, labels, taints and capacity, extended resources included.
func testNodesRegistered(t *testing.T, e *rayEnv) {
	gpu1, err := e.in.Client.CoreV1().Nodes().Get(e.ctx, "gpu1", metav1.GetOptions{})
	must(t, "reading Node gpu1", err)
	if q := gpu1.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 1 {
		t.Errorf("gpu1 allocatable nvidia.com/gpu = %s, want 1", q.String())
	}
	if len(gpu1.Spec.Taints) != 1 || gpu1.Spec.Taints[0].Key != "nvidia.com/gpu" || gpu1.Spec.Taints[0].Value != "present" ||
		gpu1.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("gpu1 taints = %+v", gpu1.Spec.Taints)
	}
	if gpu1.Labels["cloud.google.com/gke-accelerator"] != "nvidia-tesla-t4" || gpu1.Labels["kubernetes.io/hostname"] != "gpu1" {
		t.Errorf("gpu1 labels = %v", gpu1.Labels)
	}
	for _, a := range gpu1.Status.Addresses {
		if a.Type == corev1.NodeHostName && a.Address != "gpu1" {
			t.Errorf("gpu1's Hostname address is %q", a.Address)
		}
	}
	for _, name := range []string{"gpu1", "tpu-a", "tpu-b"} {
		l, err := e.in.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(e.ctx, name, metav1.GetOptions{})
		must(t, "reading the Lease of node "+name, err)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != name {
			t.Errorf("Lease %s held by %v", name, l.Spec.HolderIdentity)
		}
	}
	nodes, err := e.in.Client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{})
	must(t, "listing nodes", err)
	if len(nodes.Items) != 4 {
		t.Errorf("%d nodes, want 4", len(nodes.Items))
	}
}

// gpuCluster is KubeRay's GPU sample's shape: a CPU head and a worker group asking for one
// nvidia.com/gpu, tolerating the GPU nodes' taint.
func gpuCluster(name, image string) *rayv1.RayCluster {
	c := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Spec.HeadGroupSpec = rayv1.HeadGroupSpec{RayStartParams: map[string]string{}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "ray-head", Image: image, Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}},
	}}}
	c.Spec.WorkerGroupSpecs = []rayv1.WorkerGroupSpec{{
		GroupName: "gpu-group", Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1),
		RayStartParams: map[string]string{},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{Name: "ray-worker", Image: image, Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
					"nvidia.com/gpu": resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
					"nvidia.com/gpu": resource.MustParse("1")},
			}}},
		}},
	}}
	return c
}

// (GPUWorkerGroup) The GPU worker lands on gpu1 and its head does not (it tolerates nothing); Ray is
// started with one GPU, the pod is told it has device 0 and warned that the machine has none, and
// kubectl shows the pod as gpu1's.
func testGPUWorkerGroup(t *testing.T, e *rayEnv) {
	e.createCluster(t, gpuCluster("gpu", "rayproject/ray:2.60.0"))
	_, head, workers := e.waitClusterReady(t, "gpu", 1)
	w := workers[0]
	if w.Spec.NodeName != "gpu1" {
		t.Errorf("the GPU worker runs on %q, want gpu1", w.Spec.NodeName)
	}
	if head.Spec.NodeName == "gpu1" {
		t.Errorf("the head, tolerating nothing, runs on the tainted gpu1")
	}
	if cmd := strings.Join(append(w.Spec.Containers[0].Command, w.Spec.Containers[0].Args...), " "); !strings.Contains(cmd, "--num-gpus=1") {
		t.Errorf("the worker's ray start lacks --num-gpus=1: %s", cmd)
	}
	wantEvent(t, e, w.Name, "DeviceNotPresent", "node gpu1 advertises nvidia.com/gpu 0, which this machine does not have", "CUDA_VISIBLE_DEVICES=0")

	out, stderr, err := e.in.Kubectl(e.ctx, "", "get", "pods", "-n", e.ns, "-o", "wide")
	must(t, "kubectl get pods -o wide: "+stderr, err)
	if !lineWith(out, w.Name, " gpu1 ") {
		t.Errorf("kubectl get pods -o wide does not show %s on gpu1:\n%s", w.Name, out)
	}
	out, stderr, err = e.in.Kubectl(e.ctx, "", "describe", "node", "gpu1")
	must(t, "kubectl describe node gpu1: "+stderr, err)
	if !strings.Contains(out, w.Name) || !lineWith(out, "nvidia.com/gpu", " 1 ", " 1") {
		t.Errorf("kubectl describe node gpu1 does not show %s holding its GPU:\n%s", w.Name, out)
	}
}

// lineWith reports whether a line of out contains each of parts.
func lineWith(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line+" ", p)
		}
		if all {
			return true
		}
	}
	return false
}

// wantEvent waits for an event of reason about pod whose message contains each of parts.
func wantEvent(t *testing.T, e *rayEnv, pod, reason string, parts ...string) {
	t.Helper()
	e.waitFor(t, rayTimeout, reason+" event for "+pod, func(ctx context.Context) (bool, string, error) {
		list, err := e.in.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String()})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range list.Items {
			seen = append(seen, ev.Reason+": "+ev.Message)
			if ev.Reason != reason {
				continue
			}
			all := true
			for _, p := range parts {
				all = all && strings.Contains(ev.Message, p)
			}
			if all {
				return true, "", nil
			}
		}
		return false, strings.Join(seen, "\n"), nil
	})
}

// (UntoleratedTaint) A pod asking for a GPU without tolerating the GPU node's taint stays Pending,
// with kube-scheduler's message naming each node's reason.
func testUntoleratedTaint(t *testing.T, e *rayEnv) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "no-toleration"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "rayproject/ray:2.60.0", Command: []string{"sleep", "60"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
	}}
	_, err := e.in.Client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{})
	must(t, "creating a GPU pod without tolerations", err)
	want := "0/4 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, 3 Insufficient nvidia.com/gpu. " +
		"preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod."
	var got string
	e.waitFor(t, rayTimeout, "the pod marked unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := e.in.Client.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				got = c.Message
				return p.Spec.NodeName == "", fmt.Sprintf("node %q", p.Spec.NodeName), nil
			}
		}
		return false, fmt.Sprintf("phase %s node %q conditions %+v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions), nil
	})
	if got != want {
		t.Errorf("PodScheduled says\n %q\nwant\n %q", got, want)
	}
	wantEvent(t, e, pod.Name, "FailedScheduling", want)
}

// (TPUMultiHost) KubeRay's ray-cluster.tpu-v4-multihost.yaml, unchanged: its worker group of one replica
// of two hosts, each asking for 4 google.com/tpu and selecting the v4 podslice's labels, lands one host
// on each TPU node, and the head (selecting nothing, asking for 8 CPUs) on the first node; each host's
// Ray gets its TPUs as the TPU resource and its pod the chips' indices.
func testTPUMultiHost(t *testing.T, e *rayEnv) {
	e.applySample(t, "ray-cluster.tpu-v4-multihost.yaml")
	_, head, workers := e.waitClusterReady(t, "raycluster-tpu-v4-multihost", 2)
	on := map[string]bool{}
	for _, w := range workers {
		n, err := e.in.Client.CoreV1().Nodes().Get(e.ctx, w.Spec.NodeName, metav1.GetOptions{})
		must(t, "reading node "+w.Spec.NodeName, err)
		if n.Labels["cloud.google.com/gke-tpu-accelerator"] != "tpu-v4-podslice" || n.Labels["cloud.google.com/gke-tpu-topology"] != "2x2x2" {
			t.Errorf("TPU host %s runs on %s, labelled %v", w.Name, n.Name, n.Labels)
		}
		on[w.Spec.NodeName] = true
	}
	if len(on) != 2 {
		t.Errorf("the two TPU hosts share a node: %s", podsState(workers))
	}
	if strings.HasPrefix(head.Spec.NodeName, "tpu-") || head.Spec.NodeName == "gpu1" {
		t.Errorf("the head runs on %s", head.Spec.NodeName)
	}
	wantEvent(t, e, workers[0].Name, "DeviceNotPresent", "google.com/tpu 0", "TPU_VISIBLE_CHIPS=0,1,2,3")
	if cmd := strings.Join(append(workers[0].Spec.Containers[0].Command, workers[0].Spec.Containers[0].Args...), " "); !strings.Contains(cmd, `--resources='{"TPU":4}'`) {
		t.Errorf("the TPU host's ray start does not give Ray its 4 TPUs, as KubeRay does: %s", cmd)
	}
}

// TestSeveralNodesRealRayGPU: KubeRay's GPU sample shape on real Ray, on a two-node rayctl whose second
// node advertises one GPU (this machine has none): the worker lands there, Ray counts one GPU, and a
// num_gpus=1 task is scheduled in the worker's pod, seeing GPU 0 as on a GPU node.
func TestSeveralNodesRealRayGPU(t *testing.T) {
	t.Parallel()
	hostRay(t)
	in, err := framework.Start("", "--runtime", "process",
		"--node", "gpu1:cpu=2,memory=8Gi,nvidia.com/gpu=1", "--node-taints", "gpu1:nvidia.com/gpu=present:NoSchedule")
	if err != nil {
		t.Fatalf("rayctl up with a GPU node: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	realRaySlots <- struct{}{}
	t.Cleanup(func() { <-realRaySlots })
	e := newRayEnv(t, in)
	e.createCluster(t, gpuCluster("gpu", "rayproject/ray:2.60.0"))
	_, head, workers := e.waitClusterReadyWithin(t, "gpu", 1, realRayTimeout)
	w := workers[0]
	if w.Spec.NodeName != "gpu1" {
		t.Fatalf("the GPU worker runs on %q, want gpu1", w.Spec.NodeName)
	}
	script := `import os, socket, ray
ray.init()
@ray.remote(num_gpus=1)
def gpu_task():
    return ray.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"), socket.gethostname()
ids, visible, host = ray.get(gpu_task.remote())
print("cluster GPUs:", ray.cluster_resources().get("GPU"))
print("gpu ids:", [int(i) for i in ids])
print("CUDA_VISIBLE_DEVICES:", visible)
print("ran on", host)`
	out := e.headExec(t, head, "python", "-c", script)
	for _, want := range []string{"cluster GPUs: 1.0", "gpu ids: [0]", "CUDA_VISIBLE_DEVICES: 0", "ran on " + w.Name} {
		if !strings.Contains(out, want) {
			t.Errorf("the num_gpus=1 task's driver lacks %q:\n%s", want, out)
		}
	}
}

// TestSimulatedNodes: with the first node tainted, the sample RayCluster's pods are placed on simulated
// nodes and go Running and Ready there without a process; the nodes are labelled simulated. Nodes a
// restart no longer serves are removed with their pods.
func TestSimulatedNodes(t *testing.T) {
	t.Parallel()
	in, err := framework.Start("", "--node-name", "real", "--node-taints", "real:only=real:NoSchedule", "--simulated-nodes", "3:cpu=8,memory=16Gi")
	if err != nil {
		t.Fatalf("rayctl up --simulated-nodes 3: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	e := newRayEnv(t, in)
	e.createCluster(t, sampleCluster(t, "sim"))
	_, head, workers := e.waitClusterReady(t, "sim", 1)
	for _, p := range append([]corev1.Pod{*head}, workers...) {
		n, err := e.in.Client.CoreV1().Nodes().Get(e.ctx, p.Spec.NodeName, metav1.GetOptions{})
		must(t, "reading node "+p.Spec.NodeName, err)
		if !strings.HasPrefix(n.Name, "sim-") || n.Labels["rayctl.io/simulated"] != "true" {
			t.Errorf("pod %s runs on %s (labels %v), want a simulated node", p.Name, n.Name, n.Labels)
		}
	}
	if line := startupLine(in, "kubelet"); !strings.Contains(line, "3 simulated (sim-001…sim-003, no processes)") {
		t.Errorf("rayctl up's kubelet line does not name the simulated nodes: %q", line)
	}

	// Started again with one simulated node, rayctl removes the two it no longer serves and their pods
	// (as the pod garbage collector does for a node that is gone); the cluster comes back on sim-001.
	must(t, "stopping", in.Stop())
	in.ExtraArgs = append(in.ExtraArgs, "--simulated-nodes", "1:cpu=8,memory=16Gi")
	must(t, "rayctl up --simulated-nodes 1", in.Restart())
	for _, gone := range []string{"sim-002", "sim-003"} {
		if !strings.Contains(in.Output.String(), "removed node "+gone+" (no longer given)") {
			t.Errorf("rayctl up does not say it removed %s:\n%s", gone, in.Output.String())
		}
	}
	e.waitFor(t, rayTimeout, "the cluster's pods back, all on sim-001", func(ctx context.Context) (bool, string, error) {
		pods, err := e.clusterPods(ctx, "sim", "")
		if err != nil {
			return false, "", err
		}
		for _, p := range pods {
			if p.Spec.NodeName != "sim-001" || !runningReady(&p) {
				return false, fmt.Sprintf("%s on %q", podsState(pods), p.Spec.NodeName), nil
			}
		}
		return len(pods) == 2, podsState(pods), nil
	})
	nodes, err := e.in.Client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{})
	must(t, "listing nodes", err)
	if len(nodes.Items) != 2 {
		t.Errorf("%d nodes after the restart, want real and sim-001", len(nodes.Items))
	}
}
