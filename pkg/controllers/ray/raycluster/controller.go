// Package raycluster is rayctl's RayCluster controller. It follows KubeRay v1.5's observable behaviour:
// the same head Pod, worker Pods and head Service (names, labels, ports, `ray start` command, env,
// probes, owner references), the same scaling and suspension rules, the same status fields, conditions
// and events, and the same watches — For(RayCluster) with Or(GenerationChanged, LabelChanged,
// AnnotationChanged), Owns(Pod) and Owns(Service) without predicates — so KubeRay manifests, kubectl
// habits and KubeRay's docs apply.
//
// With enableInTreeAutoscaling the head Pod gets KubeRay's autoscaler sidecar, and the controller its
// ServiceAccount, Role and RoleBinding (autoscaler.go).
//
// GCS fault tolerance with an external Redis configures the head and workers (gcsft.go) and, at deletion,
// runs KubeRay's Redis cleanup Job behind a finalizer (rediscleanup.go).
//
// Worker groups of numOfHosts > 1 are made and removed a replica (numOfHosts Pods) at a time, with
// KubeRay v1.7's multi-host indexing labels and its headless worker Service (multihost.go).
//
// Not implemented (KubeRay features outside rayctl's scope): ingress/route, the serve Service, batch
// schedulers and RayService-specific labels.
package raycluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster/expectations"
	"github.com/rayctl/rayctl/pkg/rayparams"
	"github.com/rayctl/rayctl/pkg/rayports"
)

// Name is the controller's name in the manager's registry (`--controllers=raycluster`).
const Name = "raycluster"

// Event reasons, as KubeRay records them on the RayCluster.
const (
	EventInvalidSpec             = "InvalidRayClusterSpec"
	EventInvalidMetadata         = "InvalidRayClusterMetadata"
	EventCreatedService          = "CreatedService"
	EventFailedToCreateService   = "FailedToCreateService"
	EventCreatedHeadPod          = "CreatedHeadPod"
	EventFailedToCreateHeadPod   = "FailedToCreateHeadPod"
	EventDeletedHeadPod          = "DeletedHeadPod"
	EventFailedToDeleteHeadPod   = "FailedToDeleteHeadPod"
	EventCreatedWorkerPod        = "CreatedWorkerPod"
	EventFailedToCreateWorkerPod = "FailedToCreateWorkerPod"
	EventDeletedWorkerPod        = "DeletedWorkerPod"
	EventFailedToDeleteWorkerPod = "FailedToDeleteWorkerPod"
	EventFailedToDeleteWorkers   = "FailedToDeleteWorkerPodCollection"
	EventDeletedPod              = "DeletedPod"
	EventFailedToDeletePods      = "FailedToDeletePodCollection"
	// EventRayVersionMismatch is rayctl's own: spec.rayVersion differs from the host's Ray that runs the
	// cluster's image.
	EventRayVersionMismatch = "RayVersionMismatch"
	// EventUnsupportedNode is rayctl's own: the spec is valid, but this node cannot run it (its pods
	// cannot have files where Ray reads them), so the cluster gets no pods.
	EventUnsupportedNode = "UnsupportedNode"
)

// maxClusterNameLength keeps `<name>-serve-svc` within 63 characters, as KubeRay requires.
const maxClusterNameLength = 53

// reconciler reconciles RayClusters.
type reconciler struct {
	client       client.Client
	recorder     record.EventRecorder
	hooks        *chainhooks.Hooks
	expect       *expectations.Expectations
	build        BuildOptions
	requeueAfter time.Duration
	resync       time.Duration
	now          func() time.Time
	hostRay      func(image string) string
	// ports hands out blocks of the host's ports to Ray Pods where pods share the host's network
	// (hostports.go); nil elsewhere.
	ports *rayports.Allocator
	// secrets reads token Secrets (auth.go): the manager's API reader, so that no informer caches every
	// Secret.
	secrets client.Reader
	// indexed: the client reads a cache that indexes Pods and Services by cluster (indexCluster).
	indexed bool
	// mountsUnplaced: the node's pods do not get their volumes at their mountPaths
	// (ctrlset.Env.PodMountsUnplaced), so Ray cannot find its service account token (auth.go).
	mountsUnplaced bool
}

// newReconciler returns a reconciler that reads through c (normally the manager's cached client)
// and takes its recorder, hooks and timings from env.
func newReconciler(c client.Client, env ctrlset.Env, build BuildOptions) *reconciler {
	r := &reconciler{
		client: c, secrets: c, recorder: env.Recorder, hooks: env.Hooks, build: build,
		expect:       expectations.New(expectations.DefaultTimeout),
		requeueAfter: env.RequeueAfter, resync: env.ResyncPeriod,
		now: time.Now, hostRay: env.HostRayVersion,
	}
	if env.HostNetworkPods {
		r.ports = rayports.NewAllocator()
	}
	r.mountsUnplaced = env.PodMountsUnplaced
	return r
}

// Setup is the ctrlset.SetupFunc of this controller (pkg/controlplane registers it in its group).
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	r := newReconciler(mgr.GetClient(), env, buildOptionsFromEnv(os.Getenv))
	r.secrets = mgr.GetAPIReader()
	return r.setupWithManager(mgr, env.ReconcileConcurrency)
}

// buildOptionsFromEnv reads the switches KubeRay's operator takes from its own environment, here
// rayctl's: ENABLE_INIT_CONTAINER_INJECTION=false leaves out the workers' wait-gcs-ready init
// container, ENABLE_PROBES_INJECTION=false the injected probes ("false" in any case, as KubeRay).
func buildOptionsFromEnv(getenv func(string) string) BuildOptions {
	return BuildOptions{
		NoInitContainer: strings.EqualFold(getenv("ENABLE_INIT_CONTAINER_INJECTION"), "false"),
		NoProbes:        strings.EqualFold(getenv("ENABLE_PROBES_INJECTION"), "false"),
	}
}

// specLabelsOrAnnotationsChanged is KubeRay's predicate on RayCluster events: a status write (which
// changes neither generation, labels nor annotations) does not come back as a reconcile.
var specLabelsOrAnnotationsChanged = chainhooks.Named("generation, labels or annotations changed",
	predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))

// setupWithManager wires the controller as KubeRay does: For(&RayCluster{}) with
// specLabelsOrAnnotationsChanged, Owns(&Pod{}) and Owns(&Service{}) without predicates, through the
// chain hooks' builder so that each hop is observed. It indexes the cache's Pods and Services by their
// ray.io/cluster label, so that listing one cluster's children does not go through every Pod of the
// namespace.
func (r *reconciler) setupWithManager(mgr ctrl.Manager, concurrency int) error {
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Service{}} {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, indexCluster, clusterOf); err != nil {
			return err
		}
	}
	r.indexed = true
	return r.hooks.NewControllerManagedBy(mgr).
		For(&rayv1.RayCluster{}, specLabelsOrAnnotationsChanged).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		MaxConcurrentReconciles(concurrency).
		Complete(r)
}

// Reconcile brings one RayCluster's head Service and Pods to what its spec asks for, then writes its
// status if that changed. It requeues after RequeueAfter when it changed something and after the
// resync period otherwise; errors go back to the rate limiter (which then ignores RequeueAfter).
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var c rayv1.RayCluster
	if err := r.client.Get(ctx, req.NamespacedName, &c); err != nil {
		if apierrors.IsNotFound(err) {
			r.expect.Forget(req.Namespace, req.Name)
			if r.ports != nil {
				r.ports.Forget(req.String())
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if m := c.Spec.ManagedBy; m != nil && *m != "" && *m != rayparams.ManagedByKubeRay {
		log.V(1).Info("skipping a RayCluster managed by another controller", "managedBy", *m)
		return ctrl.Result{}, nil
	}
	deleting := !c.DeletionTimestamp.IsZero()
	if deleting && !controllerutil.ContainsFinalizer(&c, rayparams.FinalizerRedisCleanup) {
		return ctrl.Result{}, nil // the garbage collector removes the children
	}
	if len(c.Name) > maxClusterNameLength {
		r.recorder.Eventf(&c, corev1.EventTypeWarning, EventInvalidMetadata,
			"The RayCluster metadata is invalid %s/%s: name must be at most %d characters", c.Namespace, c.Name, maxClusterNameLength)
		return ctrl.Result{}, nil
	}
	if err := validateCluster(&c); err != nil {
		r.recorder.Eventf(&c, corev1.EventTypeWarning, EventInvalidSpec, "The RayCluster spec is invalid %s/%s: %v", c.Namespace, c.Name, err)
		return ctrl.Result{}, nil
	}
	if err := r.unsupported(&c); err != nil {
		r.recorder.Eventf(&c, corev1.EventTypeWarning, EventUnsupportedNode, "The RayCluster cannot run on this node %s/%s: %v", c.Namespace, c.Name, err)
		return ctrl.Result{}, nil
	}
	if res, done, err := r.reconcileRedisCleanup(ctx, &c); done || err != nil {
		return res, err
	}
	if deleting {
		return ctrl.Result{}, nil
	}

	reconcileErr := r.reconcileAuthSecret(ctx, &c)
	if reconcileErr == nil {
		reconcileErr = r.reconcileHeadService(ctx, &c)
	}
	if reconcileErr == nil {
		reconcileErr = r.reconcileHeadlessWorkerService(ctx, &c)
	}
	if reconcileErr == nil {
		reconcileErr = r.reconcileAutoscalerRBAC(ctx, &c)
	}
	if reconcileErr == nil {
		reconcileErr = r.reconcilePods(ctx, &c)
	}
	if reconcileErr != nil {
		log.Info("reconcile failed", "error", reconcileErr.Error())
	}

	var status rayv1.RayClusterStatus
	obs, err := r.observe(ctx, &c)
	if err == nil {
		obs.ReconcileErr = reconcileErr
		status, err = computeStatus(&c, obs, r.now())
	}
	changed := false
	if err == nil && statusChanged(&c.Status, &status) {
		changed = true
		c.Status = status
		if err = r.client.Status().Update(ctx, &c); err == nil {
			r.hooks.StatusWritten(ctx, &c, chain.F("state", c.Status.State), chain.F("readyWorkers", fmt.Sprintf("%d/%d", c.Status.ReadyWorkerReplicas, c.Status.DesiredWorkerReplicas))) //nolint:staticcheck // State is what KubeRay users read
		}
	}
	if reconcileErr != nil {
		err = reconcileErr
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed {
		// Atomic steps such as suspending continue on the next pass; the status write itself does not
		// come back through the predicate.
		return ctrl.Result{RequeueAfter: r.requeueAfter}, nil
	}
	return ctrl.Result{RequeueAfter: r.resync}, nil
}

// validate rejects specs KubeRay rejects and this controller cannot build Pods from.
func validate(s *rayv1.RayClusterSpec) error {
	if len(s.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return errors.New("headGroupSpec should have at least one container")
	}
	seen := map[string]bool{}
	for _, g := range s.WorkerGroupSpecs {
		if len(g.Template.Spec.Containers) == 0 {
			return errors.New("workerGroupSpec should have at least one container")
		}
		if g.GroupName == "" || seen[g.GroupName] {
			return fmt.Errorf("worker group names must be non-empty and unique, found %q twice or empty", g.GroupName)
		}
		seen[g.GroupName] = true
	}
	return nil
}

// validateCluster is validate plus the checks that read the RayCluster's annotations.
func validateCluster(c *rayv1.RayCluster) error {
	if err := validate(&c.Spec); err != nil {
		return err
	}
	if err := validateAuth(&c.Spec); err != nil {
		return err
	}
	return validateGCSFaultTolerance(c)
}

// unsupported says why this node cannot run the valid spec of c: Kubernetes-delegated token
// authentication where pods do not get their volumes at their mountPaths (errK8sAuthUnplaced).
func (r *reconciler) unsupported(c *rayv1.RayCluster) error {
	if r.mountsUnplaced && K8sTokenAuth(&c.Spec) {
		return errK8sAuthUnplaced
	}
	return nil
}

// indexCluster is the cache index of Pods and Services by their ray.io/cluster label (clusterOf).
const indexCluster = "raycluster.ray.io/cluster"

// clusterOf is the indexCluster value of a Pod or Service: its cluster, if it has one.
func clusterOf(obj client.Object) []string {
	if v := obj.GetLabels()[rayparams.LabelCluster]; v != "" {
		return []string{v}
	}
	return nil
}

// inCluster are the list options that pick c's children matching sel (which names the cluster): through
// the cluster index when the client reads an indexed cache, else by labels alone. The index only
// narrows the list; the labels still decide.
func (r *reconciler) inCluster(c *rayv1.RayCluster, sel client.MatchingLabels, opts ...client.ListOption) []client.ListOption {
	opts = append(opts, client.InNamespace(c.Namespace), sel)
	if r.indexed {
		opts = append(opts, client.MatchingFields{indexCluster: c.Name})
	}
	return opts
}

// observe lists the cluster's Pods and head Service from the cache. computeStatus only reads them, so
// they are the cache's own objects, not copies.
func (r *reconciler) observe(ctx context.Context, c *rayv1.RayCluster) (observed, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, r.inCluster(c, client.MatchingLabels{rayparams.LabelCluster: c.Name}, client.UnsafeDisableDeepCopy)...); err != nil {
		return observed{}, err
	}
	svc, err := r.headService(ctx, c, client.UnsafeDisableDeepCopy)
	return observed{Pods: pods.Items, HeadService: svc}, err
}

// headService returns the head Service from the cache (nil if none), found by KubeRay's labels.
func (r *reconciler) headService(ctx context.Context, c *rayv1.RayCluster, opts ...client.ListOption) (*corev1.Service, error) {
	var svcs corev1.ServiceList
	sel := headServiceLabels(c.Name)
	delete(sel, rayparams.LabelAppName)
	delete(sel, rayparams.LabelCreatedBy)
	if err := r.client.List(ctx, &svcs, r.inCluster(c, sel, opts...)...); err != nil {
		return nil, err
	}
	switch len(svcs.Items) {
	case 0:
		return nil, nil
	case 1:
		return &svcs.Items[0], nil
	default:
		return nil, fmt.Errorf("%d head Services found for RayCluster %s/%s", len(svcs.Items), c.Namespace, c.Name)
	}
}

func (r *reconciler) reconcileHeadService(ctx context.Context, c *rayv1.RayCluster) error {
	existing, err := r.headService(ctx, c)
	if err != nil || existing != nil {
		return err
	}
	svc := HeadService(c)
	if len(svc.Spec.Ports) == 0 {
		return fmt.Errorf("the head Service of RayCluster %s/%s has no ports", c.Namespace, c.Name)
	}
	if r.ports != nil {
		head, err := r.headBlock(ctx, c, nil)
		if err != nil {
			return err
		}
		placeServicePorts(svc, c, head)
	}
	return r.createService(ctx, c, svc)
}

// createService creates one of c's Services, with KubeRay's events; one that exists already (the
// cache has not caught up with an earlier create) is not an error.
func (r *reconciler) createService(ctx context.Context, c *rayv1.RayCluster, svc *corev1.Service) error {
	if err := r.client.Create(ctx, svc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache has not caught up with an earlier create
		}
		r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToCreateService, "Failed creating service %s/%s, %v", svc.Namespace, svc.Name, err)
		return err
	}
	r.recorder.Eventf(c, corev1.EventTypeNormal, EventCreatedService, "Created service %s/%s", svc.Namespace, svc.Name)
	return nil
}

// group returns the expectations key of one of c's Pod groups ("" is the head).
func group(c *rayv1.RayCluster, name string) expectations.Group {
	return expectations.Group{Namespace: c.Namespace, Cluster: c.Name, Name: name}
}

// satisfied asks the expectations of a group against the cache.
func (r *reconciler) satisfied(ctx context.Context, c *rayv1.RayCluster, name string) bool {
	return r.expect.Satisfied(group(c, name), func(pod string) (bool, error) {
		// Only whether it is there matters: the cache's own Pod, not a deep copy.
		err := r.client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: pod}, &corev1.Pod{},
			&client.GetOptions{UnsafeDisableDeepCopy: ptr.To(true)})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// listPods lists c's Pods matching sel from the cache. They are the cache's own objects, not copies
// (every reconcile lists them, and a copy of each Pod was most of what a reconcile allocated): read
// them, delete them, never change them.
func (r *reconciler) listPods(ctx context.Context, c *rayv1.RayCluster, sel client.MatchingLabels) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := r.client.List(ctx, &pods, r.inCluster(c, sel, client.UnsafeDisableDeepCopy)...)
	return pods.Items, err
}

// deleteAll deletes every Pod of c matching sel in one call, if any is still active; it reports
// whether it deleted anything.
func (r *reconciler) deleteAll(ctx context.Context, c *rayv1.RayCluster, sel client.MatchingLabels) (bool, error) {
	pods, err := r.listPods(ctx, c, sel)
	if err != nil {
		return false, err
	}
	active := 0
	for i := range pods {
		if pods[i].DeletionTimestamp.IsZero() {
			active++
		}
	}
	if active == 0 {
		return false, nil
	}
	return true, r.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(c.Namespace), sel)
}

func (r *reconciler) reconcilePods(ctx context.Context, c *rayv1.RayCluster) error {
	all := client.MatchingLabels{rayparams.LabelCluster: c.Name}
	switch suspendStatus(c.Status.Conditions) {
	case rayv1.RayClusterSuspending:
		deleted, err := r.deleteAll(ctx, c, all)
		if err != nil {
			r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToDeletePods,
				"Failed deleting Pods due to suspension for RayCluster %s/%s, %v", c.Namespace, c.Name, err)
			return failure(reasonFailedDeleteAllPods, err)
		}
		if deleted {
			r.recorder.Eventf(c, corev1.EventTypeNormal, EventDeletedPod, "Deleted Pods for RayCluster %s/%s due to suspension", c.Namespace, c.Name)
		}
		return nil
	case rayv1.RayClusterSuspended:
		return nil
	}
	if suspended(c.Spec.Suspend) {
		return nil // the status first moves to Suspending; the Pods go on the next pass
	}
	if err := r.reconcileHead(ctx, c); err != nil {
		return err
	}
	for i := range c.Spec.WorkerGroupSpecs {
		if err := r.reconcileWorkers(ctx, c, &c.Spec.WorkerGroupSpecs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *reconciler) reconcileHead(ctx context.Context, c *rayv1.RayCluster) error {
	if !r.satisfied(ctx, c, "") {
		return nil // the cache has not seen our last head create/delete yet
	}
	heads, err := r.listPods(ctx, c, client.MatchingLabels{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.HeadNode)})
	if err != nil {
		return err
	}
	switch {
	case len(heads) == 1:
		head := &heads[0]
		del, reason := shouldDelete(head, rayv1.HeadNode)
		if !del {
			return nil
		}
		if err := r.client.Delete(ctx, head); err != nil && !apierrors.IsNotFound(err) {
			r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToDeleteHeadPod, "Failed deleting head Pod %s/%s; %s: %v", head.Namespace, head.Name, reason, err)
			return failure(reasonFailedDeleteHeadPod, err)
		}
		r.expect.Expect(group(c, ""), head.Name, expectations.Delete)
		r.hooks.Wrote(ctx, head, chain.Delete)
		r.recorder.Eventf(c, corev1.EventTypeNormal, EventDeletedHeadPod, "Deleted head Pod %s/%s; %s", head.Namespace, head.Name, reason)
		return errors.New(reason) // the replacement comes on the (rate-limited) next pass
	case len(heads) == 0:
		if c.Labels[rayparams.LabelOriginatedCRD] == "RayJob" && meta.IsStatusConditionTrue(c.Status.Conditions, string(rayv1.RayClusterProvisioned)) {
			return nil // a RayJob's cluster that lost its head: the RayJob controller decides
		}
		o := r.build
		plan, err := r.headPlan(ctx, c)
		if err != nil {
			return failure(reasonFailedCreateHeadPod, err)
		}
		o.Ports = plan
		pod := HeadPod(c, o)
		if err := r.client.Create(ctx, pod); err != nil {
			r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToCreateHeadPod, "Failed to create head Pod %s/%s, %v", pod.Namespace, pod.GenerateName, err)
			return failure(reasonFailedCreateHeadPod, err)
		}
		r.expect.Expect(group(c, ""), pod.Name, expectations.Create)
		r.hooks.Wrote(ctx, pod, chain.Create)
		r.recorder.Eventf(c, corev1.EventTypeNormal, EventCreatedHeadPod, "Created head Pod %s/%s", pod.Namespace, pod.Name)
		r.warnRayVersion(c, pod)
		return nil
	default:
		names := make([]string, len(heads))
		for i := range heads {
			names[i] = heads[i].Name
		}
		return fmt.Errorf("%d head Pods found %v; delete the extra ones", len(heads), names)
	}
}

func (r *reconciler) reconcileWorkers(ctx context.Context, c *rayv1.RayCluster, g *rayv1.WorkerGroupSpec) error {
	if !r.satisfied(ctx, c, g.GroupName) {
		return nil
	}
	sel := client.MatchingLabels{rayparams.LabelCluster: c.Name, rayparams.LabelGroup: g.GroupName}
	if suspended(g.Suspend) {
		deleted, err := r.deleteAll(ctx, c, sel)
		if err != nil {
			r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToDeleteWorkers,
				"Failed deleting worker Pods for suspended group %s in RayCluster %s/%s, %v", g.GroupName, c.Namespace, c.Name, err)
			return failure(reasonFailedDeleteWorkerPod, err)
		}
		if deleted {
			r.recorder.Eventf(c, corev1.EventTypeNormal, EventDeletedWorkerPod,
				"Deleted all pods for suspended worker group %s in RayCluster %s/%s", g.GroupName, c.Namespace, c.Name)
		}
		return nil
	}
	pods, err := r.listPods(ctx, c, sel)
	if err != nil {
		return err
	}
	if numOfHosts(g) > 1 {
		return r.reconcileReplicas(ctx, c, g, pods)
	}
	key := group(c, g.GroupName)

	// Pods that cannot run again go first; replacements come on the next pass.
	unhealthy := 0
	for i := range pods {
		del, reason := shouldDelete(&pods[i], rayv1.WorkerNode)
		if !del {
			continue
		}
		unhealthy++
		if err := r.deleteWorker(ctx, c, key, &pods[i], reason); err != nil {
			return err
		}
	}
	if unhealthy > 0 {
		return fmt.Errorf("deleted %d unhealthy worker Pods of group %s", unhealthy, g.GroupName)
	}

	// scaleStrategy.workersToDelete is honoured whatever the replica count (the autoscaler lowers
	// replicas alongside). Only this group's Pods are deleted: a name from elsewhere is ignored.
	toDelete := map[string]bool{}
	for _, n := range g.ScaleStrategy.WorkersToDelete {
		toDelete[n] = true
	}
	var running []corev1.Pod
	for i := range pods {
		p := &pods[i]
		if !toDelete[p.Name] {
			running = append(running, *p)
			continue
		}
		if err := r.deleteWorker(ctx, c, key, p, "named in scaleStrategy.workersToDelete"); err != nil {
			return err
		}
	}

	diff := int(DesiredWorkers(g)) - len(running)
	switch {
	case diff > 0:
		free := freeIndices(running)
		for range diff {
			if err := r.createWorker(ctx, c, g, ReplicaSlot{Index: free()}); err != nil {
				return err
			}
		}
	case diff < 0:
		if AutoscalingEnabled(c) {
			return nil // with the autoscaler on, only it picks Pods to remove (workersToDelete)
		}
		scaleDownOrder(running)
		for i := range -diff {
			if err := r.deleteWorker(ctx, c, key, &running[i], "scaling down"); err != nil {
				return err
			}
		}
	}
	return nil
}

// createWorker creates one worker Pod of group g in slot.
func (r *reconciler) createWorker(ctx context.Context, c *rayv1.RayCluster, g *rayv1.WorkerGroupSpec, slot ReplicaSlot) error {
	o := r.build
	plan, err := r.workerPlan(ctx, c)
	if err != nil {
		return failure(reasonFailedCreateWorkerPod, err)
	}
	o.Ports, o.Replica = plan, &slot
	pod := WorkerPod(c, g, o)
	if err := r.client.Create(ctx, pod); err != nil {
		r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToCreateWorkerPod, "Failed to create worker Pod for the cluster %s/%s, %v", c.Namespace, c.Name, err)
		return failure(reasonFailedCreateWorkerPod, err)
	}
	r.expect.Expect(group(c, g.GroupName), pod.Name, expectations.Create)
	r.hooks.Wrote(ctx, pod, chain.Create)
	r.recorder.Eventf(c, corev1.EventTypeNormal, EventCreatedWorkerPod, "Created worker Pod %s/%s", pod.Namespace, pod.Name)
	return nil
}

// deleteWorker deletes worker Pod p of the group key names, saying why in its event. A Pod already
// gone is not an error.
func (r *reconciler) deleteWorker(ctx context.Context, c *rayv1.RayCluster, key expectations.Group, p *corev1.Pod, why string) error {
	if err := r.client.Delete(ctx, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToDeleteWorkerPod, "Failed deleting worker Pod %s/%s (%s): %v", p.Namespace, p.Name, why, err)
		return failure(reasonFailedDeleteWorkerPod, err)
	}
	r.expect.Expect(key, p.Name, expectations.Delete)
	r.hooks.Wrote(ctx, p, chain.Delete)
	r.recorder.Eventf(c, corev1.EventTypeNormal, EventDeletedWorkerPod, "Deleted worker Pod %s/%s; %s", p.Namespace, p.Name, why)
	return nil
}

// warnRayVersion records a Warning on c when its spec.rayVersion names another Ray than the host's Ray
// that runs its head pod's image on this node. It is said once per head pod created, never a failure:
// the cluster runs on the host's Ray all the same.
func (r *reconciler) warnRayVersion(c *rayv1.RayCluster, head *corev1.Pod) {
	if r.hostRay == nil || c.Spec.RayVersion == "" || len(head.Spec.Containers) == 0 {
		return
	}
	image := head.Spec.Containers[0].Image
	if v := r.hostRay(image); v != "" && v != c.Spec.RayVersion {
		r.recorder.Eventf(c, corev1.EventTypeWarning, EventRayVersionMismatch,
			"spec.rayVersion is %s, but the host's Ray %s runs image %s on this node", c.Spec.RayVersion, v, image)
	}
}
