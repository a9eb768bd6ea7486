package job

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// event is an event to record once the pass's status is written.
type event struct{ kind, reason, message string }

// pass is one reconcile of one unfinished Job: it acts on pods and computes the new status.
type pass struct {
	r         *reconciler
	job       *batchv1.Job
	key       types.NamespacedName
	now       time.Time
	status    *batchv1.JobStatus
	pods      podSet
	satisfied bool
	events    []event // recorded once the status is written
	podEvents []event // recorded whatever happens: the pods were created or deleted

	created, deleted int32
}

func (s *pass) event(kind, reason, format string, args ...any) {
	s.events = append(s.events, event{kind, reason, fmt.Sprintf(format, args...)})
}

func (s *pass) podEvent(kind, reason, format string, args ...any) {
	s.podEvents = append(s.podEvents, event{kind, reason, fmt.Sprintf(format, args...)})
}

func (s *pass) indexed() bool {
	return s.job.Spec.CompletionMode != nil && *s.job.Spec.CompletionMode == batchv1.IndexedCompletion
}

func (s *pass) completions() (int32, bool) {
	if s.job.Spec.Completions == nil {
		return 0, false
	}
	return *s.job.Spec.Completions, true
}

func (s *pass) parallelism() int32 {
	if s.job.Spec.Parallelism == nil {
		return 1
	}
	return *s.job.Spec.Parallelism
}

// run decides and acts; it leaves the new status in s.status.
func (s *pass) run(ctx context.Context) (reconcile.Result, error) {
	st := s.status
	var result reconcile.Result
	var err error

	succeededIdx := s.countTerminated()
	if !hasCondition(st, batchv1.JobFailureTarget) && !hasCondition(st, batchv1.JobSuccessCriteriaMet) {
		s.checkCriteria(succeededIdx, &result)
	}
	suspended := s.job.Spec.Suspend != nil && *s.job.Spec.Suspend
	switch {
	case hasCondition(st, batchv1.JobFailureTarget), hasCondition(st, batchv1.JobSuccessCriteriaMet):
		err = s.deletePods(ctx, s.pods.active)
		s.finish()
	case suspended:
		err = s.deletePods(ctx, s.pods.active)
		if setCondition(st, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", s.now) {
			s.event(corev1.EventTypeNormal, "Suspended", "Job suspended")
		}
	default:
		if hasCondition(st, batchv1.JobSuspended) {
			setCondition(st, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", s.now)
			s.event(corev1.EventTypeNormal, "Resumed", "Job resumed")
			t := metav1.NewTime(s.now)
			st.StartTime = &t
		}
		if st.StartTime == nil {
			t := metav1.NewTime(s.now)
			st.StartTime = &t
		}
		if s.satisfied {
			var res reconcile.Result
			res, err = s.managePods(ctx, succeededIdx)
			result = earlier(result, res)
		}
	}
	st.Active = int32(len(s.pods.active)) + s.created - s.deleted
	st.Terminating = ptr(int32(len(s.pods.terminating)) + s.deleted)
	st.Ready = ptr(s.pods.ready())
	return result, err
}

// countTerminated updates succeeded, failed and completedIndexes from the pods; for an Indexed Job it
// returns the succeeded indexes.
func (s *pass) countTerminated() map[int]bool {
	st := s.status
	st.Failed = max(st.Failed, int32(len(s.pods.failed)))
	if !s.indexed() {
		st.Succeeded = max(st.Succeeded, int32(len(s.pods.succeeded)))
		return nil
	}
	completions, _ := s.completions()
	done := parseIndexes(st.CompletedIndexes, int(completions))
	for _, p := range s.pods.succeeded {
		if i := podIndex(p); i >= 0 && i < int(completions) {
			done[i] = true
		}
	}
	st.CompletedIndexes = formatIndexes(done)
	st.Succeeded = max(st.Succeeded, int32(len(done)))
	return done
}

// checkCriteria sets FailureTarget or SuccessCriteriaMet when the Job has failed or succeeded.
func (s *pass) checkCriteria(succeededIdx map[int]bool, result *reconcile.Result) {
	st := s.status
	backoffLimit := int32(6)
	if s.job.Spec.BackoffLimit != nil {
		backoffLimit = *s.job.Spec.BackoffLimit
	}
	if st.Failed > backoffLimit {
		setCondition(st, batchv1.JobFailureTarget, corev1.ConditionTrue, reasonBackoffLimitExceeded, messageBackoffLimit, s.now)
		return
	}
	if ads := s.job.Spec.ActiveDeadlineSeconds; ads != nil && st.StartTime != nil && !isSuspended(s.job) {
		deadline := st.StartTime.Add(time.Duration(*ads) * time.Second)
		if !s.now.Before(deadline) {
			setCondition(st, batchv1.JobFailureTarget, corev1.ConditionTrue, reasonDeadlineExceeded, messageDeadline, s.now)
			return
		}
		*result = earlier(*result, reconcile.Result{RequeueAfter: deadline.Sub(s.now)})
	}
	completions, hasCompletions := s.completions()
	var done bool
	switch {
	case s.indexed():
		done = int32(len(succeededIdx)) >= completions
	case hasCompletions:
		done = st.Succeeded >= completions
	default:
		// A work queue: done once one pod succeeded and the others have stopped.
		done = st.Succeeded > 0 && len(s.pods.active) == 0
	}
	if done {
		setCondition(st, batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, reasonCompletionsReached, messageCompletionsReached, s.now)
	}
}

// finish turns FailureTarget into Failed, or SuccessCriteriaMet into Complete, once no pod of the Job
// is running or terminating any more.
func (s *pass) finish() {
	st := s.status
	if len(s.pods.active) > 0 || len(s.pods.terminating) > 0 || s.deleted > 0 {
		return
	}
	if c := findCondition(st, batchv1.JobFailureTarget); c != nil && c.Status == corev1.ConditionTrue {
		setCondition(st, batchv1.JobFailed, corev1.ConditionTrue, c.Reason, c.Message, s.now)
		s.event(corev1.EventTypeWarning, c.Reason, "%s", c.Message)
		return
	}
	setCondition(st, batchv1.JobComplete, corev1.ConditionTrue, reasonCompletionsReached, messageCompletionsReached, s.now)
	t := metav1.NewTime(s.now)
	st.CompletionTime = &t
	s.event(corev1.EventTypeNormal, "Completed", "Job completed")
}

// managePods creates the pods the Job is missing and deletes those beyond its parallelism.
func (s *pass) managePods(ctx context.Context, succeededIdx map[int]bool) (reconcile.Result, error) {
	active := s.pods.active
	parallelism := s.parallelism()
	var toCreate []int // completion indexes, or -1 each for a NonIndexed Job
	var excess []*corev1.Pod
	if s.indexed() {
		completions, _ := s.completions()
		running := map[int]bool{}
		var keep []*corev1.Pod
		for _, p := range active {
			i := podIndex(p)
			if i < 0 || i >= int(completions) || running[i] || succeededIdx[i] {
				excess = append(excess, p)
				continue
			}
			running[i] = true
			keep = append(keep, p)
		}
		for i := 0; i < int(completions) && int32(len(keep)+len(toCreate)) < parallelism; i++ {
			if !running[i] && !succeededIdx[i] {
				toCreate = append(toCreate, i)
			}
		}
		if over := len(keep) - int(parallelism); over > 0 {
			excess = append(excess, newestFirst(keep)[:over]...)
		}
	} else {
		want := parallelism
		if completions, ok := s.completions(); ok {
			want = min(want, max(completions-s.status.Succeeded, 0))
		} else if s.status.Succeeded > 0 {
			want = int32(len(active)) // a work queue: let the rest finish, start nothing new
		}
		for n := int32(len(active)); n < want; n++ {
			toCreate = append(toCreate, -1)
		}
		if over := len(active) - int(want); over > 0 {
			excess = newestFirst(active)[:over]
		}
	}
	if err := s.deletePods(ctx, excess); err != nil {
		return reconcile.Result{}, err
	}
	if len(toCreate) == 0 {
		return reconcile.Result{}, nil
	}
	if wait := s.backoff(); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	for _, i := range toCreate {
		if err := s.createPod(ctx, i); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// backoff is how long to wait before replacing failed pods: BackoffBase doubled per failure beyond the
// first, from the last failure, at most MaxBackoff.
func (s *pass) backoff() time.Duration {
	if s.status.Failed == 0 || len(s.pods.failed) == 0 {
		return 0
	}
	base, limit := s.r.BackoffBase, s.r.MaxBackoff
	if base <= 0 {
		base = 10 * time.Second
	}
	if limit <= 0 {
		limit = 6 * time.Minute
	}
	delay := base
	for i := int32(1); i < s.status.Failed && delay < limit; i++ {
		delay *= 2
	}
	delay = min(delay, limit)
	return s.pods.lastFailure().Add(delay).Sub(s.now)
}

func (s *pass) createPod(ctx context.Context, index int) error {
	pod := newPod(s.job, index)
	if err := s.r.client.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		s.podEvent(corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return fmt.Errorf("creating a pod for job %s: %w", s.key, err)
	}
	s.r.exp.Created(s.key, pod.Name)
	s.created++
	s.podEvent(corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
	return nil
}

// deletePods deletes pods, counting them as terminating.
func (s *pass) deletePods(ctx context.Context, pods []*corev1.Pod) error {
	for _, p := range pods {
		uid := p.UID
		err := s.r.client.Delete(ctx, p, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			s.podEvent(corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
			return fmt.Errorf("deleting pod %s: %w", podKey(p), err)
		}
		s.r.exp.Deleted(s.key, uid)
		s.deleted++
		s.podEvent(corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
	}
	return nil
}

func isSuspended(job *batchv1.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

// newestFirst sorts pods so that those least worth keeping (not ready, newest) come first.
func newestFirst(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := podutils.IsPodReady(out[i]), podutils.IsPodReady(out[j])
		if ri != rj {
			return !ri
		}
		return out[j].CreationTimestamp.Before(&out[i].CreationTimestamp)
	})
	return out
}

// earlier returns whichever result asks to be called back sooner.
func earlier(a, b reconcile.Result) reconcile.Result {
	if b.RequeueAfter > 0 && (a.RequeueAfter == 0 || b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

func ptr[T any](v T) *T { return &v }
