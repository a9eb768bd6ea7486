package rayjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/raydashboard"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// pass is one reconcile of one RayJob: the state handlers change job.Status
// in memory and run() writes it once at the end if it differs from orig.
type pass struct {
	r    *reconciler
	log  logr.Logger
	job  *rayv1.RayJob
	orig *rayv1.RayJob
	now  time.Time
}

func (p *pass) requeue() reconcile.Result {
	return reconcile.Result{RequeueAfter: p.r.opts.RequeueAfter}
}

func (p *pass) event(eventType, reason, format string, args ...any) {
	p.r.opts.Recorder.Eventf(p.job, eventType, reason, format, args...)
}

func (p *pass) status() *rayv1.RayJobStatus { return &p.job.Status }

func (p *pass) run(ctx context.Context) (reconcile.Result, error) {
	if !p.job.DeletionTimestamp.IsZero() {
		return p.finalize(ctx)
	}
	if err := Validate(p.job); err != nil {
		return p.validationFailed(ctx, err)
	}
	var (
		res reconcile.Result
		err error
	)
	switch st := p.status().JobDeploymentStatus; st {
	case rayv1.JobDeploymentStatusNew:
		res, err = p.onNew(ctx)
	case rayv1.JobDeploymentStatusInitializing:
		res, err = p.onInitializing(ctx)
	case rayv1.JobDeploymentStatusWaiting:
		res, err = p.onWaiting()
	case rayv1.JobDeploymentStatusRunning:
		res, err = p.onRunning(ctx)
	case rayv1.JobDeploymentStatusSuspending, rayv1.JobDeploymentStatusRetrying:
		res, err = p.onReleasing(ctx)
	case rayv1.JobDeploymentStatusSuspended:
		res, err = p.onSuspended()
	case rayv1.JobDeploymentStatusComplete, rayv1.JobDeploymentStatusFailed:
		return p.onFinished(ctx)
	case rayv1.JobDeploymentStatusValidationFailed:
		// The spec is valid again, but KubeRay has no way back from here either:
		// the user recreates the RayJob.
		return reconcile.Result{}, nil
	default:
		p.log.Info("unknown jobDeploymentStatus; leaving the RayJob alone", "jobDeploymentStatus", st)
		return reconcile.Result{}, nil
	}
	if ve := (*ValidationError)(nil); errors.As(err, &ve) {
		return p.validationFailed(ctx, err) // a selected cluster the job cannot use
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	p.countAndMaybeRetry()
	if err := p.writeStatus(ctx); err != nil {
		return reconcile.Result{}, err
	}
	return res, nil
}

// validationFailed parks a RayJob the controller cannot run.
func (p *pass) validationFailed(ctx context.Context, err error) (reconcile.Result, error) {
	reason := EventInvalidSpec
	var ve *ValidationError
	if errors.As(err, &ve) {
		reason = ve.Reason
	}
	st := p.status()
	if st.JobDeploymentStatus != rayv1.JobDeploymentStatusValidationFailed || st.Message != err.Error() {
		p.event(corev1.EventTypeWarning, reason, "%s/%s: %v", p.job.Namespace, p.job.Name, err)
	}
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusValidationFailed
	st.Reason = rayv1.ValidationFailed
	st.Message = err.Error()
	return reconcile.Result{}, p.writeStatus(ctx)
}

// onNew fixes the submission id and the cluster name in status before any
// cluster is created or job submitted, so a later pass (or a restarted
// controller) reuses them instead of making new ones.
func (p *pass) onNew(ctx context.Context) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(p.job, rayparams.FinalizerRayJob) {
		if err := p.setFinalizer(ctx, controllerutil.AddFinalizer); err != nil {
			return reconcile.Result{}, err
		}
	}
	st := p.status()
	if submissionMode(p.job) != rayv1.InteractiveMode && st.JobId == "" {
		st.JobId = p.job.Spec.JobId
		if st.JobId == "" {
			st.JobId = newRandomName(p.job.Name)
		}
	}
	if st.RayClusterName == "" {
		st.RayClusterName = p.job.Spec.ClusterSelector[rayparams.LabelCluster]
		if st.RayClusterName == "" {
			st.RayClusterName = newRandomName(p.job.Name)
		}
	}
	st.JobStatus = rayv1.JobStatusNew
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusInitializing
	st.StartTime = p.timestamp(p.now)
	return p.requeue(), nil
}

// onInitializing gets the cluster up (or finds the selected one), waits for
// it to be ready, and starts the submission.
func (p *pass) onInitializing(ctx context.Context) (reconcile.Result, error) {
	if p.suspendIfAsked() || p.deadlinePassed() {
		return p.requeue(), nil
	}
	cluster, err := p.getOrCreateCluster(ctx)
	if errors.Is(err, errSelectedClusterMissing) {
		return p.requeue(), nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	st := p.status()
	st.RayClusterStatus = cluster.Status
	if st.DashboardURL == "" {
		if cluster.Status.State != rayv1.Ready {
			p.log.V(1).Info("waiting for the RayCluster to be ready", "rayCluster", cluster.Name, "state", cluster.Status.State)
			return p.requeue(), nil
		}
		url, err := p.statusDashboardURL(ctx, cluster)
		if err != nil {
			return reconcile.Result{}, err
		}
		st.DashboardURL = url
	}
	switch submissionMode(p.job) {
	case rayv1.InteractiveMode:
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusWaiting
		return p.requeue(), nil
	case rayv1.K8sJobMode:
		if err := p.createSubmitterIfMissing(ctx, cluster); err != nil {
			return reconcile.Result{}, err
		}
	}
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusRunning
	return p.requeue(), nil
}

// onWaiting holds an InteractiveMode RayJob until the user names the job in spec.jobId.
func (p *pass) onWaiting() (reconcile.Result, error) {
	if p.job.Spec.JobId == "" {
		return p.requeue(), nil
	}
	p.status().JobId = p.job.Spec.JobId
	p.status().JobDeploymentStatus = rayv1.JobDeploymentStatusRunning
	return p.requeue(), nil
}

// onRunning submits (HTTPMode), watches the submitter (K8sJobMode,
// SidecarMode) and mirrors the Ray job's status until it ends.
func (p *pass) onRunning(ctx context.Context) (reconcile.Result, error) {
	if p.suspendIfAsked() || p.deadlinePassed() || p.gracePeriodPassed() {
		return p.requeue(), nil
	}
	cluster, err := p.getOrCreateCluster(ctx)
	if errors.Is(err, errSelectedClusterMissing) {
		return p.requeue(), nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := p.reconcileHeadService(ctx, cluster); err != nil {
		return reconcile.Result{}, err
	}
	st := p.status()
	var finishedAt *time.Time
	if hasSubmitter(p.job) {
		failed, fin, err := p.checkSubmitter(ctx, cluster)
		if err != nil {
			p.log.Info("cannot check the submitter yet", "error", err.Error())
			return p.requeue(), nil
		}
		if fin != nil && !p.now.Before(fin.Add(SubmitterFinishedTimeout)) {
			st.JobStatus = rayv1.JobStatusFailed
			st.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
			st.Reason = rayv1.JobDeploymentStatusTransitionGracePeriodExceeded
			st.Message = fmt.Sprintf("The RayJob submitter finished at %v but the ray job did not reach terminal state within %v",
				fin.Format(time.DateTime), SubmitterFinishedTimeout)
			return p.requeue(), nil
		}
		if failed {
			return p.requeue(), nil
		}
		finishedAt = fin
	}

	ctx, api, err := p.jobsAPI(ctx, cluster)
	if err != nil {
		p.log.Info("cannot reach the dashboard yet", "rayCluster", cluster.Name, "error", err.Error())
		return p.requeue(), nil
	}
	info, err := api.GetJobInfo(ctx, st.JobId)
	switch {
	case raydashboard.IsNotFound(err) && submissionMode(p.job) == rayv1.HTTPMode:
		p.submit(ctx, api)
		return p.requeue(), nil
	case raydashboard.IsNotFound(err) && finishedAt != nil:
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
		st.Reason = rayv1.AppFailed
		st.Message = "Submitter completed but Ray job not found in RayCluster."
		return p.requeue(), nil
	case raydashboard.IsNotFound(err):
		p.log.V(1).Info("the submitter has not submitted the Ray job yet", "jobId", st.JobId)
		return p.requeue(), nil
	case err != nil:
		p.log.Info("cannot read the Ray job's status", "jobId", st.JobId, "error", err.Error())
		return p.requeue(), nil
	}

	jobStatus := rayv1.JobStatus(info.Status)
	terminal := rayv1.IsJobTerminal(jobStatus)
	if hasSubmitter(p.job) {
		// The submitter follows the logs to the end; wait for it as KubeRay does.
		terminal = terminal && finishedAt != nil
	}
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusRunning
	st.Reason = ""
	if terminal {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusComplete
		if jobStatus == rayv1.JobStatusFailed {
			st.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
			st.Reason = rayv1.AppFailed
		}
	}
	st.RayClusterStatus = cluster.Status
	st.JobStatus = jobStatus
	st.Message = info.Text()
	if jobStatus == rayv1.JobStatusFailed && p.r.opts.OfflinePods {
		st.Message = OfflineNote + st.Message
	}
	if ms := info.StartTime; ms != nil && *ms != 0 {
		st.RayJobStatusInfo.StartTime = p.timestamp(time.UnixMilli(*ms))
	}
	if ms := info.EndTime; ms != nil && *ms != 0 {
		st.RayJobStatusInfo.EndTime = p.timestamp(time.UnixMilli(*ms))
	}
	return p.requeue(), nil
}

// submit sends the job to the dashboard under the id fixed in status.
func (p *pass) submit(ctx context.Context, api JobsAPI) {
	spec := &p.job.Spec
	env, _ := runtimeEnv(spec.RuntimeEnvYAML)               // validated
	res, _ := entrypointResources(spec.EntrypointResources) // validated
	req := raydashboard.SubmitRequest{
		Entrypoint:          spec.Entrypoint,
		SubmissionID:        p.status().JobId,
		RuntimeEnv:          env,
		Metadata:            spec.Metadata,
		EntrypointNumCPUs:   spec.EntrypointNumCpus,
		EntrypointNumGPUs:   spec.EntrypointNumGpus,
		EntrypointResources: res,
	}
	_, err := api.SubmitJob(ctx, req)
	switch {
	case err == nil:
		p.log.Info("submitted the Ray job", "jobId", req.SubmissionID)
		p.event(corev1.EventTypeNormal, EventSubmitted, "Submitted Ray job %s to RayCluster %s/%s", req.SubmissionID, p.job.Namespace, p.status().RayClusterName)
	case raydashboard.IsAlreadySubmitted(err):
		p.log.Info("the Ray job was submitted before", "jobId", req.SubmissionID)
	default:
		p.log.Info("submitting the Ray job failed; retrying", "jobId", req.SubmissionID, "error", err.Error())
		p.event(corev1.EventTypeWarning, EventFailedSubmit, "Failed to submit Ray job %s: %v", req.SubmissionID, err)
	}
}

// onReleasing deletes the cluster and the submitter, then resets the status:
// to Suspended after a suspend, to New for a retry.
func (p *pass) onReleasing(ctx context.Context) (reconcile.Result, error) {
	clusterGone, err := p.deleteCluster(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	submitterGone, err := p.deleteSubmitter(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !clusterGone || !submitterGone {
		p.log.V(1).Info("waiting for the cluster and the submitter to be deleted")
		return p.requeue(), nil
	}
	st := p.status()
	st.RayClusterStatus = rayv1.RayClusterStatus{}
	st.RayClusterName = ""
	st.DashboardURL = ""
	st.JobId = ""
	st.Message = ""
	st.Reason = ""
	st.RayJobStatusInfo = rayv1.RayJobStatusInfo{}
	st.JobStatus = rayv1.JobStatusNew
	if st.JobDeploymentStatus == rayv1.JobDeploymentStatusSuspending {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusSuspended
	} else {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusNew
	}
	return p.requeue(), nil
}

// onSuspended starts over once spec.suspend is false again.
func (p *pass) onSuspended() (reconcile.Result, error) {
	if p.job.Spec.Suspend {
		return p.requeue(), nil
	}
	p.status().JobStatus = rayv1.JobStatusNew
	p.status().JobDeploymentStatus = rayv1.JobDeploymentStatusNew
	return p.requeue(), nil
}

// onFinished cleans up after the end, as KubeRay v1.7 does: never a selected (existing) cluster,
// else spec.deletionStrategy when set (deletion.go), else shutdownAfterJobFinishes once
// ttlSecondsAfterFinished has passed since the end.
func (p *pass) onFinished(ctx context.Context) (reconcile.Result, error) {
	switch {
	case usesClusterSelector(p.job):
		// KubeRay v1.7 stops here even for a DeleteSelf rule, which its validation allows.
		return reconcile.Result{}, nil
	case p.job.Spec.DeletionStrategy != nil:
		return p.applyDeletionStrategy(ctx)
	case !p.job.Spec.ShutdownAfterJobFinishes:
		return reconcile.Result{}, nil
	}
	shutdown := p.endTime().Add(time.Duration(p.job.Spec.TTLSecondsAfterFinished) * time.Second)
	if p.now.Before(shutdown) {
		return p.requeueAt(shutdown), nil
	}
	if p.r.opts.DeleteRayJobAfterJobFinishes {
		return reconcile.Result{}, p.r.client.Delete(ctx, p.job)
	}
	_, err := p.deleteCluster(ctx)
	return reconcile.Result{}, err
}

// finalize stops a Ray job that is still running and releases the RayJob.
func (p *pass) finalize(ctx context.Context) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(p.job, rayparams.FinalizerRayJob) {
		return reconcile.Result{}, nil
	}
	st := p.status()
	if !rayv1.IsJobTerminal(st.JobStatus) && st.JobId != "" && st.RayClusterName != "" {
		cluster := &rayv1.RayCluster{}
		err := p.r.client.Get(ctx, clusterKey(p.job), cluster)
		if err == nil {
			if ctx, api, err := p.jobsAPI(ctx, cluster); err == nil {
				if err := api.StopJob(ctx, st.JobId); err != nil {
					p.log.Info("could not stop the Ray job; releasing the RayJob anyway", "jobId", st.JobId, "error", err.Error())
				} else {
					p.event(corev1.EventTypeNormal, EventStopped, "Stopped Ray job %s", st.JobId)
				}
			}
		}
	}
	return reconcile.Result{}, p.setFinalizer(ctx, controllerutil.RemoveFinalizer)
}

// setFinalizer adds or removes the RayJob's finalizer with a patch of metadata.finalizers alone (and
// the resourceVersion, so a concurrent write is a conflict): a whole-object update from rayctl's Go
// types would drop the fields of newer KubeRay versions those types lack.
func (p *pass) setFinalizer(ctx context.Context, change func(client.Object, string) bool) error {
	orig := p.job.DeepCopy()
	change(p.job, rayparams.FinalizerRayJob)
	return p.r.client.Patch(ctx, p.job, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// suspendIfAsked moves Initializing or Running to Suspending when spec.suspend is set.
func (p *pass) suspendIfAsked() bool {
	if !p.job.Spec.Suspend {
		return false
	}
	p.log.Info("suspending the RayJob", "from", p.status().JobDeploymentStatus)
	p.status().JobDeploymentStatus = rayv1.JobDeploymentStatusSuspending
	return true
}

// deadlinePassed fails a RayJob older than spec.activeDeadlineSeconds.
func (p *pass) deadlinePassed() bool {
	st := p.status()
	d := p.job.Spec.ActiveDeadlineSeconds
	if d == nil || st.StartTime == nil || p.now.Before(st.StartTime.Add(time.Duration(*d)*time.Second)) {
		return false
	}
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
	st.Reason = rayv1.DeadlineExceeded
	st.Message = fmt.Sprintf("The RayJob has passed the activeDeadlineSeconds. StartTime: %v. ActiveDeadlineSeconds: %d",
		st.StartTime.UTC().Format(time.RFC3339), *d)
	return true
}

// gracePeriodPassed closes a RayJob whose Ray job ended long ago but that is
// still Running (e.g. a submitter that never finished).
func (p *pass) gracePeriodPassed() bool {
	st := p.status()
	end := st.RayJobStatusInfo.EndTime
	if !rayv1.IsJobTerminal(st.JobStatus) || end == nil || p.now.Before(end.Add(TransitionGracePeriod)) {
		return false
	}
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusComplete
	if st.JobStatus == rayv1.JobStatusFailed {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
	}
	st.Reason = rayv1.JobDeploymentStatusTransitionGracePeriodExceeded
	st.Message = "JobDeploymentStatus does not transition to Complete or Failed within the grace period after JobStatus reaches a terminal state."
	return true
}

// countAndMaybeRetry keeps status.succeeded/failed and turns a Failed RayJob
// with attempts left (spec.backoffLimit) into Retrying; a missed deadline is final.
func (p *pass) countAndMaybeRetry() {
	st := p.status()
	failed, succeeded := ptr.Deref(st.Failed, 0), ptr.Deref(st.Succeeded, 0)
	if st.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed {
		failed++
	}
	if st.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete && st.JobStatus == rayv1.JobStatusSucceeded {
		succeeded++
	}
	st.Failed, st.Succeeded = ptr.To(failed), ptr.To(succeeded)
	limit := p.job.Spec.BackoffLimit
	if st.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed && limit != nil && failed < *limit+1 && st.Reason != rayv1.DeadlineExceeded {
		p.log.Info("retrying the RayJob", "failed", failed, "backoffLimit", *limit)
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusRetrying
	}
}

// writeStatus writes status if this pass changed it. The write carries the
// resourceVersion read, so a pass acting on a stale copy fails instead of
// overwriting (and, e.g., replacing a job id already in use).
func (p *pass) writeStatus(ctx context.Context) error {
	st, old := p.status(), p.orig.Status
	entered := st.JobDeploymentStatus != old.JobDeploymentStatus
	if entered && (st.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete || st.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed) {
		st.EndTime = p.timestamp(p.now)
	}
	st.ObservedGeneration = p.job.Generation
	if equality.Semantic.DeepEqual(*st, old) {
		return nil
	}
	if err := p.r.client.Status().Update(ctx, p.job); err != nil {
		return err
	}
	p.r.opts.Hooks.StatusWritten(ctx, p.job, chain.F("jobDeploymentStatus", st.JobDeploymentStatus), chain.F("jobStatus", st.JobStatus))
	if entered {
		p.r.opts.Hooks.Transition(ctx, p.job, string(old.JobDeploymentStatus), string(st.JobDeploymentStatus))
		p.log.Info("RayJob moved", "from", old.JobDeploymentStatus, "to", st.JobDeploymentStatus, "jobStatus", st.JobStatus)
		p.announce(old.JobDeploymentStatus)
	}
	return nil
}

// announce records an event for the state the RayJob just entered.
func (p *pass) announce(from rayv1.JobDeploymentStatus) {
	st := p.status()
	switch st.JobDeploymentStatus {
	case rayv1.JobDeploymentStatusComplete:
		p.event(corev1.EventTypeNormal, EventCompleted, "Ray job %s ended with status %s", st.JobId, st.JobStatus)
	case rayv1.JobDeploymentStatusFailed:
		p.event(corev1.EventTypeWarning, EventFailed, "RayJob failed (%s): %s", st.Reason, st.Message)
	case rayv1.JobDeploymentStatusRetrying:
		p.event(corev1.EventTypeWarning, EventFailed, "RayJob attempt %d failed (%s): %s; retrying on a new RayCluster",
			ptr.Deref(st.Failed, 0), st.Reason, st.Message)
	case rayv1.JobDeploymentStatusSuspended:
		p.event(corev1.EventTypeNormal, EventSuspended, "RayJob suspended (was %s)", from)
	}
}

// timestamp is t as the API stores it (whole seconds), so comparing a value
// computed now with one read back does not see a difference.
func (p *pass) timestamp(t time.Time) *metav1.Time {
	return &metav1.Time{Time: t.Truncate(time.Second)}
}
