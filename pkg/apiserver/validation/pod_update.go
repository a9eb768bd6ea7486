package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// updatablePodSpecFields lists, in the real server's wording, what a pod
// update may change.
var updatablePodSpecFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// ValidatePodUpdate checks an update of a Pod: metadata update rules, the new
// pod as a whole, and that the spec changes only in what Kubernetes allows:
// container and init container images, activeDeadlineSeconds (set, or
// lowered), and tolerations (additions, or lowering an existing
// tolerationSeconds).
func ValidatePodUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	allErrs := metaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta)
	allErrs = append(allErrs, ValidatePodSpec(&newPod.Spec, specPath)...)

	if len(newPod.Spec.Containers) != len(oldPod.Spec.Containers) {
		return append(allErrs, field.Forbidden(specPath.Child("containers"), "pod updates may not add or remove containers"))
	}
	if len(newPod.Spec.InitContainers) != len(oldPod.Spec.InitContainers) {
		return append(allErrs, field.Forbidden(specPath.Child("initContainers"), "pod updates may not add or remove containers"))
	}
	for i := range newPod.Spec.Containers {
		if newPod.Spec.Containers[i].Image == "" && oldPod.Spec.Containers[i].Image != "" {
			allErrs = append(allErrs, field.Required(specPath.Child("containers").Index(i).Child("image"), ""))
		}
	}

	if ads := newPod.Spec.ActiveDeadlineSeconds; oldPod.Spec.ActiveDeadlineSeconds != nil {
		p := specPath.Child("activeDeadlineSeconds")
		switch {
		case ads == nil:
			allErrs = append(allErrs, field.Invalid(p, ads, "must not update from a positive integer to nil value"))
		case *ads > *oldPod.Spec.ActiveDeadlineSeconds:
			allErrs = append(allErrs, field.Invalid(p, *ads, "must be less than or equal to previous value"))
		}
	}
	allErrs = append(allErrs, validateTolerationsUpdate(newPod.Spec.Tolerations, oldPod.Spec.Tolerations, specPath.Child("tolerations"))...)

	// Compare the specs with every mutable field taken from the old pod.
	mungedSpec := *newPod.Spec.DeepCopy()
	for i := range mungedSpec.Containers {
		mungedSpec.Containers[i].Image = oldPod.Spec.Containers[i].Image
	}
	for i := range mungedSpec.InitContainers {
		mungedSpec.InitContainers[i].Image = oldPod.Spec.InitContainers[i].Image
	}
	mungedSpec.ActiveDeadlineSeconds = oldPod.Spec.ActiveDeadlineSeconds
	mungedSpec.Tolerations = oldPod.Spec.Tolerations
	if g := oldPod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 &&
		mungedSpec.TerminationGracePeriodSeconds != nil && *mungedSpec.TerminationGracePeriodSeconds == 1 {
		mungedSpec.TerminationGracePeriodSeconds = g
	}
	if !apiequality.Semantic.DeepEqual(mungedSpec, oldPod.Spec) {
		specDiff := diff.Diff(oldPod.Spec, mungedSpec)
		allErrs = append(allErrs, field.Forbidden(specPath, fmt.Sprintf("pod updates may not change fields other than %s\n%v",
			strings.Join(updatablePodSpecFields, ","), specDiff)))
	}
	return allErrs
}

// validateTolerationsUpdate allows adding tolerations and lowering the
// tolerationSeconds of existing ones, nothing else.
func validateTolerationsUpdate(newTols, oldTols []corev1.Toleration, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, old := range oldTols {
		found := false
		for _, nt := range newTols {
			if nt.Key != old.Key || nt.Operator != old.Operator || nt.Value != old.Value || nt.Effect != old.Effect {
				continue
			}
			if old.TolerationSeconds == nil {
				found = nt.TolerationSeconds == nil
			} else {
				found = nt.TolerationSeconds != nil && *nt.TolerationSeconds <= *old.TolerationSeconds
			}
			if found {
				break
			}
		}
		if !found {
			allErrs = append(allErrs, field.Forbidden(p, "existing toleration can not be modified except its tolerationSeconds"))
			break
		}
	}
	return allErrs
}

var supportedPodPhases = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}

// ValidatePodStatusUpdate checks an update of pods/status: metadata update
// rules, the phase, pod and host IPs, the nominated node, condition types,
// and that a terminated container of a pod that never restarts stays
// terminated.
func ValidatePodStatusUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	statusPath := field.NewPath("status")
	allErrs := metaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta)
	st := &newPod.Status
	allErrs = append(allErrs, optionalOneOf(st.Phase, statusPath.Child("phase"), supportedPodPhases...)...)
	if st.NominatedNodeName != "" {
		allErrs = append(allErrs, dnsSubdomain(st.NominatedNodeName, statusPath.Child("nominatedNodeName"))...)
	}
	allErrs = append(allErrs, validatePodIPs(st.PodIP, st.PodIPs, statusPath)...)
	if st.HostIP != "" {
		allErrs = append(allErrs, validIP(st.HostIP, statusPath.Child("hostIP"))...)
	}
	for i, h := range st.HostIPs {
		allErrs = append(allErrs, validIP(h.IP, statusPath.Child("hostIPs").Index(i).Child("ip"))...)
	}
	if len(st.HostIPs) > 0 && st.HostIP != st.HostIPs[0].IP {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("hostIPs").Index(0).Child("ip"), st.HostIPs[0].IP, "must be equal to `hostIP`"))
	}
	for i, c := range st.Conditions {
		allErrs = append(allErrs, qualifiedName(string(c.Type), statusPath.Child("conditions").Index(i).Child("type"))...)
	}
	if newPod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		allErrs = append(allErrs, validateContainerStateTransition(st.ContainerStatuses, oldPod.Status.ContainerStatuses, statusPath.Child("containerStatuses"))...)
	}
	return allErrs
}

func validatePodIPs(podIP string, podIPs []corev1.PodIP, statusPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if podIP != "" {
		allErrs = append(allErrs, validIP(podIP, statusPath.Child("podIP"))...)
	}
	ipsPath := statusPath.Child("podIPs")
	if len(podIPs) > 0 && podIP != podIPs[0].IP {
		allErrs = append(allErrs, field.Invalid(ipsPath.Index(0).Child("ip"), podIPs[0].IP, "must be equal to `podIP`"))
	}
	if len(podIPs) > 2 {
		allErrs = append(allErrs, field.TooMany(ipsPath, len(podIPs), 2))
	}
	seen := map[string]bool{}
	for i, ip := range podIPs {
		p := ipsPath.Index(i).Child("ip")
		allErrs = append(allErrs, validIP(ip.IP, p)...)
		if seen[ip.IP] {
			allErrs = append(allErrs, field.Duplicate(p, ip.IP))
		}
		seen[ip.IP] = true
	}
	return allErrs
}

func validateContainerStateTransition(newStatuses, oldStatuses []corev1.ContainerStatus, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ns := range newStatuses {
		for _, os := range oldStatuses {
			if os.Name == ns.Name && os.State.Terminated != nil && ns.State.Terminated == nil {
				allErrs = append(allErrs, field.Forbidden(p.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return allErrs
}

// ValidatePodBinding checks a pods/binding request: the target must name a
// Node.
func ValidatePodBinding(b *corev1.Binding) field.ErrorList {
	var allErrs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		allErrs = append(allErrs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("target", "name"), ""))
	}
	return allErrs
}
