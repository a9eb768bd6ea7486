package raycluster

import (
	"errors"
	"fmt"
	"math"
	"sort"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/util/podutils"
)

// numOfHosts is a group's hosts per replica; a missing value counts as 1.
func numOfHosts(g *rayv1.WorkerGroupSpec) int32 {
	return max(g.NumOfHosts, 1)
}

func minReplicas(g *rayv1.WorkerGroupSpec) int32 {
	if g.MinReplicas == nil {
		return 0
	}
	return *g.MinReplicas
}

func maxReplicas(g *rayv1.WorkerGroupSpec) int32 {
	if g.MaxReplicas == nil {
		return math.MaxInt32
	}
	return *g.MaxReplicas
}

func suspended(b *bool) bool { return b != nil && *b }

// DesiredWorkers is the number of worker Pods group g should have: replicas clamped to
// [minReplicas, maxReplicas] (maxReplicas wins if the two cross; a missing replicas means minReplicas),
// times numOfHosts; 0 while the group is suspended.
func DesiredWorkers(g *rayv1.WorkerGroupSpec) int32 {
	if suspended(g.Suspend) {
		return 0
	}
	lo, hi := minReplicas(g), maxReplicas(g)
	var n int32
	switch {
	case lo > hi:
		n = hi
	case g.Replicas == nil || *g.Replicas < lo:
		n = lo
	case *g.Replicas > hi:
		n = hi
	default:
		n = *g.Replicas
	}
	return n * numOfHosts(g)
}

// rayContainerTerminated returns the Ray container's terminated state, if it has one. The Ray
// container is the Pod's first; statuses are matched by name because their order is not guaranteed.
func rayContainerTerminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	if len(p.Spec.Containers) == 0 {
		return nil
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == p.Spec.Containers[0].Name {
			return s.State.Terminated
		}
	}
	return nil
}

// shouldDelete applies KubeRay's rule for replacing a Pod: it is Failed or Succeeded (it will never run
// again), or it is Running with its Ray container terminated and restartPolicy Never (it cannot restart).
func shouldDelete(p *corev1.Pod, t rayv1.RayNodeType) (bool, string) {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return true, fmt.Sprintf("the %s Pod %s is %s, a terminal phase; it will be deleted and replaced if needed", t, p.Name, p.Status.Phase)
	}
	if term := rayContainerTerminated(p); p.Status.Phase == corev1.PodRunning && term != nil {
		if p.Spec.RestartPolicy == corev1.RestartPolicyNever {
			return true, fmt.Sprintf("the Ray container of the %s Pod %s terminated (exit code %d) and restartPolicy Never keeps it from restarting; it will be deleted", t, p.Name, term.ExitCode)
		}
		return false, fmt.Sprintf("the Ray container of the %s Pod %s terminated, but restartPolicy %s restarts it", t, p.Name, p.Spec.RestartPolicy)
	}
	return false, ""
}

// isRunningAndReady reports whether p is Running with condition Ready=True.
func isRunningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podutils.IsPodReady(p)
}

// scaleDownOrder sorts the Pods to remove first to the front: not yet ready before ready (they carry
// no work), then newest before oldest. KubeRay takes them in list order; any order is allowed, and
// this one disturbs a running cluster least.
func scaleDownOrder(pods []corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		ri, rj := isRunningAndReady(&pods[i]), isRunningAndReady(&pods[j])
		if ri != rj {
			return !ri
		}
		ti, tj := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return tj.Before(&ti)
		}
		return pods[i].Name > pods[j].Name
	})
}

// replicaFailure marks a reconcile error as a Pod create or delete failure, which sets the
// ReplicaFailure condition with the reason (KubeRay's reasons).
type replicaFailure struct {
	reason string
	err    error
}

// The ReplicaFailure reasons.
const (
	reasonFailedDeleteAllPods   = "FailedDeleteAllPods"
	reasonFailedDeleteHeadPod   = "FailedDeleteHeadPod"
	reasonFailedCreateHeadPod   = "FailedCreateHeadPod"
	reasonFailedDeleteWorkerPod = "FailedDeleteWorkerPod"
	reasonFailedCreateWorkerPod = "FailedCreateWorkerPod"
)

func (f *replicaFailure) Error() string { return f.reason + ": " + f.err.Error() }
func (f *replicaFailure) Unwrap() error { return f.err }

func failure(reason string, err error) error { return &replicaFailure{reason: reason, err: err} }

// replicaFailureReason returns the ReplicaFailure reason err carries, or "".
func replicaFailureReason(err error) string {
	var f *replicaFailure
	if errors.As(err, &f) {
		return f.reason
	}
	return ""
}
