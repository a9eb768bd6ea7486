package job

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"
)

// completionIndexEnv is the variable that tells an Indexed Job's container its index.
const completionIndexEnv = "JOB_COMPLETION_INDEX"

// podSet sorts a Job's pods by what they are doing.
type podSet struct {
	active      []*corev1.Pod
	terminating []*corev1.Pod
	succeeded   []*corev1.Pod
	failed      []*corev1.Pod
}

func classify(pods []*corev1.Pod) podSet {
	var s podSet
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			s.succeeded = append(s.succeeded, p)
		case p.Status.Phase == corev1.PodFailed:
			s.failed = append(s.failed, p)
		case p.DeletionTimestamp != nil:
			s.terminating = append(s.terminating, p)
		default:
			s.active = append(s.active, p)
		}
	}
	return s
}

// ready counts the active pods whose Ready condition is True.
func (s podSet) ready() int32 {
	var n int32
	for _, p := range s.active {
		if podutils.IsPodReady(p) {
			n++
		}
	}
	return n
}

// lastFailure is when the most recent failed pod finished.
func (s podSet) lastFailure() time.Time {
	var last time.Time
	for _, p := range s.failed {
		t := p.CreationTimestamp.Time
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
				t = term.FinishedAt.Time
			}
		}
		for _, c := range p.Status.Conditions {
			if c.LastTransitionTime.After(t) {
				t = c.LastTransitionTime.Time
			}
		}
		if t.After(last) {
			last = t
		}
	}
	return last
}

// newPod makes a pod from job's template; index is the completion index of an Indexed Job, else -1.
func newPod(job *batchv1.Job, index int) *corev1.Pod {
	t := job.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Namespace:       job.Namespace,
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: t.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if _, ok := pod.Labels[batchv1.ControllerUidLabel]; !ok {
		pod.Labels[batchv1.ControllerUidLabel] = string(job.UID)
		pod.Labels[batchv1.JobNameLabel] = job.Name
	}
	if index < 0 {
		return pod
	}
	idx := strconv.Itoa(index)
	pod.GenerateName = fmt.Sprintf("%s-%d-", job.Name, index)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[batchv1.JobCompletionIndexAnnotation] = idx
	pod.Labels[batchv1.JobCompletionIndexAnnotation] = idx
	if pod.Spec.Hostname == "" {
		pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, index)
	}
	addEnv := func(cs []corev1.Container) {
		for i := range cs {
			if !slices.ContainsFunc(cs[i].Env, func(e corev1.EnvVar) bool { return e.Name == completionIndexEnv }) {
				cs[i].Env = append(cs[i].Env, corev1.EnvVar{Name: completionIndexEnv, Value: idx})
			}
		}
	}
	addEnv(pod.Spec.InitContainers)
	addEnv(pod.Spec.Containers)
	return pod
}

// podIndex reads an Indexed Job pod's completion index, or -1.
func podIndex(p *corev1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		v, ok = p.Labels[batchv1.JobCompletionIndexAnnotation]
	}
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// parseIndexes reads status.completedIndexes ("1,3-5") below completions.
func parseIndexes(s string, completions int) map[int]bool {
	out := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := a; i <= b && i < completions; i++ {
			out[i] = true
		}
	}
	return out
}

// formatIndexes writes a set of indexes as status.completedIndexes does ("1,3-5").
func formatIndexes(set map[int]bool) string {
	idx := make([]int, 0, len(set))
	for i := range set {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
