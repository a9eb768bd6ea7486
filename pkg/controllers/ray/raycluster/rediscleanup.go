package raycluster

import (
	"context"
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// Redis cleanup at deletion, as KubeRay v1.6 does it for a cluster with GCS fault tolerance: the
// RayCluster carries a finalizer; once it is deleted, its Pods go first (a running GCS would keep
// writing), then a batch Job `<cluster>-redis-cleanup` runs the head's image and deletes the cluster's
// storage namespace from Redis; when the Job has finished, succeeded or failed, the finalizer goes. A
// cleanup that hangs does not hold the RayCluster forever: after ray.io/gcs-ft-deletion-timeout seconds
// (300 by default) from the deletion the finalizer is removed anyway, with a Warning.
const (
	// DefaultGCSFTDeletionTimeout is that wait when the annotation is absent or not a positive number.
	DefaultGCSFTDeletionTimeout = 300 * time.Second

	// EventCreatedRedisCleanupJob and the next two are KubeRay's reasons; EventRedisCleanupFailed is
	// rayctl's own, on a Job that finished without success.
	EventCreatedRedisCleanupJob        = "CreatedRedisCleanupJob"
	EventFailedToCreateRedisCleanupJob = "FailedToCreateRedisCleanupJob"
	EventForceDeletedStuckCluster      = "ForceDeletedStuckCluster"
	EventRedisCleanupFailed            = "RedisCleanupFailed"

	// headTerminationRequeue is how soon a deleted cluster whose head is still terminating is looked at
	// again (the head Pod's deletion also comes back through Owns(Pod)).
	headTerminationRequeue = 10 * time.Second
	// cleanupJobDeadline bounds the Job (KubeRay's best effort of five minutes); the Ray container may
	// wait up to a minute for Redis (redisConnectRetries × redisConnectWaitMillis).
	cleanupJobDeadline     = 300
	redisConnectRetries    = "120"
	redisConnectWaitMillis = "500"
)

// redisCleanupScript is the cleanup Job's shell command: Ray's own cleanup function (what KubeRay's Job
// calls) with the head's Redis address, credentials and storage namespace from the environment. The
// user name is passed only when the head has one, so that Rays whose function lacks it still work.
func redisCleanupScript(withUsername bool) string {
	user := ""
	if withUsername {
		user = "username=os.environ.get('" + EnvRedisUsername + "', u.username or ''), "
	}
	return "echo \"Deleting storage namespace $" + EnvExternalStorageNS + " of this RayCluster's GCS from its Redis; " +
		"should this fail, delete the keys RAY${" + EnvExternalStorageNS + "}@* from Redis yourself\" && " +
		"python -c \"import os, sys; from urllib.parse import urlparse; " +
		"from ray._private.gcs_utils import cleanup_redis_storage; " +
		"a = os.environ.get('" + EnvRedisAddress + "', '').split(',')[0]; " +
		"u = urlparse(a if '://' in a else 'redis://' + a); " +
		"ok = cleanup_redis_storage(host=u.hostname, port=u.port, " + user +
		"password=os.environ.get('" + EnvRedisPassword + "', u.password or ''), use_ssl=u.scheme == 'rediss', " +
		"storage_namespace=os.environ.get('" + EnvExternalStorageNS + "')); " +
		"sys.exit(0 if ok else 1)\""
}

// RedisCleanupJobName is the name of c's Redis cleanup Job.
func RedisCleanupJobName(c *rayv1.RayCluster) string {
	return rayparams.CheckLabel(c.Name + "-redis-cleanup")
}

// RedisCleanupJob returns the Job KubeRay runs when a fault-tolerant c is deleted: the head Pod's Ray
// container alone (its image, environment and volumes; no probes), running redisCleanupScript once
// (no retries, five minutes at most, 200m CPU and 256Mi), labelled as a redis-cleanup node of c and
// owned by it. It does not modify c.
func RedisCleanupJob(c *rayv1.RayCluster, o BuildOptions) *batchv1.Job {
	pod := HeadPod(c, o)
	pod.Labels[rayparams.LabelNodeType] = string(rayv1.RedisCleanupNode)
	ray := pod.Spec.Containers[0]
	ray.Command = shellCommand()
	ray.Args = []string{redisCleanupScript(hasEnv(ray.Env, EnvRedisUsername))}
	ray.LivenessProbe, ray.ReadinessProbe = nil, nil
	ray.Env = append(ray.Env,
		corev1.EnvVar{Name: "RAY_redis_db_connect_retries", Value: redisConnectRetries},
		corev1.EnvVar{Name: "RAY_redis_db_connect_wait_milliseconds", Value: redisConnectWaitMillis})
	fixed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	ray.Resources = corev1.ResourceRequirements{Limits: fixed, Requests: fixed.DeepCopy()}
	pod.Spec.Containers = []corev1.Container{ray}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: RedisCleanupJobName(c), Namespace: c.Namespace,
			Labels: pod.Labels, Annotations: pod.Annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(c)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](cleanupJobDeadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations},
				Spec:       pod.Spec,
			},
		},
	}
}

// gcsFTDeletionTimeout is how long deleted c waits for its cleanup.
func gcsFTDeletionTimeout(c *rayv1.RayCluster) time.Duration {
	if s, err := strconv.Atoi(c.Annotations[rayparams.AnnotationGCSFTDeletionTimeout]); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return DefaultGCSFTDeletionTimeout
}

// jobFinished returns the condition (Complete or Failed) a Job finished with.
func jobFinished(j *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, cond := range j.Status.Conditions {
		if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
			return cond.Type, true
		}
	}
	return "", false
}

// setFinalizer adds or removes the Redis cleanup finalizer with a merge patch (an update from the typed
// object would drop the fields KubeRay v1.7 added, which the typed RayCluster does not know).
func (r *reconciler) setFinalizer(ctx context.Context, c *rayv1.RayCluster, add bool) error {
	orig := c.DeepCopy()
	if add {
		controllerutil.AddFinalizer(c, rayparams.FinalizerRedisCleanup)
	} else {
		controllerutil.RemoveFinalizer(c, rayparams.FinalizerRedisCleanup)
	}
	return r.client.Patch(ctx, c, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// reconcileRedisCleanup runs the Redis cleanup steps of a fault-tolerant c. done says the pass ends here
// with res and err: the finalizer was just added (the rest follows on the next pass, as in KubeRay), or
// c is being deleted.
func (r *reconciler) reconcileRedisCleanup(ctx context.Context, c *rayv1.RayCluster) (res ctrl.Result, done bool, err error) {
	if !GCSFaultToleranceEnabled(c) {
		if !c.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(c, rayparams.FinalizerRedisCleanup) {
			// Fault tolerance was turned off after the finalizer was added (the annotation removed, say):
			// no Redis to clean up is known, so the finalizer only holds the cluster. (KubeRay keeps it.)
			return ctrl.Result{}, true, r.setFinalizer(ctx, c, false)
		}
		return ctrl.Result{}, false, nil
	}
	if c.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(c, rayparams.FinalizerRedisCleanup) {
			return ctrl.Result{}, false, nil
		}
		return ctrl.Result{RequeueAfter: r.requeueAfter}, true, r.setFinalizer(ctx, c, true)
	}
	if !controllerutil.ContainsFinalizer(c, rayparams.FinalizerRedisCleanup) {
		return ctrl.Result{}, true, nil
	}
	res, err = r.cleanUpRedis(ctx, c)
	return res, true, err
}

// cleanUpRedis is one pass over a deleted fault-tolerant c: Pods first, then the cleanup Job, then the
// finalizer.
func (r *reconciler) cleanUpRedis(ctx context.Context, c *rayv1.RayCluster) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	head := client.MatchingLabels{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.HeadNode)}
	if _, err := r.deleteAll(ctx, c, head); err != nil {
		return ctrl.Result{}, err
	}
	if _, err := r.deleteAll(ctx, c, client.MatchingLabels{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.WorkerNode)}); err != nil {
		return ctrl.Result{}, err
	}
	heads, err := r.listPods(ctx, c, head)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(heads) > 0 {
		log.Info("waiting for the head Pod to terminate before cleaning up Redis", "pod", heads[0].Name)
		return ctrl.Result{RequeueAfter: headTerminationRequeue}, nil
	}
	if age, timeout := r.now().Sub(c.DeletionTimestamp.Time), gcsFTDeletionTimeout(c); age >= timeout {
		if err := r.setFinalizer(ctx, c, false); err != nil {
			return ctrl.Result{}, err
		}
		r.recorder.Eventf(c, corev1.EventTypeWarning, EventForceDeletedStuckCluster,
			"Removed the finalizer %s %s after the deletion, as the Redis cleanup had not finished within %s (%s); "+
				"delete the keys of its storage namespace from Redis yourself", rayparams.FinalizerRedisCleanup, age.Round(time.Second), timeout, rayparams.AnnotationGCSFTDeletionTimeout)
		return ctrl.Result{}, nil
	}

	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(c.Namespace),
		client.MatchingLabels{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.RedisCleanupNode)}); err != nil {
		return ctrl.Result{}, err
	}
	if len(jobs.Items) == 0 {
		job := RedisCleanupJob(c, r.build)
		if err := r.client.Create(ctx, job); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return ctrl.Result{RequeueAfter: r.requeueAfter}, nil // the cache has not seen it yet
			}
			r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToCreateRedisCleanupJob,
				"Failed to create the Redis cleanup Job %s/%s: %v", job.Namespace, job.Name, err)
			return ctrl.Result{}, err
		}
		r.hooks.Wrote(ctx, job, chain.Create)
		r.recorder.Eventf(c, corev1.EventTypeNormal, EventCreatedRedisCleanupJob, "Created Redis cleanup Job %s/%s", job.Namespace, job.Name)
		return ctrl.Result{RequeueAfter: r.requeueAfter}, nil
	}
	job := &jobs.Items[0]
	cond, finished := jobFinished(job)
	if !finished {
		return ctrl.Result{RequeueAfter: r.requeueAfter}, nil
	}
	if err := r.setFinalizer(ctx, c, false); err != nil {
		return ctrl.Result{}, err
	}
	if cond == batchv1.JobFailed {
		r.recorder.Eventf(c, corev1.EventTypeWarning, EventRedisCleanupFailed,
			"The Redis cleanup Job %s/%s failed (see its Pod's log); the finalizer is removed, but the keys of storage namespace %q may remain in Redis: delete them yourself",
			job.Namespace, job.Name, job.Annotations[rayparams.AnnotationExternalStorageNS])
	}
	log.Info("Redis cleanup finished", "job", job.Name, "condition", cond, "storageNamespace", job.Annotations[rayparams.AnnotationExternalStorageNS])
	return ctrl.Result{}, nil
}
