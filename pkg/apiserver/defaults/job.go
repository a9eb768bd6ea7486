package defaults

import (
	"math"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label keys the Job strategy puts on pod templates besides the
// batch.kubernetes.io/ ones, kept for older clients.
const (
	// LegacyJobNameLabel carries the job's name.
	LegacyJobNameLabel = "job-name"
	// LegacyControllerUidLabel carries the job's UID.
	LegacyControllerUidLabel = "controller-uid"
)

// DefaultBackoffLimit is the number of retries a Job gets when it sets none.
const DefaultBackoffLimit int32 = 6

// SetJobDefaults defaults a Job: parallelism and completions 1 when both are
// unset (parallelism 1 when only it is), backoffLimit 6 (MaxInt32 with
// backoffLimitPerIndex), completionMode NonIndexed, suspend false,
// podReplacementPolicy TerminatingOrFailed (Failed with a podFailurePolicy),
// the pod template's defaults, and the job's labels copied from the template
// when the job has none.
//
// It does not generate the selector: that needs the job's UID, so the Job
// strategy calls SetJobSelector from PrepareForCreate, after the UID is
// assigned.
func SetJobDefaults(job *batchv1.Job) {
	spec := &job.Spec
	if spec.Completions == nil && spec.Parallelism == nil {
		one, one2 := int32(1), int32(1)
		spec.Completions, spec.Parallelism = &one, &one2
	}
	if spec.Parallelism == nil {
		one := int32(1)
		spec.Parallelism = &one
	}
	if spec.BackoffLimit == nil {
		limit := DefaultBackoffLimit
		if spec.BackoffLimitPerIndex != nil {
			limit = math.MaxInt32
		}
		spec.BackoffLimit = &limit
	}
	if spec.CompletionMode == nil {
		m := batchv1.NonIndexedCompletion
		spec.CompletionMode = &m
	}
	if spec.Suspend == nil {
		f := false
		spec.Suspend = &f
	}
	if spec.PodReplacementPolicy == nil {
		p := batchv1.TerminatingOrFailed
		if spec.PodFailurePolicy != nil {
			p = batchv1.Failed
		}
		spec.PodReplacementPolicy = &p
	}
	if spec.PodFailurePolicy != nil {
		for i := range spec.PodFailurePolicy.Rules {
			for j := range spec.PodFailurePolicy.Rules[i].OnPodConditions {
				if spec.PodFailurePolicy.Rules[i].OnPodConditions[j].Status == "" {
					spec.PodFailurePolicy.Rules[i].OnPodConditions[j].Status = "True"
				}
			}
		}
	}
	copyTemplateLabels(job)
	SetPodTemplateSpecDefaults(&spec.Template)
}

func copyTemplateLabels(job *batchv1.Job) {
	if len(job.Labels) == 0 && len(job.Spec.Template.Labels) > 0 {
		job.Labels = make(map[string]string, len(job.Spec.Template.Labels))
		for k, v := range job.Spec.Template.Labels {
			job.Labels[k] = v
		}
	}
}

// SetJobSelector generates a Job's selector the way the real Job strategy
// does on create, unless spec.manualSelector is true. It must run after the
// UID is assigned (the registry's PrepareForCreate): the pod template gets
// the labels batch.kubernetes.io/controller-uid and controller-uid (the UID)
// and batch.kubernetes.io/job-name and job-name (the job's name), where not
// already present, and the selector's matchLabels get
// batch.kubernetes.io/controller-uid. A job without labels then takes the
// template's labels, as it would when read back from a real cluster.
func SetJobSelector(job *batchv1.Job) {
	if job.Spec.ManualSelector != nil && *job.Spec.ManualSelector {
		return
	}
	uid := string(job.UID)
	tl := job.Spec.Template.Labels
	if tl == nil {
		tl = map[string]string{}
		job.Spec.Template.Labels = tl
	}
	for k, v := range map[string]string{
		LegacyJobNameLabel:         job.Name,
		batchv1.JobNameLabel:       job.Name,
		LegacyControllerUidLabel:   uid,
		batchv1.ControllerUidLabel: uid,
	} {
		if _, found := tl[k]; !found {
			tl[k] = v
		}
	}
	if job.Spec.Selector == nil {
		job.Spec.Selector = &metav1.LabelSelector{}
	}
	if job.Spec.Selector.MatchLabels == nil {
		job.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, found := job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !found {
		job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = uid
	}
	copyTemplateLabels(job)
}
