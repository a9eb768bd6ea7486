// Package job is the batch/v1 Job controller, as kube-controller-manager runs it: it creates a Job's pods
// from spec.template (parallelism, completions, NonIndexed and Indexed completion modes), counts those
// that succeed and fail, retries failures with an exponential delay up to spec.backoffLimit, enforces
// spec.activeDeadlineSeconds and spec.suspend, reports status (active, ready, terminating, succeeded,
// failed, startTime, completionTime, completedIndexes and the SuccessCriteriaMet, FailureTarget, Complete,
// Failed and Suspended conditions), records events, and deletes finished Jobs after
// spec.ttlSecondsAfterFinished. Pods' own restarts (restartPolicy OnFailure) are the kubelet's business:
// only pods in phase Failed count as failures.
//
// Simplification: counts are taken from the pods present (never decreasing) rather than tracked with the
// batch.kubernetes.io/job-tracking finalizer, so a pod removed before the controller saw it finish is not
// counted, and a running pod deleted by hand is replaced without counting as a failure.
package job

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/kube/workload"
)

// Name is the controller's name, in logs and metrics; events are reported as "job-controller".
const Name = "job"

// managedBy is the spec.managedBy value (or its absence) that leaves a Job to this controller.
const managedBy = "kubernetes.io/job-controller"

// Condition reasons and messages, as the real controller writes them.
const (
	reasonCompletionsReached   = "CompletionsReached"
	messageCompletionsReached  = "Reached expected number of succeeded pods"
	reasonBackoffLimitExceeded = "BackoffLimitExceeded"
	messageBackoffLimit        = "Job has reached the specified backoff limit"
	reasonDeadlineExceeded     = "DeadlineExceeded"
	messageDeadline            = "Job was active longer than specified deadline"
)

// Options configures the Job controller beyond what Env carries (tests shorten its back-off).
type Options struct {
	// BackoffBase is the delay before replacing the first failed pod, doubled for each further
	// failure up to MaxBackoff; zero means 10 s (and 6 min).
	BackoffBase, MaxBackoff time.Duration
	// Now tells the time; nil means time.Now.
	Now func() time.Time
}

// reconciler syncs one Job with its pods.
type reconciler struct {
	Options
	// client reads Jobs and pods through the manager's cache (which must hold every pod, unfiltered)
	// and writes to the API server.
	client   client.Client
	recorder record.EventRecorder
	hooks    *chainhooks.Hooks

	once sync.Once
	exp  *workload.Expectations
}

// Setup is the ctrlset.SetupFunc of this controller with the default Options (pkg/controlplane registers
// it in its group); env supplies its event recorder (events come from "job-controller" when registered
// as "job"), chain hooks and reconcile concurrency.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error { return Options{}.Setup(mgr, env) }

// Setup adds the Job controller with these options to mgr, in the ctrlset.SetupFunc shape: For Jobs,
// Owns their pods.
func (o Options) Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	r := &reconciler{Options: o, client: mgr.GetClient(), recorder: env.Recorder, hooks: env.Hooks}
	return env.Hooks.NewControllerManagedBy(mgr).
		For(&batchv1.Job{}).
		Owns(&corev1.Pod{}).
		MaxConcurrentReconciles(env.ReconcileConcurrency).
		Complete(r)
}

func (r *reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile brings the Job req names one step closer to what its spec asks.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.once.Do(func() { r.exp = workload.NewExpectations() })
	job := &batchv1.Job{}
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.exp.Forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if job.DeletionTimestamp != nil || (job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != managedBy) {
		return reconcile.Result{}, nil
	}
	if finished(job) {
		return r.expire(ctx, job)
	}
	pods, err := r.ownedPods(ctx, job)
	if err != nil {
		return reconcile.Result{}, err
	}
	s := &pass{r: r, job: job, key: req.NamespacedName, now: r.now(), status: job.Status.DeepCopy(), pods: classify(pods)}
	s.satisfied = r.exp.Satisfied(s.key, workload.ByName(pods))
	result, err := s.run(ctx)
	werr := r.writeStatus(ctx, job, s.status)
	events := s.podEvents
	if werr == nil {
		events = append(events, s.events...)
	}
	for _, e := range events {
		r.recorder.Event(job, e.kind, e.reason, e.message)
	}
	if err != nil || werr != nil {
		return reconcile.Result{}, errors.Join(err, werr)
	}
	if finished(job) {
		return r.expire(ctx, job)
	}
	return result, nil
}

// ownedPods lists the pods the Job controls.
func (r *reconciler) ownedPods(ctx context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: string(job.UID)})
	if job.Spec.Selector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(job.Spec.Selector); err != nil {
			return nil, err
		}
	}
	list := &corev1.PodList{}
	if err := r.client.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], job) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// writeStatus writes status if it differs from the Job's, and leaves the Job updated.
func (r *reconciler) writeStatus(ctx context.Context, job *batchv1.Job, status *batchv1.JobStatus) error {
	if apiequality.Semantic.DeepEqual(&job.Status, status) {
		return nil
	}
	updated := job.DeepCopy()
	updated.Status = *status
	if err := r.client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("writing the status of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if r.hooks != nil {
		r.hooks.StatusWritten(ctx, updated, chain.F("active", updated.Status.Active), chain.F("succeeded", updated.Status.Succeeded), chain.F("failed", updated.Status.Failed))
	}
	*job = *updated
	return nil
}

// expire deletes a finished Job once its ttlSecondsAfterFinished has passed, leaving its pods to the
// garbage collector, and otherwise asks to be called back then.
func (r *reconciler) expire(ctx context.Context, job *batchv1.Job) (reconcile.Result, error) {
	if job.Spec.TTLSecondsAfterFinished == nil {
		return reconcile.Result{}, nil
	}
	at := finishTime(job).Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second)
	if wait := at.Sub(r.now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	policy := metav1.DeletePropagationBackground
	uid, rv := job.UID, job.ResourceVersion
	err := r.client.Delete(ctx, job, &client.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, err
}

// finished reports a Job with a Complete or Failed condition.
func finished(job *batchv1.Job) bool {
	return hasCondition(&job.Status, batchv1.JobComplete) || hasCondition(&job.Status, batchv1.JobFailed)
}

// finishTime is when the Job finished.
func finishTime(job *batchv1.Job) time.Time {
	if job.Status.CompletionTime != nil {
		return job.Status.CompletionTime.Time
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return job.CreationTimestamp.Time
}

func findCondition(st *batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func hasCondition(st *batchv1.JobStatus, t batchv1.JobConditionType) bool {
	c := findCondition(st, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// setCondition sets a condition, keeping its transition time when its status does not change; it
// reports whether anything changed.
func setCondition(st *batchv1.JobStatus, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) bool {
	c := findCondition(st, t)
	if c == nil {
		st.Conditions = append(st.Conditions, batchv1.JobCondition{
			Type: t, Status: status, Reason: reason, Message: message,
			LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
		})
		return true
	}
	if c.Status == status && c.Reason == reason && c.Message == message {
		return false
	}
	if c.Status != status {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, message, metav1.NewTime(now)
	return true
}

// podKey names a pod for events.
func podKey(p *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}
