package validation

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateJob checks a Job on create: metadata, the selector (required, and
// matching the template labels; a generated selector must carry the job's
// controller-uid), counts, deadlines, completion mode and the pod template,
// whose restartPolicy must be OnFailure or Never.
func ValidateJob(job *batchv1.Job) field.ErrorList {
	allErrs := namespacedMeta(&job.ObjectMeta, NameIsDNSSubdomain)
	allErrs = append(allErrs, validateGeneratedSelector(job)...)
	return append(allErrs, validateJobSpec(&job.Spec, field.NewPath("spec"))...)
}

func validateGeneratedSelector(job *batchv1.Job) field.ErrorList {
	if job.Spec.ManualSelector != nil && *job.Spec.ManualSelector || job.UID == "" || job.Spec.Selector == nil {
		return nil
	}
	var allErrs field.ErrorList
	uid := string(job.UID)
	if job.Spec.Template.Labels[batchv1.ControllerUidLabel] != uid {
		allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "template", "metadata", "labels"), job.Spec.Template.Labels,
			"must be '"+batchv1.ControllerUidLabel+": "+uid+"'"))
	}
	if job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != uid {
		allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "selector"), job.Spec.Selector, "`selector` not auto-generated"))
	}
	return allErrs
}

func validateJobSpec(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.Parallelism != nil {
		allErrs = append(allErrs, nonNegative(int64(*spec.Parallelism), fldPath.Child("parallelism"))...)
	}
	if spec.Completions != nil {
		allErrs = append(allErrs, nonNegative(int64(*spec.Completions), fldPath.Child("completions"))...)
	}
	if spec.BackoffLimit != nil {
		allErrs = append(allErrs, nonNegative(int64(*spec.BackoffLimit), fldPath.Child("backoffLimit"))...)
	}
	if spec.BackoffLimitPerIndex != nil {
		allErrs = append(allErrs, nonNegative(int64(*spec.BackoffLimitPerIndex), fldPath.Child("backoffLimitPerIndex"))...)
	}
	if spec.MaxFailedIndexes != nil {
		allErrs = append(allErrs, nonNegative(int64(*spec.MaxFailedIndexes), fldPath.Child("maxFailedIndexes"))...)
		if spec.BackoffLimitPerIndex == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, positive(*spec.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	if spec.TTLSecondsAfterFinished != nil {
		allErrs = append(allErrs, nonNegative(int64(*spec.TTLSecondsAfterFinished), fldPath.Child("ttlSecondsAfterFinished"))...)
	}
	if spec.CompletionMode != nil {
		allErrs = append(allErrs, oneOf(*spec.CompletionMode, fldPath.Child("completionMode"), batchv1.NonIndexedCompletion, batchv1.IndexedCompletion)...)
		if *spec.CompletionMode == batchv1.IndexedCompletion && spec.Completions == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("completions"), "when completion mode is Indexed"))
		}
	}
	if spec.BackoffLimitPerIndex != nil && (spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion) {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("backoffLimitPerIndex"), "requires indexed completion mode"))
	}
	if spec.PodReplacementPolicy != nil {
		allErrs = append(allErrs, oneOf(*spec.PodReplacementPolicy, fldPath.Child("podReplacementPolicy"),
			batchv1.TerminatingOrFailed, batchv1.Failed)...)
		if spec.PodFailurePolicy != nil && *spec.PodReplacementPolicy != batchv1.Failed {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("podReplacementPolicy"), *spec.PodReplacementPolicy,
				[]batchv1.PodReplacementPolicy{batchv1.Failed}))
		}
	}
	if spec.ManagedBy != nil {
		allErrs = append(allErrs, qualifiedName(*spec.ManagedBy, fldPath.Child("managedBy"))...)
	}

	selPath := fldPath.Child("selector")
	if spec.Selector == nil {
		allErrs = append(allErrs, field.Required(selPath, ""))
	} else {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil {
			if sel.Empty() {
				allErrs = append(allErrs, field.Invalid(selPath, spec.Selector, "empty selector is invalid for job"))
			} else if !sel.Matches(labels.Set(spec.Template.Labels)) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
			}
		}
	}

	tmplPath := fldPath.Child("template")
	allErrs = append(allErrs, ValidatePodTemplateSpec(&spec.Template, tmplPath)...)
	rp := spec.Template.Spec.RestartPolicy
	if rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever && rp != "" {
		allErrs = append(allErrs, field.NotSupported(tmplPath.Child("spec", "restartPolicy"), rp,
			[]corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	return allErrs
}

// ValidateJobUpdate checks an update of a Job: metadata update rules, the new
// job as a whole, and the immutable parts of the spec: selector, template,
// completions, completionMode, podFailurePolicy and backoffLimitPerIndex.
// (Real Kubernetes allows some template edits while a job is suspended and
// elastic completions for Indexed jobs; rayctl keeps them immutable.)
func ValidateJobUpdate(newJob, oldJob *batchv1.Job) field.ErrorList {
	allErrs := metaUpdate(&newJob.ObjectMeta, &oldJob.ObjectMeta)
	specPath := field.NewPath("spec")
	allErrs = append(allErrs, validateJobSpec(&newJob.Spec, specPath)...)
	allErrs = append(allErrs, immutable(newJob.Spec.Selector, oldJob.Spec.Selector, specPath.Child("selector"))...)
	allErrs = append(allErrs, immutable(newJob.Spec.Template, oldJob.Spec.Template, specPath.Child("template"))...)
	allErrs = append(allErrs, immutable(newJob.Spec.Completions, oldJob.Spec.Completions, specPath.Child("completions"))...)
	allErrs = append(allErrs, immutable(newJob.Spec.CompletionMode, oldJob.Spec.CompletionMode, specPath.Child("completionMode"))...)
	allErrs = append(allErrs, immutable(newJob.Spec.PodFailurePolicy, oldJob.Spec.PodFailurePolicy, specPath.Child("podFailurePolicy"))...)
	allErrs = append(allErrs, immutable(newJob.Spec.BackoffLimitPerIndex, oldJob.Spec.BackoffLimitPerIndex, specPath.Child("backoffLimitPerIndex"))...)
	allErrs = append(allErrs, immutable(newJob.Spec.ManagedBy, oldJob.Spec.ManagedBy, specPath.Child("managedBy"))...)
	return allErrs
}

// ValidateJobStatusUpdate checks an update of jobs/status: metadata update
// rules, non-negative counters, completionTime not before startTime, and
// condition types and statuses.
func ValidateJobStatusUpdate(newJob, oldJob *batchv1.Job) field.ErrorList {
	allErrs := metaUpdate(&newJob.ObjectMeta, &oldJob.ObjectMeta)
	st, p := &newJob.Status, field.NewPath("status")
	allErrs = append(allErrs, nonNegative(int64(st.Active), p.Child("active"))...)
	allErrs = append(allErrs, nonNegative(int64(st.Succeeded), p.Child("succeeded"))...)
	allErrs = append(allErrs, nonNegative(int64(st.Failed), p.Child("failed"))...)
	if st.Ready != nil {
		allErrs = append(allErrs, nonNegative(int64(*st.Ready), p.Child("ready"))...)
	}
	if st.Terminating != nil {
		allErrs = append(allErrs, nonNegative(int64(*st.Terminating), p.Child("terminating"))...)
	}
	if st.CompletionTime != nil && st.StartTime != nil && st.CompletionTime.Before(st.StartTime) {
		allErrs = append(allErrs, field.Invalid(p.Child("completionTime"), st.CompletionTime, "completionTime cannot be set before startTime"))
	}
	for i, c := range st.Conditions {
		cp := p.Child("conditions").Index(i)
		if c.Type == "" {
			allErrs = append(allErrs, field.Required(cp.Child("type"), ""))
		}
		allErrs = append(allErrs, oneOf(c.Status, cp.Child("status"), corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown)...)
	}
	return allErrs
}
