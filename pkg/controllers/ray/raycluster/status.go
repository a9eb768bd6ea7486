package raycluster

import (
	"fmt"
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/rayparams"
)

// suspendStatus returns RayClusterSuspending or RayClusterSuspended if that condition is True, else "".
func suspendStatus(conds []metav1.Condition) rayv1.RayClusterConditionType {
	for _, c := range conds {
		if (c.Type == string(rayv1.RayClusterSuspending) || c.Type == string(rayv1.RayClusterSuspended)) && c.Status == metav1.ConditionTrue {
			return rayv1.RayClusterConditionType(c.Type)
		}
	}
	return ""
}

// allRunning is KubeRay's readiness test for a cluster's Pods: there is at least one, each is Running,
// and none has Ready=False (a Pod without a Ready condition yet does not count against it).
func allRunning(pods []corev1.Pod) bool {
	if len(pods) == 0 {
		return false
	}
	for i := range pods {
		if pods[i].Status.Phase != corev1.PodRunning {
			return false
		}
		for _, c := range pods[i].Status.Conditions {
			if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
				return false
			}
		}
	}
	return true
}

// headPodReadyCondition mirrors the head Pod's Ready condition as HeadPodReady.
func headPodReadyCondition(head *corev1.Pod) metav1.Condition {
	c := metav1.Condition{Type: string(rayv1.HeadPodReady), Status: metav1.ConditionFalse, Reason: rayv1.UnknownReason}
	for _, pc := range head.Status.Conditions {
		if pc.Type != corev1.PodReady {
			continue
		}
		c.Status, c.Message = metav1.ConditionStatus(pc.Status), pc.Message
		reason := pc.Reason
		if pc.Status == corev1.ConditionTrue && reason == "" {
			reason = rayv1.HeadPodRunningAndReady
		}
		if reason != "" {
			c.Reason = reason
		}
		break
	}
	return c
}

// podResources sums a Pod spec's containers, each resource taken from requests, else limits.
func podResources(spec *corev1.PodSpec) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range spec.Containers {
		res := corev1.ResourceList{}
		for n, q := range c.Resources.Limits {
			res[n] = q
		}
		for n, q := range c.Resources.Requests {
			res[n] = q
		}
		addResources(total, res, 1)
	}
	return total
}

func addResources(total, res corev1.ResourceList, times int64) {
	for n, q := range res {
		q = q.DeepCopy()
		q.Mul(times)
		if t, ok := total[n]; ok {
			t.Add(q)
			total[n] = t
		} else {
			total[n] = q
		}
	}
}

// desiredResources adds up the head and every running group's Pods (replicas × numOfHosts, as KubeRay
// counts them: spec replicas, not clamped).
func desiredResources(c *rayv1.RayCluster) corev1.ResourceList {
	total := podResources(&c.Spec.HeadGroupSpec.Template.Spec)
	for i := range c.Spec.WorkerGroupSpecs {
		g := &c.Spec.WorkerGroupSpecs[i]
		if suspended(g.Suspend) {
			continue
		}
		n := int64(DesiredWorkers(g))
		if g.Replicas != nil {
			n = int64(*g.Replicas) * int64(numOfHosts(g))
		}
		addResources(total, podResources(&g.Template.Spec), n)
	}
	return total
}

// observed is what the controller saw of a cluster's children after acting on it.
type observed struct {
	// Pods are all Pods labelled ray.io/cluster=<name>, terminating ones included.
	Pods []corev1.Pod
	// HeadService is the head Service, nil if the cache has none yet.
	HeadService *corev1.Service
	// ReconcileErr is what acting on the cluster returned.
	ReconcileErr error
}

// computeStatus returns c's new status, KubeRay's way: replica counts and desired resources, the
// conditions (HeadPodReady, RayClusterProvisioned, ReplicaFailure, RayClusterSuspending/Suspended),
// state ready once every Pod is Running and none is not Ready (and the count is right), suspended
// once a suspended cluster has no Pods, head Pod and Service addresses, endpoints. The state is
// otherwise left as it was (KubeRay does not move a cluster out of ready). c is not modified.
func computeStatus(c *rayv1.RayCluster, obs observed, now time.Time) (rayv1.RayClusterStatus, error) {
	s := *c.Status.DeepCopy()
	t := metav1.NewTime(now)
	set := func(typ rayv1.RayClusterConditionType, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: string(typ), Status: status, Reason: reason, Message: msg, LastTransitionTime: t})
	}

	if obs.ReconcileErr != nil {
		if reason := replicaFailureReason(obs.ReconcileErr); reason != "" {
			set(rayv1.RayClusterReplicaFailure, metav1.ConditionTrue, reason, obs.ReconcileErr.Error())
		}
	} else {
		meta.RemoveStatusCondition(&s.Conditions, string(rayv1.RayClusterReplicaFailure))
	}
	s.ObservedGeneration = c.Generation

	var heads []*corev1.Pod
	s.ReadyWorkerReplicas, s.AvailableWorkerReplicas = 0, 0
	for i := range obs.Pods {
		p := &obs.Pods[i]
		switch rayv1.RayNodeType(p.Labels[rayparams.LabelNodeType]) {
		case rayv1.HeadNode:
			heads = append(heads, p)
		case rayv1.WorkerNode:
			if p.Status.Phase == corev1.PodRunning {
				s.AvailableWorkerReplicas++
			}
			if isRunningAndReady(p) {
				s.ReadyWorkerReplicas++
			}
		}
	}
	if len(heads) > 1 {
		return s, fmt.Errorf("found %d head Pods for RayCluster %s/%s", len(heads), c.Namespace, c.Name)
	}
	s.DesiredWorkerReplicas, s.MinWorkerReplicas, s.MaxWorkerReplicas = 0, 0, 0
	for i := range c.Spec.WorkerGroupSpecs {
		g := &c.Spec.WorkerGroupSpecs[i]
		s.DesiredWorkerReplicas += DesiredWorkers(g)
		if !suspended(g.Suspend) {
			s.MinWorkerReplicas += minReplicas(g) * numOfHosts(g)
			s.MaxWorkerReplicas = satAdd(s.MaxWorkerReplicas, satMul(maxReplicas(g), numOfHosts(g)))
		}
	}
	res := desiredResources(c)
	s.DesiredCPU, s.DesiredMemory = res[corev1.ResourceCPU], res[corev1.ResourceMemory]
	s.DesiredTPU = res["google.com/tpu"]
	s.DesiredGPU = resource.Quantity{}
	for n, q := range res {
		if rayparams.IsGPU(string(n)) && !q.IsZero() {
			s.DesiredGPU.Add(q)
		}
	}

	if obs.ReconcileErr == nil && len(obs.Pods) == int(s.DesiredWorkerReplicas)+1 && allRunning(obs.Pods) {
		s.State, s.Reason = rayv1.Ready, ""
	}

	if len(heads) == 0 {
		set(rayv1.HeadPodReady, metav1.ConditionFalse, rayv1.HeadPodNotFound, "Head Pod not found")
	} else {
		hc := headPodReadyCondition(heads[0])
		set(rayv1.RayClusterConditionType(hc.Type), hc.Status, hc.Reason, hc.Message)
	}

	ss := suspendStatus(s.Conditions)
	if !meta.IsStatusConditionTrue(s.Conditions, string(rayv1.RayClusterProvisioned)) && ss != rayv1.RayClusterSuspended {
		// Provisioned records the first time all Pods were ready; it is not reset until a suspension.
		if allRunning(obs.Pods) {
			set(rayv1.RayClusterProvisioned, metav1.ConditionTrue, rayv1.AllPodRunningAndReadyFirstTime, "All Ray Pods are ready for the first time")
		} else {
			set(rayv1.RayClusterProvisioned, metav1.ConditionFalse, rayv1.RayClusterPodsProvisioning, "RayCluster Pods are being provisioned for first time")
		}
	}
	wantSuspend := suspended(c.Spec.Suspend)
	switch ss {
	case rayv1.RayClusterSuspending:
		if len(obs.Pods) == 0 {
			set(rayv1.RayClusterProvisioned, metav1.ConditionFalse, rayv1.RayClusterPodsProvisioning, "RayCluster has been suspended")
			set(rayv1.RayClusterSuspending, metav1.ConditionFalse, string(rayv1.RayClusterSuspending), "")
			set(rayv1.RayClusterSuspended, metav1.ConditionTrue, string(rayv1.RayClusterSuspended), "")
		}
	case rayv1.RayClusterSuspended:
		if !wantSuspend {
			set(rayv1.RayClusterSuspended, metav1.ConditionFalse, string(rayv1.RayClusterSuspended), "")
		}
	default:
		set(rayv1.RayClusterSuspended, metav1.ConditionFalse, string(rayv1.RayClusterSuspended), "")
		if wantSuspend {
			set(rayv1.RayClusterSuspending, metav1.ConditionTrue, string(rayv1.RayClusterSuspending), "")
		} else {
			set(rayv1.RayClusterSuspending, metav1.ConditionFalse, string(rayv1.RayClusterSuspending), "")
		}
	}
	if wantSuspend && len(obs.Pods) == 0 {
		s.State = rayv1.Suspended
	}

	s.Head = rayv1.HeadInfo{}
	if len(heads) == 1 {
		s.Head.PodIP, s.Head.PodName = heads[0].Status.PodIP, heads[0].Name
	}
	if svc := obs.HeadService; svc != nil {
		if s.Endpoints == nil {
			s.Endpoints = map[string]string{}
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == "" {
				continue
			}
			switch {
			case p.NodePort != 0:
				s.Endpoints[p.Name] = strconv.Itoa(int(p.NodePort))
			case p.TargetPort.IntVal != 0:
				s.Endpoints[p.Name] = strconv.Itoa(int(p.TargetPort.IntVal))
			case p.TargetPort.StrVal != "":
				s.Endpoints[p.Name] = p.TargetPort.StrVal
			default: // targetPort not defaulted (yet): it equals port
				s.Endpoints[p.Name] = strconv.Itoa(int(p.Port))
			}
		}
		s.Head.ServiceName = svc.Name
		s.Head.ServiceIP = svc.Spec.ClusterIP
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			// A headless head Service's address is the head Pod's.
			s.Head.ServiceIP = s.Head.PodIP
		}
	}

	s.LastUpdateTime = &t
	if s.State != c.Status.State {
		if s.StateTransitionTimes == nil {
			s.StateTransitionTimes = map[rayv1.ClusterState]*metav1.Time{}
		}
		s.StateTransitionTimes[s.State] = &t
	}
	return s, nil
}

// statusChanged reports whether b differs from a in anything but lastUpdateTime. It compares shallow
// copies with that field cleared (the copies share every map, slice and pointer with a and b, which are
// only read).
func statusChanged(a, b *rayv1.RayClusterStatus) bool {
	x, y := *a, *b
	x.LastUpdateTime, y.LastUpdateTime = nil, nil
	return !equality.Semantic.DeepEqual(&x, &y)
}

func satAdd(a, b int32) int32 {
	if s := int64(a) + int64(b); s <= 1<<31-1 {
		return int32(s)
	}
	return 1<<31 - 1
}

func satMul(a, b int32) int32 {
	if p := int64(a) * int64(b); p <= 1<<31-1 {
		return int32(p)
	}
	return 1<<31 - 1
}
