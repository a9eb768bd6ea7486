// Package rayjob is the RayJob controller: for each ray.io/v1 RayJob it
// creates (or selects) a RayCluster, waits until the cluster is ready, has the
// Ray job submitted to the cluster's dashboard (by a submitter batch Job, a
// head-Pod sidecar, or its own HTTP request), follows the job to its end and
// cleans up (shutdownAfterJobFinishes, or spec.deletionStrategy's policies and
// rules as KubeRay v1.7 runs them: deletion.go), walking the jobDeploymentStatus
// states KubeRay 1.5 uses:
//
//	New → Initializing → Running → Complete | Failed
//	              ↘ Waiting (InteractiveMode) ↗
//	Initializing/Running → Suspending → Suspended → New   (spec.suspend)
//	Failed → Retrying → New                                (spec.backoffLimit)
//	ValidationFailed                                       (a spec it cannot run)
//
// The submission id is written to status.jobId before anything is submitted,
// and a dashboard's "submission_id already used" answer counts as submitted,
// so repeated reconciles and controller restarts never run a job twice.
package rayjob

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/raydashboard"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// JobsAPI is the part of the Ray Jobs API the controller calls;
// *raydashboard.Client implements it.
type JobsAPI interface {
	// SubmitJob submits; an error for which raydashboard.IsAlreadySubmitted holds means it was submitted before.
	SubmitJob(ctx context.Context, req raydashboard.SubmitRequest) (string, error)
	// GetJobInfo reads a job; raydashboard.IsNotFound(err) when the dashboard does not know it.
	GetJobInfo(ctx context.Context, submissionID string) (*raydashboard.JobInfo, error)
	// StopJob stops a job; an ended or unknown job is not an error.
	StopJob(ctx context.Context, submissionID string) error
}

// Options configures the controller. The zero value works for a controller
// that reaches head Pod IPs directly.
type Options struct {
	// ClusterDNS says that Service names (<svc>.<ns>.svc.<domain>) resolve from
	// this process; the default Resolver then uses the head Service instead of
	// the head Pod IP.
	ClusterDNS bool
	// ClusterDomain is the Services' DNS domain; empty means cluster.local.
	ClusterDomain string
	// Resolver finds the dashboard of a RayCluster; nil means
	// DefaultResolver(ClusterDNS, ClusterDomain). Tests point it at an
	// in-process head.
	Resolver Resolver
	// NewJobsAPI returns the client for a dashboard base URL; nil means a raydashboard client through the
	// chain transport (chainhooks.Transport).
	NewJobsAPI func(baseURL string) JobsAPI
	// Secrets reads the token Secrets of clusters whose Ray requires one; nil means the reconciler's
	// client. Setup uses the manager's API reader (no informer on every Secret).
	Secrets client.Reader
	// DeleteRayJobAfterJobFinishes makes shutdownAfterJobFinishes delete the
	// RayJob itself rather than its RayCluster (KubeRay's
	// DELETE_RAYJOB_CR_AFTER_JOB_FINISHES).
	DeleteRayJobAfterJobFinishes bool
	// OfflinePods says the node's pods reach nothing beyond it (ctrlset.Env.OfflinePods): a failed job's
	// message then begins with OfflineNote.
	OfflinePods bool
	// ReconcilerOptions are the recorder of the RayJob's events, the chain hooks, the number of
	// workers, the clock and the polling period of a RayJob in progress (0 means DefaultRequeue).
	ctrlset.ReconcilerOptions
}

// OfflineNote begins the message of a Ray job that failed on a node whose pods reach nothing beyond it,
// before what Ray says.
const OfflineNote = "This node's pods are offline (rayctl up --pod-egress=off): a job that downloads (runtime_env pip or " +
	"conda packages, a remote working_dir) cannot succeed here; start rayctl without --pod-egress=off. Ray says: "

func (o Options) withDefaults() Options {
	if o.Resolver == nil {
		o.Resolver = DefaultResolver(o.ClusterDNS, o.ClusterDomain)
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = rayparams.DefaultClusterDomain
	}
	if o.NewJobsAPI == nil {
		o.NewJobsAPI = func(u string) JobsAPI { return raydashboard.NewDialing(u, nil, chainhooks.Transport) }
	}
	o.ReconcilerOptions = o.ReconcilerOptions.WithDefaults(DefaultRequeue)
	return o
}

// reconciler reconciles RayJobs.
type reconciler struct {
	client client.Client
	opts   Options
}

// newReconciler returns a reconciler that reads and writes through c.
func newReconciler(c client.Client, opts Options) *reconciler {
	opts = opts.withDefaults()
	if opts.Secrets == nil {
		opts.Secrets = c
	}
	return &reconciler{client: c, opts: opts}
}

// Setup is the ctrlset.SetupFunc of this controller with the default Options (pkg/controlplane
// registers it in its group).
func Setup(mgr manager.Manager, env ctrlset.Env) error { return Options{}.Setup(mgr, env) }

// Setup registers the RayJob controller with these options, in the ctrlset.SetupFunc shape (tests
// register Options{Resolver: …}.Setup). The registry's Env supplies the event recorder, the chain hooks
// and the reconcile concurrency; the requeue period stays the RayJob's own (3 s). The manager's scheme
// must know ray.io/v1, core/v1 and batch/v1.
func (o Options) Setup(mgr manager.Manager, env ctrlset.Env) error {
	if err := ctrlset.RequireKinds(mgr.GetScheme(), "rayjob", rayv1.GroupVersion, "RayJob", "RayCluster"); err != nil {
		return err
	}
	o.ReconcilerOptions = o.ReconcilerOptions.FromEnv(env)
	o.OfflinePods = o.OfflinePods || env.OfflinePods
	if o.NewJobsAPI == nil && env.PodDial != nil {
		o.NewJobsAPI = func(u string) JobsAPI { return raydashboard.NewDialing(u, env.PodDial, chainhooks.Transport) }
	}
	if o.Secrets == nil {
		o.Secrets = mgr.GetAPIReader()
	}
	return newReconciler(mgr.GetClient(), o).setupWithManager(mgr)
}

// setupWithManager watches every change of RayJobs (no predicates, as KubeRay)
// and of the RayClusters, Services and batch Jobs they control — For RayJob,
// Owns RayCluster, Service and Job, each handler observed by the chain hooks.
func (r *reconciler) setupWithManager(mgr manager.Manager) error {
	return r.opts.Hooks.NewControllerManagedBy(mgr).
		For(&rayv1.RayJob{}).
		Owns(&rayv1.RayCluster{}).
		Owns(&corev1.Service{}).
		Owns(&batchv1.Job{}).
		MaxConcurrentReconciles(r.opts.MaxConcurrentReconciles).
		Complete(r)
}

// Reconcile moves one RayJob one step along its states.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	job := &rayv1.RayJob{}
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if m := job.Spec.ManagedBy; m != nil && *m != rayparams.ManagedByKubeRay {
		log.V(1).Info("skipping a RayJob managed by another controller", "managedBy", *m)
		return reconcile.Result{}, nil
	}
	p := &pass{r: r, log: log, job: job, orig: job.DeepCopy(), now: r.opts.Now()}
	res, err := p.run(ctx)
	if isConflict(err) {
		// Someone wrote the RayJob since our read; the watch brings the new version.
		log.V(1).Info("RayJob changed during reconcile; retrying", "error", err.Error())
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return res, err
}

// isConflict reports a write refused because the object changed since it was read.
func isConflict(err error) bool { return apierrors.IsConflict(err) }
