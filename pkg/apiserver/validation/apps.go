package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var specPath = field.NewPath("spec")

// workload is what the apps/v1 controllers' specs share: a replica count, a selector and a pod template
// that must run forever (restartPolicy Always).
type workload struct {
	replicas        *int32
	minReadySeconds int32
	selector        *metav1.LabelSelector
	template        *corev1.PodTemplateSpec
}

// validate checks a workload's replicas, minReadySeconds, selector (required, not empty, matching the
// template's labels) and template (restartPolicy Always, no activeDeadlineSeconds).
func (w workload) validate(p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if w.replicas != nil {
		allErrs = append(allErrs, nonNegative(int64(*w.replicas), p.Child("replicas"))...)
	}
	allErrs = append(allErrs, nonNegative(int64(w.minReadySeconds), p.Child("minReadySeconds"))...)
	selPath := p.Child("selector")
	if w.selector == nil {
		allErrs = append(allErrs, field.Required(selPath, ""))
	} else {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(w.selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(w.selector.MatchLabels)+len(w.selector.MatchExpressions) == 0 {
			allErrs = append(allErrs, field.Invalid(selPath, w.selector, "empty selector is invalid for deployment"))
		} else if sel, err := metav1.LabelSelectorAsSelector(w.selector); err == nil && !sel.Matches(labels.Set(w.template.Labels)) {
			allErrs = append(allErrs, field.Invalid(p.Child("template", "metadata", "labels"), w.template.Labels, "`selector` does not match template `labels`"))
		}
	}
	tmplPath := p.Child("template")
	allErrs = append(allErrs, ValidatePodTemplateSpec(w.template, tmplPath)...)
	if rp := w.template.Spec.RestartPolicy; rp != corev1.RestartPolicyAlways {
		allErrs = append(allErrs, field.NotSupported(tmplPath.Child("spec", "restartPolicy"), rp, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if w.template.Spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Forbidden(tmplPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return allErrs
}

// workloadUpdate checks an update: metadata rules, the new spec, and an unchanged selector.
func workloadUpdate(newMeta, oldMeta *metav1.ObjectMeta, newW, oldW workload) field.ErrorList {
	allErrs := metaUpdate(newMeta, oldMeta)
	allErrs = append(allErrs, newW.validate(specPath)...)
	return append(allErrs, immutable(newW.selector, oldW.selector, specPath.Child("selector"))...)
}

// intOrPercent checks a maxSurge/maxUnavailable value: a non-negative integer or a percentage, at most
// 100% when capped.
func intOrPercent(v *intstr.IntOrString, capped bool, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		return nonNegative(int64(v.IntValue()), p)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false)
	if err != nil {
		return field.ErrorList{field.Invalid(p, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")}
	}
	if n < 0 {
		return nonNegative(int64(n), p)
	}
	if capped && n > 100 {
		return field.ErrorList{field.Invalid(p, v.StrVal, "must not be greater than 100%")}
	}
	return nil
}

func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return true
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false)
	return err == nil && n == 0
}

func deploymentWorkload(d *appsv1.Deployment) workload {
	return workload{d.Spec.Replicas, d.Spec.MinReadySeconds, d.Spec.Selector, &d.Spec.Template}
}

// ValidateDeployment checks a Deployment on create: metadata, replicas, selector, template (restartPolicy
// Always), the strategy (maxSurge and maxUnavailable not both zero; no rollingUpdate with Recreate),
// revisionHistoryLimit, and progressDeadlineSeconds above minReadySeconds.
func ValidateDeployment(d *appsv1.Deployment) field.ErrorList {
	allErrs := namespacedMeta(&d.ObjectMeta, NameIsDNSSubdomain)
	allErrs = append(allErrs, deploymentWorkload(d).validate(specPath)...)
	return append(allErrs, validateDeploymentSpec(d)...)
}

// validateDeploymentSpec checks what a Deployment's spec adds to a workload's.
func validateDeploymentSpec(d *appsv1.Deployment) field.ErrorList {
	var allErrs field.ErrorList
	sp := specPath.Child("strategy")
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if d.Spec.Strategy.RollingUpdate != nil {
			allErrs = append(allErrs, field.Forbidden(sp.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
			rp := sp.Child("rollingUpdate")
			allErrs = append(allErrs, intOrPercent(ru.MaxSurge, false, rp.Child("maxSurge"))...)
			allErrs = append(allErrs, intOrPercent(ru.MaxUnavailable, true, rp.Child("maxUnavailable"))...)
			if isZero(ru.MaxSurge) && isZero(ru.MaxUnavailable) {
				allErrs = append(allErrs, field.Invalid(rp.Child("maxUnavailable"), ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
			}
		}
	default:
		allErrs = append(allErrs, oneOf(d.Spec.Strategy.Type, sp.Child("type"), appsv1.RecreateDeploymentStrategyType, appsv1.RollingUpdateDeploymentStrategyType)...)
	}
	if d.Spec.RevisionHistoryLimit != nil {
		allErrs = append(allErrs, nonNegative(int64(*d.Spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if pd := d.Spec.ProgressDeadlineSeconds; pd != nil {
		allErrs = append(allErrs, nonNegative(int64(*pd), specPath.Child("progressDeadlineSeconds"))...)
		if *pd <= d.Spec.MinReadySeconds {
			allErrs = append(allErrs, field.Invalid(specPath.Child("progressDeadlineSeconds"), *pd, "must be greater than minReadySeconds"))
		}
	}
	return allErrs
}

// ValidateDeploymentUpdate checks an update of a Deployment: as on create, with the selector unchanged.
func ValidateDeploymentUpdate(newD, oldD *appsv1.Deployment) field.ErrorList {
	allErrs := workloadUpdate(&newD.ObjectMeta, &oldD.ObjectMeta, deploymentWorkload(newD), deploymentWorkload(oldD))
	return append(allErrs, validateDeploymentSpec(newD)...)
}

// ValidateDeploymentStatusUpdate checks an update of deployments/status: non-negative counters.
func ValidateDeploymentStatusUpdate(newD, oldD *appsv1.Deployment) field.ErrorList {
	st, p := &newD.Status, field.NewPath("status")
	return append(metaUpdate(&newD.ObjectMeta, &oldD.ObjectMeta), counters(p, map[string]int32{
		"replicas": st.Replicas, "updatedReplicas": st.UpdatedReplicas,
		"readyReplicas": st.ReadyReplicas, "availableReplicas": st.AvailableReplicas, "unavailableReplicas": st.UnavailableReplicas,
	})...)
}

// counters reports each negative counter of a status under p.
func counters(p *field.Path, values map[string]int32) field.ErrorList {
	var allErrs field.ErrorList
	for _, name := range sortedKeys(values) {
		allErrs = append(allErrs, nonNegative(int64(values[name]), p.Child(name))...)
	}
	return allErrs
}

func replicaSetWorkload(rs *appsv1.ReplicaSet) workload {
	return workload{rs.Spec.Replicas, rs.Spec.MinReadySeconds, rs.Spec.Selector, &rs.Spec.Template}
}

// ValidateReplicaSet checks a ReplicaSet on create: metadata, replicas, selector and template.
func ValidateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	allErrs := namespacedMeta(&rs.ObjectMeta, NameIsDNSSubdomain)
	return append(allErrs, replicaSetWorkload(rs).validate(specPath)...)
}

// ValidateReplicaSetUpdate checks an update of a ReplicaSet: as on create, with the selector unchanged.
func ValidateReplicaSetUpdate(newRS, oldRS *appsv1.ReplicaSet) field.ErrorList {
	return workloadUpdate(&newRS.ObjectMeta, &oldRS.ObjectMeta, replicaSetWorkload(newRS), replicaSetWorkload(oldRS))
}

// ValidateReplicaSetStatusUpdate checks an update of replicasets/status: non-negative counters, and no
// more ready or available replicas than replicas.
func ValidateReplicaSetStatusUpdate(newRS, oldRS *appsv1.ReplicaSet) field.ErrorList {
	st, p := &newRS.Status, field.NewPath("status")
	allErrs := append(metaUpdate(&newRS.ObjectMeta, &oldRS.ObjectMeta), counters(p, map[string]int32{
		"replicas": st.Replicas, "fullyLabeledReplicas": st.FullyLabeledReplicas, "readyReplicas": st.ReadyReplicas, "availableReplicas": st.AvailableReplicas,
	})...)
	if st.ReadyReplicas > st.Replicas {
		allErrs = append(allErrs, field.Invalid(p.Child("readyReplicas"), st.ReadyReplicas, "cannot be greater than status.replicas"))
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		allErrs = append(allErrs, field.Invalid(p.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return allErrs
}

// statefulSetTemplate is the StatefulSet's pod template as its pods will have it: each claim template is
// a volume the containers may mount.
func statefulSetTemplate(s *appsv1.StatefulSet) *corev1.PodTemplateSpec {
	t := s.Spec.Template.DeepCopy()
	for _, c := range s.Spec.VolumeClaimTemplates {
		found := false
		for _, v := range t.Spec.Volumes {
			found = found || v.Name == c.Name
		}
		if !found && c.Name != "" {
			t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}})
		}
	}
	return t
}

func statefulSetWorkload(s *appsv1.StatefulSet) workload {
	return workload{s.Spec.Replicas, s.Spec.MinReadySeconds, s.Spec.Selector, statefulSetTemplate(s)}
}

// ValidateStatefulSet checks a StatefulSet on create: metadata, replicas, selector, template (claim
// templates count as volumes), podManagementPolicy, updateStrategy, claim templates' names, ordinals.
func ValidateStatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	allErrs := namespacedMeta(&s.ObjectMeta, NameIsDNSLabel)
	allErrs = append(allErrs, statefulSetWorkload(s).validate(specPath)...)
	return append(allErrs, validateStatefulSetSpec(s)...)
}

func validateStatefulSetSpec(s *appsv1.StatefulSet) field.ErrorList {
	allErrs := optionalOneOf(s.Spec.PodManagementPolicy, specPath.Child("podManagementPolicy"), appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)
	up := specPath.Child("updateStrategy")
	switch s.Spec.UpdateStrategy.Type {
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.Spec.UpdateStrategy.RollingUpdate != nil {
			allErrs = append(allErrs, field.Invalid(up.Child("rollingUpdate"), s.Spec.UpdateStrategy.RollingUpdate, "only allowed for updateStrategy 'RollingUpdate'"))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			if ru.Partition != nil {
				allErrs = append(allErrs, nonNegative(int64(*ru.Partition), up.Child("rollingUpdate", "partition"))...)
			}
			allErrs = append(allErrs, intOrPercent(ru.MaxUnavailable, true, up.Child("rollingUpdate", "maxUnavailable"))...)
		}
	default:
		allErrs = append(allErrs, optionalOneOf(s.Spec.UpdateStrategy.Type, up.Child("type"), appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)...)
	}
	if s.Spec.RevisionHistoryLimit != nil {
		allErrs = append(allErrs, nonNegative(int64(*s.Spec.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if s.Spec.ServiceName != "" {
		allErrs = append(allErrs, dnsLabel(s.Spec.ServiceName, specPath.Child("serviceName"))...)
	}
	if s.Spec.Ordinals != nil {
		allErrs = append(allErrs, nonNegative(int64(s.Spec.Ordinals.Start), specPath.Child("ordinals", "start"))...)
	}
	for i, c := range s.Spec.VolumeClaimTemplates {
		cp := specPath.Child("volumeClaimTemplates").Index(i)
		if c.Name == "" {
			allErrs = append(allErrs, field.Required(cp.Child("metadata", "name"), ""))
		} else {
			allErrs = append(allErrs, dnsSubdomain(c.Name, cp.Child("metadata", "name"))...)
		}
		if len(c.Spec.AccessModes) == 0 {
			allErrs = append(allErrs, field.Required(cp.Child("spec", "accessModes"), "at least 1 access mode is required"))
		}
	}
	return allErrs
}

// ValidateStatefulSetUpdate checks an update of a StatefulSet. As on a real cluster, only replicas,
// ordinals, template, updateStrategy, revisionHistoryLimit, persistentVolumeClaimRetentionPolicy and
// minReadySeconds may change.
func ValidateStatefulSetUpdate(newS, oldS *appsv1.StatefulSet) field.ErrorList {
	allErrs := workloadUpdate(&newS.ObjectMeta, &oldS.ObjectMeta, statefulSetWorkload(newS), statefulSetWorkload(oldS))
	allErrs = append(allErrs, validateStatefulSetSpec(newS)...)
	a, b := newS.Spec.DeepCopy(), oldS.Spec.DeepCopy()
	for _, s := range []*appsv1.StatefulSetSpec{a, b} {
		s.Replicas, s.Ordinals, s.Template, s.UpdateStrategy = nil, nil, corev1.PodTemplateSpec{}, appsv1.StatefulSetUpdateStrategy{}
		s.RevisionHistoryLimit, s.PersistentVolumeClaimRetentionPolicy, s.MinReadySeconds = nil, nil, 0
	}
	if !apiequalityDeepEqual(a, b) {
		allErrs = append(allErrs, field.Forbidden(specPath, "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
	}
	return allErrs
}

// ValidateStatefulSetStatusUpdate checks an update of statefulsets/status: non-negative counters.
func ValidateStatefulSetStatusUpdate(newS, oldS *appsv1.StatefulSet) field.ErrorList {
	st := &newS.Status
	return append(metaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta), counters(field.NewPath("status"), map[string]int32{
		"replicas": st.Replicas, "readyReplicas": st.ReadyReplicas, "currentReplicas": st.CurrentReplicas,
		"updatedReplicas": st.UpdatedReplicas, "availableReplicas": st.AvailableReplicas,
	})...)
}

func daemonSetWorkload(ds *appsv1.DaemonSet) workload {
	return workload{nil, ds.Spec.MinReadySeconds, ds.Spec.Selector, &ds.Spec.Template}
}

// ValidateDaemonSet checks a DaemonSet on create: metadata, selector, template and updateStrategy.
func ValidateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	allErrs := namespacedMeta(&ds.ObjectMeta, NameIsDNSSubdomain)
	allErrs = append(allErrs, daemonSetWorkload(ds).validate(specPath)...)
	return append(allErrs, validateDaemonSetStrategy(ds)...)
}

func validateDaemonSetStrategy(ds *appsv1.DaemonSet) field.ErrorList {
	up := specPath.Child("updateStrategy")
	allErrs := oneOf(ds.Spec.UpdateStrategy.Type, up.Child("type"), appsv1.RollingUpdateDaemonSetStrategyType, appsv1.OnDeleteDaemonSetStrategyType)
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		rp := up.Child("rollingUpdate")
		allErrs = append(allErrs, intOrPercent(ru.MaxUnavailable, true, rp.Child("maxUnavailable"))...)
		allErrs = append(allErrs, intOrPercent(ru.MaxSurge, true, rp.Child("maxSurge"))...)
		if isZero(ru.MaxSurge) && isZero(ru.MaxUnavailable) {
			allErrs = append(allErrs, field.Invalid(rp.Child("maxUnavailable"), ru.MaxUnavailable, "cannot be 0 when maxSurge is 0"))
		}
	}
	return allErrs
}

// ValidateDaemonSetUpdate checks an update of a DaemonSet: as on create, with the selector unchanged.
func ValidateDaemonSetUpdate(newDS, oldDS *appsv1.DaemonSet) field.ErrorList {
	allErrs := workloadUpdate(&newDS.ObjectMeta, &oldDS.ObjectMeta, daemonSetWorkload(newDS), daemonSetWorkload(oldDS))
	return append(allErrs, validateDaemonSetStrategy(newDS)...)
}

// ValidateDaemonSetStatusUpdate checks an update of daemonsets/status: non-negative counters.
func ValidateDaemonSetStatusUpdate(newDS, oldDS *appsv1.DaemonSet) field.ErrorList {
	st := &newDS.Status
	return append(metaUpdate(&newDS.ObjectMeta, &oldDS.ObjectMeta), counters(field.NewPath("status"), map[string]int32{
		"currentNumberScheduled": st.CurrentNumberScheduled, "numberMisscheduled": st.NumberMisscheduled,
		"desiredNumberScheduled": st.DesiredNumberScheduled, "numberReady": st.NumberReady,
		"updatedNumberScheduled": st.UpdatedNumberScheduled, "numberAvailable": st.NumberAvailable, "numberUnavailable": st.NumberUnavailable,
	})...)
}

// ValidateControllerRevision checks a ControllerRevision: metadata, data present, revision not negative.
func ValidateControllerRevision(r *appsv1.ControllerRevision) field.ErrorList {
	allErrs := namespacedMeta(&r.ObjectMeta, NameIsDNSSubdomain)
	if r.Data.Raw == nil && r.Data.Object == nil {
		allErrs = append(allErrs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(allErrs, nonNegative(r.Revision, field.NewPath("revision"))...)
}

// ValidateControllerRevisionUpdate checks an update of a ControllerRevision: its data is immutable.
func ValidateControllerRevisionUpdate(newR, oldR *appsv1.ControllerRevision) field.ErrorList {
	allErrs := metaUpdate(&newR.ObjectMeta, &oldR.ObjectMeta)
	allErrs = append(allErrs, ValidateControllerRevision(newR)...)
	return append(allErrs, immutable(newR.Data, oldR.Data, field.NewPath("data"))...)
}
