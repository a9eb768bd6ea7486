// Package raycronjob is the RayCronJob controller: it creates a RayJob from a RayCronJob's jobTemplate
// at each time its cron schedule names, as KubeRay v1.7 does. Schedules are read as the standard five
// cron fields or a descriptor such as "@hourly" or "@every 30s", in spec.timeZone (an IANA name) or the
// controller's local zone; a schedule may not name a zone itself (TZ=, CRON_TZ=). Each RayJob is called
// <cronjob>-<scheduled time in minutes since the epoch> (seconds for schedules finer than a minute), is
// labelled ray.io/cronjob-name and annotated with its scheduled time, and is owned by the RayCronJob, so
// deleting the RayCronJob deletes its RayJobs. spec.suspend stops new RayJobs and leaves running ones.
//
// The controller reads RayCronJobs as unstructured objects and copies spec.jobTemplate into the RayJob
// as it stands, so fields of KubeRay v1.7 that rayctl's Go types (KubeRay v1.6.2's) lack reach the
// RayJob unchanged.
//
// Where KubeRay v1.7 would create one RayJob for every tick missed while it was not running, this
// controller creates one for the latest missed tick only (as batch/v1 CronJobs do) and says in an event
// how many it skipped: a laptop waking from a night's sleep should not start hundreds of Ray clusters.
package raycronjob

import (
	"context"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // spec.timeZone must resolve on machines without a zoneinfo database

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/ray/rayjob"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// Name is the controller's name, in logs, metrics and --controllers.
const Name = "raycronjob"

// Event reasons.
const (
	// EventInvalidSpec: the RayCronJob cannot be scheduled; the message says why.
	EventInvalidSpec = "InvalidRayCronJobSpec"
	// EventSuspended: spec.suspend holds new RayJobs back.
	EventSuspended = "SuspendedRayCronJob"
	// EventCreatedRayJob: a RayJob was created for a scheduled time.
	EventCreatedRayJob = "CreatedRayJob"
	// EventMissedSchedules: ticks passed while nothing scheduled them; only the latest ran.
	EventMissedSchedules = "MissedSchedules"
)

// MaxNameLength leaves room in a RayJob's name for the scheduled-time suffix.
const MaxNameLength = rayjob.MaxNameLength - 11

// errorRequeue is how soon a failed write is tried again (KubeRay: 3 s).
const errorRequeue = 3 * time.Second

// reconciler creates the RayJobs of RayCronJobs.
type reconciler struct {
	client   client.Client
	recorder record.EventRecorder
	hooks    *chainhooks.Hooks
	now      func() time.Time
}

// Setup is the ctrlset.SetupFunc of this controller (pkg/controlplane registers it in its group): For
// RayCronJobs (no predicates), Owns the RayJobs they create.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	r := &reconciler{client: mgr.GetClient(), recorder: env.Recorder, hooks: env.Hooks, now: time.Now}
	return env.Hooks.NewControllerManagedBy(mgr).
		For(newCronJob()).
		Owns(&rayv1.RayJob{}).
		MaxConcurrentReconciles(env.ReconcileConcurrency).
		Complete(r)
}

// newCronJob is an empty unstructured RayCronJob.
func newCronJob() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rayv1.GroupVersion.WithKind("RayCronJob"))
	return u
}

// Spec is what the controller reads of a RayCronJob's spec: KubeRay v1.7's fields.
type Spec struct {
	// Schedule is the cron schedule.
	Schedule string `json:"schedule"`
	// TimeZone is the IANA zone the schedule is read in; nil means the controller's local zone.
	TimeZone *string `json:"timeZone,omitempty"`
	// Suspend holds new RayJobs back.
	Suspend *bool `json:"suspend,omitempty"`
	// JobTemplate is the spec of each RayJob.
	JobTemplate rayv1.RayJobSpec `json:"jobTemplate"`
}

// Reconcile creates the RayJob of the latest scheduled time that has passed and is not yet recorded in
// status.lastScheduleTime, and requeues for the next one.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cj := newCronJob()
	if err := r.client.Get(ctx, req.NamespacedName, cj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cj.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	spec, sched, err := Validate(cj)
	if err != nil {
		r.recorder.Eventf(cj, corev1.EventTypeWarning, EventInvalidSpec, "%s/%s: %v", cj.GetNamespace(), cj.GetName(), err)
		return ctrl.Result{}, nil // a new generation brings the next reconcile
	}
	if spec.Suspend != nil && *spec.Suspend {
		r.recorder.Event(cj, corev1.EventTypeNormal, EventSuspended, "RayCronJob suspended, no new RayJobs will be created")
		return ctrl.Result{}, nil
	}
	now := r.now()
	since := cj.GetCreationTimestamp().Time
	if s, ok, _ := unstructured.NestedString(cj.Object, "status", "lastScheduleTime"); ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			since = t
		}
	}
	due, missed, next := dueTimes(sched, since, now)
	if due.IsZero() {
		return ctrl.Result{RequeueAfter: next.Sub(now)}, nil
	}
	if missed > 0 {
		r.recorder.Eventf(cj, corev1.EventTypeWarning, EventMissedSchedules,
			"%d scheduled times passed unscheduled before %s; only the latest runs", missed, due.UTC().Format(time.RFC3339))
	}
	job, err := r.rayJobFor(cj, due)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch err := r.client.Create(ctx, job); {
	case err == nil:
		r.recorder.Eventf(cj, corev1.EventTypeNormal, EventCreatedRayJob, "Created RayJob %s/%s for %s", job.GetNamespace(), job.GetName(), due.UTC().Format(time.RFC3339))
	case apierrors.IsAlreadyExists(err):
		// An earlier pass created it and then failed to record the time: record it now.
		log.V(1).Info("RayJob for this time exists", "rayjob", job.GetName())
	default:
		return ctrl.Result{RequeueAfter: errorRequeue}, fmt.Errorf("creating RayJob %s: %w", job.GetName(), err)
	}
	stamp := due.UTC().Format(time.RFC3339)
	patch := []byte(fmt.Sprintf(`{"status":{"lastScheduleTime":%q}}`, stamp))
	if err := r.client.Status().Patch(ctx, cj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return ctrl.Result{RequeueAfter: errorRequeue}, fmt.Errorf("recording lastScheduleTime: %w", err)
	}
	r.hooks.StatusWritten(ctx, cj, chain.F("lastScheduleTime", stamp))
	return ctrl.Result{RequeueAfter: max(next.Sub(now), 0)}, nil
}

// dueTimes walks sched from since (exclusive) to now: due is the latest scheduled time at or before
// now (zero if none), missed the number of earlier ones passed over, next the first after now.
func dueTimes(sched cron.Schedule, since, now time.Time) (due time.Time, missed int, next time.Time) {
	for t := sched.Next(since); ; t = sched.Next(t) {
		if t.IsZero() || t.After(now) {
			return due, missed, t
		}
		if !due.IsZero() {
			missed++
		}
		due = t
	}
}

// Validate checks a RayCronJob as KubeRay v1.7 does (name length, a schedule without a zone of its own,
// a loadable time zone, a valid RayJob template) and returns its spec and parsed schedule.
func Validate(cj *unstructured.Unstructured) (*Spec, cron.Schedule, error) {
	if len(cj.GetName()) > MaxNameLength {
		return nil, nil, fmt.Errorf("RayCronJob name should be no more than %d characters", MaxNameLength)
	}
	raw, _, _ := unstructured.NestedMap(cj.Object, "spec")
	spec := &Spec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, spec); err != nil {
		return nil, nil, fmt.Errorf("reading spec: %w", err)
	}
	if strings.Contains(spec.Schedule, "TZ") {
		return nil, nil, fmt.Errorf("cannot use TZ or CRON_TZ in schedule, use the timeZone field instead")
	}
	line := spec.Schedule
	if tz := spec.TimeZone; tz != nil {
		if *tz == "" {
			return nil, nil, fmt.Errorf("timeZone must not be empty; omit it to use the controller's local time zone")
		}
		if _, err := time.LoadLocation(*tz); err != nil {
			return nil, nil, fmt.Errorf("invalid time zone: %w", err)
		}
		line = "CRON_TZ=" + *tz + " " + line
	}
	sched, err := cron.ParseStandard(line)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid cron schedule %q: %w", spec.Schedule, err)
	}
	probe := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: cj.GetName() + "-0", Namespace: cj.GetNamespace()}, Spec: spec.JobTemplate}
	if err := rayjob.Validate(probe); err != nil {
		return nil, nil, fmt.Errorf("invalid RayJob template: %w", err)
	}
	return spec, sched, nil
}

// rayJobFor builds the RayJob of cj for the scheduled time t, its spec a copy of cj's jobTemplate.
func (r *reconciler) rayJobFor(cj *unstructured.Unstructured, t time.Time) (*unstructured.Unstructured, error) {
	tmpl, _, err := unstructured.NestedMap(cj.Object, "spec", "jobTemplate")
	if err != nil {
		return nil, err
	}
	job := &unstructured.Unstructured{Object: map[string]any{"spec": tmpl}}
	job.SetGroupVersionKind(rayv1.GroupVersion.WithKind("RayJob"))
	job.SetName(JobName(cj.GetName(), t))
	job.SetNamespace(cj.GetNamespace())
	job.SetLabels(map[string]string{rayparams.LabelCronJobName: cj.GetName()})
	job.SetAnnotations(map[string]string{rayparams.AnnotationCronJobScheduledTimestamp: t.UTC().Format(time.RFC3339)})
	if err := controllerutil.SetControllerReference(cj, job, r.client.Scheme()); err != nil {
		return nil, err
	}
	return job, nil
}

// JobName is the name of the RayJob a RayCronJob called cronJob creates for the scheduled time t:
// the minutes since the epoch (KubeRay's form) when t falls on a whole minute, else the seconds.
func JobName(cronJob string, t time.Time) string {
	if t.Second() == 0 && t.Nanosecond() == 0 {
		return fmt.Sprintf("%s-%d", cronJob, t.Unix()/60)
	}
	return fmt.Sprintf("%s-%d", cronJob, t.Unix())
}
