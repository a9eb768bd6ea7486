package pod

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

var selectableFields = map[string]func(runtime.Object) string{
	"spec.nodeName":            func(o runtime.Object) string { return o.(*corev1.Pod).Spec.NodeName },
	"spec.restartPolicy":       func(o runtime.Object) string { return string(o.(*corev1.Pod).Spec.RestartPolicy) },
	"spec.schedulerName":       func(o runtime.Object) string { return o.(*corev1.Pod).Spec.SchedulerName },
	"spec.serviceAccountName":  func(o runtime.Object) string { return o.(*corev1.Pod).Spec.ServiceAccountName },
	"spec.hostNetwork":         func(o runtime.Object) string { return boolString(o.(*corev1.Pod).Spec.HostNetwork) },
	"status.phase":             func(o runtime.Object) string { return string(o.(*corev1.Pod).Status.Phase) },
	"status.podIP":             func(o runtime.Object) string { return o.(*corev1.Pod).Status.PodIP },
	"status.nominatedNodeName": func(o runtime.Object) string { return o.(*corev1.Pod).Status.NominatedNodeName },
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// prepareForCreate starts every pod Pending with its QoS class, as the real API server does.
func prepareForCreate(ctx context.Context, obj runtime.Object) {
	pod := obj.(*corev1.Pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: QOSClass(pod)}
}

// prepareForStatusUpdate keeps the QoS class, which only the spec decides.
func prepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	newPod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
	if oldPod.Status.QOSClass != "" {
		newPod.Status.QOSClass = oldPod.Status.QOSClass
	}
}

// checkGracefulDelete gives a pod the grace period its spec asks for, unless it never reached a node or
// has already finished; those go at once. A graceful pod stays, marked for deletion, until its kubelet
// has stopped it and deletes it with grace period 0.
func checkGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	pod := obj.(*corev1.Pod)
	period := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if options.GracePeriodSeconds != nil {
		period = *options.GracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		period = 0
	}
	options.GracePeriodSeconds = ptr.To(period)
	return true
}

// QOSClass computes a pod's quality-of-service class from its containers' requests and limits:
// Guaranteed when every container limits cpu and memory and requests equal limits, BestEffort when
// nothing is requested or limited, else Burstable.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	containers := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	anySet, guaranteed := false, true
	for _, c := range containers {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[name]
			lim, hasLim := c.Resources.Limits[name]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				anySet = true
			}
			if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !anySet:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}
