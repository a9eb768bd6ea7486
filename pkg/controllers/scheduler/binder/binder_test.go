package binder_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/scheduler/binder"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// schedulerName keeps these tests' pods apart from any scheduler rayctl up runs itself.
const schedulerName = "binder-test"

type env struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
	node   string
	inst   *framework.Instance
	// stopBinder stops the binder running now.
	stopBinder func()
}

func setup(t *testing.T) *env {
	inst, err := framework.Start("", framework.ControlPlaneOnly()...)
	ctrl.SetLogger(logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Cleanup(t) })
	e := &env{t: t, client: inst.Client, ns: "default", node: fmt.Sprintf("n-%d", os.Getpid()), inst: inst}
	e.stopBinder = e.startBinder()
	t.Cleanup(func() { e.stopBinder() })
	e.makeNode(map[string]string{"pool": "a"}, "2", "4Gi")
	return e
}

// startBinder runs a binder until the returned stop is called.
func (e *env) startBinder() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := binder.Options{SchedulerName: schedulerName}
	go func() { done <- ctrlset.RunStandalone(ctx, e.inst.Config, opts.Setup, ctrlset.Env{Name: binder.Name}) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("binder: %v", err)
		}
	}
}

// restartBinder stops the binder and starts another.
func (e *env) restartBinder() {
	e.stopBinder()
	e.stopBinder = e.startBinder()
}

func (e *env) makeNode(labels map[string]string, cpu, mem string) {
	ctx := context.Background()
	n, err := e.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.node, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.setCapacity(n, cpu, mem)
}

func (e *env) setCapacity(n *corev1.Node, cpu, mem string) {
	list := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110"),
	}
	n.Status.Capacity, n.Status.Allocatable = list, list
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := e.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createPod(name, cpu string, selector map[string]string) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			NodeSelector:  selector,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			}}},
		},
	}
	if _, err := e.client.CoreV1().Pods(e.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitPod polls the pod until cond holds.
func (e *env) waitPod(name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := e.client.CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("pod %s: %s: not within 30s (last: %+v, %v)", name, what, p.Status.Conditions, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scheduled(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func unschedulable(p *corev1.Pod) bool {
	c := scheduled(p)
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
}

func (e *env) hasEvent(pod, reason, message string) bool {
	list, err := e.client.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String(),
	})
	if err != nil {
		return false
	}
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == pod && ev.Reason == reason && strings.Contains(ev.Message, message) {
			return true
		}
	}
	return false
}

func (e *env) waitEvent(pod, reason, message string) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !e.hasEvent(pod, reason, message) {
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s event %q for %s", reason, message, pod)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestBinder(t *testing.T) {
	e := setup(t)
	ctx := context.Background()

	// A pod that fits is bound, with PodScheduled=True and a Scheduled event.
	e.createPod("fits", "500m", nil)
	p := e.waitPod("fits", "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName == e.node })
	if c := scheduled(p); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled = %+v", c)
	}
	e.waitEvent("fits", "Scheduled", "Successfully assigned default/fits to "+e.node)

	// A pod asking for 1000 cpus waits, Unschedulable, until the node grows.
	e.createPod("huge", "1000", nil)
	p = e.waitPod("huge", "unschedulable", unschedulable)
	nodes, _ := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	want := fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu. preemption: 0/%d nodes are available: %d No preemption victims found for incoming pod.",
		len(nodes.Items), len(nodes.Items), len(nodes.Items), len(nodes.Items))
	if got := scheduled(p).Message; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
		t.Errorf("phase %s node %q", p.Status.Phase, p.Spec.NodeName)
	}
	e.waitEvent("huge", "FailedScheduling", "Insufficient cpu")
	n, _ := e.client.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
	e.setCapacity(n, "2000", "4Gi")
	e.waitPod("huge", "bound after the node grew", func(p *corev1.Pod) bool { return p.Spec.NodeName == e.node })

	// Requests of pods already on the node count: 1000.5 of its 2000 cpus are taken now.
	e.createPod("squeezed", "1000", nil)
	e.waitPod("squeezed", "unschedulable while the node is full", unschedulable)
	zero := int64(0)
	if err := e.client.CoreV1().Pods(e.ns).Delete(ctx, "huge", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("squeezed", "bound once room was made", func(p *corev1.Pod) bool { return p.Spec.NodeName == e.node })

	// nodeSelector must match the node's labels.
	e.createPod("picky", "100m", map[string]string{"pool": "b"})
	p = e.waitPod("picky", "unschedulable by selector", unschedulable)
	if !strings.Contains(scheduled(p).Message, "node(s) didn't match Pod's node affinity/selector") {
		t.Errorf("message = %q", scheduled(p).Message)
	}
	n, _ = e.client.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
	n.Labels["pool"] = "b"
	if _, err := e.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("picky", "bound after relabelling", func(p *corev1.Pod) bool { return p.Spec.NodeName == e.node })
}

// A binder started anew counts the pods already bound (from its cache's first list), and a pod that
// finishes frees its room.
func TestBinderRestartAndFinish(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.createPod("first", "1500m", nil)
	first := e.waitPod("first", "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName == e.node })

	// The binder stops and another starts (as after its manager lost its lease): 1.5 of the node's 2
	// cpus are still taken.
	e.restartBinder()
	e.createPod("second", "1", nil)
	e.waitPod("second", "unschedulable while the first pod runs", unschedulable)

	// The first pod ends (its phase Succeeded, as the kubelet writes it): its cpu is free again.
	first.Status.Phase = corev1.PodSucceeded
	if _, err := e.client.CoreV1().Pods(e.ns).UpdateStatus(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("second", "bound once the first pod finished", func(p *corev1.Pod) bool { return p.Spec.NodeName == e.node })
}

func TestPodRequests(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}},
		Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
			{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}},
		},
	}}
	r := binder.PodRequests(p)
	if cpu := r[corev1.ResourceCPU]; cpu.MilliValue() != 3000 {
		t.Errorf("cpu = %s, want 3 (the init container's max beats the sum 1.5)", cpu.String())
	}
	if mem := r[corev1.ResourceMemory]; mem.Value() != 1<<30 {
		t.Errorf("memory = %s", mem.String())
	}
}

// TestBinderTopologySpread: pods with a DoNotSchedule topology spread constraint over a node label are
// placed alternately across its two values; with one domain's node cordoned, the pod that would skew
// the spread waits with kube-scheduler's message, and is placed once the node is back.
func TestBinderTopologySpread(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.node + "-b", Labels: map[string]string{"pool": "b"}}}
	other, err := e.client.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.setCapacity(other, "2", "4Gi")
	spread := func(name string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": "spread"}},
			Spec: corev1.PodSpec{
				SchedulerName: schedulerName,
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: "pool", WhenUnsatisfiable: corev1.DoNotSchedule,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
				}},
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				}}},
			},
		}
		if _, err := e.client.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	perNode := map[string]int{}
	for i := range 4 {
		name := fmt.Sprintf("spread-%d", i)
		spread(name)
		p := e.waitPod(name, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		perNode[p.Spec.NodeName]++
	}
	if perNode[e.node] != 2 || perNode[other.Name] != 2 {
		t.Errorf("4 spread pods placed %v, want 2 on each pool", perNode)
	}

	// Pool b's node cordoned: pool b still counts (2 pods), so one more fits on pool a, and the next waits.
	other, _ = e.client.CoreV1().Nodes().Get(ctx, other.Name, metav1.GetOptions{})
	other.Spec.Unschedulable = true
	if other, err = e.client.CoreV1().Nodes().Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	spread("spread-4")
	e.waitPod("spread-4", "bound to pool a", func(p *corev1.Pod) bool { return p.Spec.NodeName == e.node })
	spread("spread-5")
	p := e.waitPod("spread-5", "unschedulable", unschedulable)
	for _, want := range []string{"1 node(s) didn't match pod topology spread constraints, ", "1 node(s) were unschedulable",
		"preemption: ", "1 No preemption victims found for incoming pod"} {
		if !strings.Contains(scheduled(p).Message, want) {
			t.Errorf("message %q lacks %q", scheduled(p).Message, want)
		}
	}
	e.waitEvent("spread-5", "FailedScheduling", "node(s) didn't match pod topology spread constraints")
	other.Spec.Unschedulable = false
	if _, err := e.client.CoreV1().Nodes().Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("spread-5", "bound to pool b once it is back", func(p *corev1.Pod) bool { return p.Spec.NodeName == other.Name })
}
