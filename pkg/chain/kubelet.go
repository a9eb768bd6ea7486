package chain

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// KubeletWrote records the kubelet's write of pod's status, which the API server answered with
// resourceVersion rv. Its signature is the kubelet's status.WriteHook.
func (r *Recorder) KubeletWrote(pod *corev1.Pod, rv string) {
	if r == nil {
		return
	}
	ref := Ref{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: rv}
	r.record(Event{Component: "kubelet", Hop: KubeletWrite, Object: ref, Outcome: string(pod.Status.Phase), Detail: podSummary(pod)})
}

// podSummary is the part of a Pod's status a reader of the chain cares about: Ready, and the state
// of containers that are not running and ready.
func podSummary(pod *corev1.Pod) string {
	var b strings.Builder
	b.WriteString("Ready=")
	ready := "Unknown"
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = string(c.Status)
		}
	}
	b.WriteString(ready)
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			b.WriteString(" " + cs.Name + "=" + cs.State.Waiting.Reason)
		case cs.State.Terminated != nil:
			b.WriteString(" " + cs.Name + "=" + cs.State.Terminated.Reason)
		case cs.State.Running != nil && !cs.Ready:
			b.WriteString(" " + cs.Name + "=running,not-ready")
		}
	}
	return b.String()
}
