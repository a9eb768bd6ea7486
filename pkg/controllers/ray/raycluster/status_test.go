package raycluster

import (
	"errors"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// podsOf returns the head and n workers of c, Running and Ready (unless ready is false), with IPs.
func podsOf(c *rayv1.RayCluster, n int, ready bool) []corev1.Pod {
	status := func(ip string) corev1.PodStatus {
		cond := corev1.ConditionTrue
		if !ready {
			cond = corev1.ConditionFalse
		}
		return corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}}
	}
	head := HeadPod(c, BuildOptions{})
	head.Name = "demo-head-abcde"
	head.Status = status("10.0.0.1")
	pods := []corev1.Pod{*head}
	for i := range n {
		w := WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{})
		w.Name = w.GenerateName + string(rune('a'+i))
		w.Status = status("10.0.0.2")
		pods = append(pods, *w)
	}
	return pods
}

func headSvc(c *rayv1.RayCluster) *corev1.Service {
	svc := HeadService(c)
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].TargetPort = intstr.FromInt32(svc.Spec.Ports[i].Port)
	}
	return svc
}

func TestStatusReady(t *testing.T) {
	c := sampleCluster()
	s, err := computeStatus(c, observed{Pods: podsOf(c, 2, true), HeadService: headSvc(c)}, now)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != rayv1.Ready || s.ReadyWorkerReplicas != 2 || s.AvailableWorkerReplicas != 2 || s.DesiredWorkerReplicas != 2 ||
		s.MinWorkerReplicas != 1 || s.MaxWorkerReplicas != 5 || s.ObservedGeneration != 1 {
		t.Errorf("status: %+v", s)
	}
	if s.Head.PodName != "demo-head-abcde" || s.Head.PodIP != "10.0.0.1" || s.Head.ServiceIP != "10.0.0.1" || s.Head.ServiceName != "demo-head-svc" {
		t.Errorf("head: %+v", s.Head)
	}
	if s.Endpoints["dashboard"] != "8265" || s.Endpoints["gcs-server"] != "6379" || s.Endpoints["client"] != "10001" || s.Endpoints["metrics"] != "8080" {
		t.Errorf("endpoints: %v", s.Endpoints)
	}
	// head + 2 workers, each 500m / 1Gi requested.
	if s.DesiredCPU.String() != "1500m" || s.DesiredMemory.String() != "3Gi" || !s.DesiredGPU.IsZero() {
		t.Errorf("desired resources: cpu %s mem %s gpu %s", s.DesiredCPU.String(), s.DesiredMemory.String(), s.DesiredGPU.String())
	}
	for typ, want := range map[rayv1.RayClusterConditionType]metav1.ConditionStatus{
		rayv1.HeadPodReady: metav1.ConditionTrue, rayv1.RayClusterProvisioned: metav1.ConditionTrue,
		rayv1.RayClusterSuspended: metav1.ConditionFalse, rayv1.RayClusterSuspending: metav1.ConditionFalse,
	} {
		if got := meta.FindStatusCondition(s.Conditions, string(typ)); got == nil || got.Status != want {
			t.Errorf("condition %s: %+v", typ, got)
		}
	}
	if meta.FindStatusCondition(s.Conditions, string(rayv1.HeadPodReady)).Reason != rayv1.HeadPodRunningAndReady {
		t.Error("HeadPodReady reason")
	}
	if s.StateTransitionTimes[rayv1.Ready] == nil || !s.LastUpdateTime.Time.Equal(now) {
		t.Errorf("times: %+v %v", s.StateTransitionTimes, s.LastUpdateTime)
	}
}

func TestStatusNotReady(t *testing.T) {
	c := sampleCluster()
	for name, pods := range map[string][]corev1.Pod{
		"a pod Ready=False": podsOf(c, 2, false),
		"a worker missing":  podsOf(c, 1, true),
		"a pod pending": func() []corev1.Pod {
			p := podsOf(c, 2, true)
			p[2].Status = corev1.PodStatus{Phase: corev1.PodPending}
			return p
		}(),
		"no pods": nil,
	} {
		s, err := computeStatus(c, observed{Pods: pods, HeadService: headSvc(c)}, now)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == rayv1.Ready {
			t.Errorf("%s: state ready", name)
		}
		// KubeRay's Provisioned only asks that the Pods there are run, not that all exist yet.
		if name != "a worker missing" && meta.IsStatusConditionTrue(s.Conditions, string(rayv1.RayClusterProvisioned)) {
			t.Errorf("%s: provisioned", name)
		}
	}

	// A Running pod with no Ready condition yet does not block readiness (KubeRay's rule).
	pods := podsOf(c, 2, true)
	pods[1].Status.Conditions = nil
	s, _ := computeStatus(c, observed{Pods: pods}, now)
	if s.State != rayv1.Ready || s.ReadyWorkerReplicas != 1 || s.AvailableWorkerReplicas != 2 {
		t.Errorf("no Ready condition: state %q ready %d available %d", s.State, s.ReadyWorkerReplicas, s.AvailableWorkerReplicas)
	}

	// A reconcile error keeps it from becoming ready and, for a Pod failure, sets ReplicaFailure.
	s, _ = computeStatus(c, observed{Pods: podsOf(c, 2, true), ReconcileErr: failure(reasonFailedCreateWorkerPod, errors.New("quota"))}, now)
	rf := meta.FindStatusCondition(s.Conditions, string(rayv1.RayClusterReplicaFailure))
	if s.State == rayv1.Ready || rf == nil || rf.Reason != "FailedCreateWorkerPod" || rf.Status != metav1.ConditionTrue {
		t.Errorf("replica failure: state %q cond %+v", s.State, rf)
	}
	c.Status = s
	s, _ = computeStatus(c, observed{Pods: podsOf(c, 2, true)}, now)
	if meta.FindStatusCondition(s.Conditions, string(rayv1.RayClusterReplicaFailure)) != nil {
		t.Error("ReplicaFailure kept after a clean pass")
	}

	// Two heads is an error.
	pods = podsOf(c, 2, true)
	if _, err := computeStatus(c, observed{Pods: append(pods, pods[0])}, now); err == nil {
		t.Error("two heads accepted")
	}
}

func TestStatusSuspendCycle(t *testing.T) {
	c := sampleCluster()
	c.Status, _ = computeStatus(c, observed{Pods: podsOf(c, 2, true)}, now)

	c.Spec.Suspend = ptr.To(true)
	s, _ := computeStatus(c, observed{Pods: podsOf(c, 2, true)}, now)
	if suspendStatus(s.Conditions) != rayv1.RayClusterSuspending || s.State != rayv1.Ready {
		t.Fatalf("suspend requested: %q state %q", suspendStatus(s.Conditions), s.State)
	}
	c.Status = s
	s, _ = computeStatus(c, observed{Pods: podsOf(c, 1, true)}, now)
	if suspendStatus(s.Conditions) != rayv1.RayClusterSuspending {
		t.Fatal("left Suspending while pods remain")
	}
	s, _ = computeStatus(c, observed{}, now)
	if suspendStatus(s.Conditions) != rayv1.RayClusterSuspended || s.State != rayv1.Suspended ||
		meta.IsStatusConditionTrue(s.Conditions, string(rayv1.RayClusterProvisioned)) {
		t.Fatalf("all pods gone: %q state %q", suspendStatus(s.Conditions), s.State)
	}
	c.Status = s

	c.Spec.Suspend = ptr.To(false)
	s, _ = computeStatus(c, observed{}, now)
	if suspendStatus(s.Conditions) != "" || s.State != rayv1.Suspended {
		t.Fatalf("resume: %q state %q", suspendStatus(s.Conditions), s.State)
	}
	c.Status = s
	s, _ = computeStatus(c, observed{Pods: podsOf(c, 2, true)}, now.Add(time.Minute))
	if s.State != rayv1.Ready || !meta.IsStatusConditionTrue(s.Conditions, string(rayv1.RayClusterProvisioned)) {
		t.Fatalf("resumed and ready: state %q", s.State)
	}
}

func TestStatusChanged(t *testing.T) {
	c := sampleCluster()
	a, _ := computeStatus(c, observed{Pods: podsOf(c, 2, true), HeadService: headSvc(c)}, now)
	c.Status = a
	b, _ := computeStatus(c, observed{Pods: podsOf(c, 2, true), HeadService: headSvc(c)}, now.Add(time.Hour))
	ta, tb := a.LastUpdateTime, b.LastUpdateTime
	if statusChanged(&a, &b) {
		t.Error("a status differing only in lastUpdateTime counts as changed")
	}
	if a.LastUpdateTime != ta || b.LastUpdateTime != tb || ta.Equal(tb) {
		t.Errorf("statusChanged changed its arguments' lastUpdateTime: %v → %v, %v → %v", ta, a.LastUpdateTime, tb, b.LastUpdateTime)
	}
	b.ReadyWorkerReplicas--
	if !statusChanged(&a, &b) {
		t.Error("a changed replica count is not a change")
	}
}
