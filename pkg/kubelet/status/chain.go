package status

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/rayctl/rayctl/pkg/chain"
)

// ChainHook returns the WriteHook that sends each status write to sink as the chain's KubeletWrite
// event: the Pod at the resourceVersion the API server gave it, its phase, its Ready condition and the
// containers that are not running and ready.
func ChainHook(sink chain.Sink) WriteHook {
	return func(pod *corev1.Pod, rv string) {
		ref := chain.Ref{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), ResourceVersion: rv}
		sink.Record(chain.Event{Component: "kubelet", Hop: chain.KubeletWrite, Object: ref, Outcome: chain.Outcome(pod.Status.Phase), Pod: podStatus(pod)})
	}
}

// podStatus is the part of a Pod's status a reader of the chain cares about.
func podStatus(pod *corev1.Pod) *chain.PodStatus {
	ps := &chain.PodStatus{Phase: string(pod.Status.Phase), Ready: string(corev1.ConditionUnknown)}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			ps.Ready = string(c.Status)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		c := chain.ContainerState{Name: cs.Name, Ready: cs.Ready}
		switch {
		case cs.State.Waiting != nil:
			c.State, c.Reason = chain.Waiting, cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			c.State, c.Reason = chain.Terminated, cs.State.Terminated.Reason
		case cs.State.Running != nil && !cs.Ready:
			c.State = chain.Running
		default:
			continue
		}
		ps.Containers = append(ps.Containers, c)
	}
	return ps
}
