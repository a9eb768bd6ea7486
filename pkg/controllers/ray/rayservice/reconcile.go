package rayservice

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/raydashboard"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// pass is one reconcile of one RayService.
type pass struct {
	r    *reconciler
	log  logr.Logger
	rs   *rayv1.RayService
	orig *rayv1.RayService
	now  time.Time
	// notReady explains why the RayService is not Ready yet, for the Ready condition's message.
	notReady string
	// requeue is the next look, shortened by a cluster's deletion time.
	requeue time.Duration
	// promoted names the clusters of a promotion this pass made ("" when none): from and to.
	promoted [2]string
}

func (p *pass) run(ctx context.Context) (reconcile.Result, error) {
	rs := p.rs
	p.requeue = p.r.opts.RequeueAfter
	if err := validate(rs); err != nil {
		return p.invalid(ctx, err)
	}
	st := &rs.Status
	p.r.configs.keep(rs.UID, st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName)
	if err := p.cleanUpClusters(ctx); err != nil {
		return reconcile.Result{}, err
	}
	active, pending, err := p.reconcileClusters(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	incremental := p.incremental()
	if incremental {
		p.reconcileRollback(active, pending)
	}
	for _, c := range []*rayv1.RayCluster{active, pending} {
		if err := p.updateHeadServeLabel(ctx, c); err != nil {
			return reconcile.Result{}, err
		}
	}

	// Serve goes to the pending cluster while there is one; the active cluster gets a new config
	// only when no new cluster is on its way.
	var activeReady, pendingReady bool
	var activeApps, pendingApps map[string]rayv1.AppStatus
	if pending != nil {
		pendingReady, pendingApps = p.reconcileServe(ctx, pending)
	}
	if active != nil && pending == nil && !shouldPrepareNewCluster(rs, active, nil, false, incremental) ||
		active != nil && pending != nil && incremental {
		// An incremental upgrade serves from both clusters: the active one's capacity is moved too.
		activeReady, activeApps = p.reconcileServe(ctx, active)
	}
	var route *gwv1.HTTPRoute
	if incremental {
		if route, err = p.reconcileGatewayObjects(ctx, active, pending, pendingReady); err != nil {
			return reconcile.Result{}, err
		}
	}

	var serveSvc *corev1.Service
	if activeReady || pendingReady {
		target := active
		// During an incremental upgrade the Gateway moves the traffic: the Services stay on the active cluster.
		if pendingReady && (!incremental || !upgradeInProgress(rs)) {
			target = pending
		}
		if serveSvc, err = p.reconcileServices(ctx, target); err != nil {
			return reconcile.Result{}, err
		}
	}
	if incremental {
		p.recordTraffic(route, pending)
	}
	if err := p.calculateStatus(ctx, serveSvc, active, pending, activeApps, pendingApps); err != nil {
		return reconcile.Result{}, err
	}
	if err := p.writeStatus(ctx); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: p.requeue}, nil
}

// validate refuses a RayService the controller cannot act on.
func validate(rs *rayv1.RayService) error {
	if _, err := serveConfigJSON(rs.Spec.ServeConfigV2); err != nil {
		return err
	}
	if isIncremental(rs) {
		if err := validateIncremental(rs); err != nil {
			return err
		}
	}
	if len(rs.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return fmt.Errorf("spec.rayClusterConfig.headGroupSpec.template.spec.containers: the head needs a container")
	}
	if d := rs.Spec.RayClusterDeletionDelaySeconds; d != nil && *d < 0 {
		return fmt.Errorf("spec.rayClusterDeletionDelaySeconds: %d is negative", *d)
	}
	if raycluster.K8sTokenAuth(&rs.Spec.RayClusterSpec) {
		return fmt.Errorf("spec.rayClusterConfig.authOptions.enableK8sTokenAuth: Kubernetes-delegated token authentication is not supported for a RayService (as in KubeRay v1.7)")
	}
	return nil
}

// invalid records a validation failure (once per message) and stops the pass: nothing is created.
func (p *pass) invalid(ctx context.Context, err error) (reconcile.Result, error) {
	rs := p.rs
	c := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.RayServiceReady))
	if c == nil || c.Reason != string(rayv1.RayServiceValidationFailed) || c.Message != err.Error() {
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventInvalidSpec, "%s/%s: %v", rs.Namespace, rs.Name, err)
	}
	rs.Status.ObservedGeneration = rs.Generation
	setCondition(rs, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceValidationFailed, err.Error())
	rs.Status.ServiceStatus = rayv1.NotRunning
	return reconcile.Result{}, p.writeStatus(ctx)
}

// getCluster reads a RayCluster by name; nil when the name is empty or it does not exist.
func (p *pass) getCluster(ctx context.Context, name string) (*rayv1.RayCluster, error) {
	if name == "" {
		return nil, nil
	}
	c := &rayv1.RayCluster{}
	if err := p.r.client.Get(ctx, types.NamespacedName{Namespace: p.rs.Namespace, Name: name}, c); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return c, nil
}

// reconcileClusters reads the active and pending clusters, creates the pending one the status names,
// and applies in-place changes (suspend, added worker groups).
func (p *pass) reconcileClusters(ctx context.Context) (active, pending *rayv1.RayCluster, err error) {
	rs := p.rs
	if active, err = p.getCluster(ctx, rs.Status.ActiveServiceStatus.RayClusterName); err != nil {
		return nil, nil, err
	}
	if pending, err = p.getCluster(ctx, rs.Status.PendingServiceStatus.RayClusterName); err != nil {
		return nil, nil, err
	}
	if name := rs.Status.PendingServiceStatus.RayClusterName; name != "" && pending == nil {
		pending, err = p.createCluster(ctx, name)
		return active, pending, err
	}
	for _, c := range []struct {
		cluster *rayv1.RayCluster
		active  bool
		role    string
	}{{active, true, "active"}, {pending, false, "pending"}} {
		if !shouldUpdateInPlace(rs, c.cluster, c.active) {
			continue
		}
		goal, err := buildCluster(rs, c.cluster.Name)
		if err != nil {
			return nil, nil, err
		}
		goal.ObjectMeta.ResourceVersion, goal.ObjectMeta.UID = c.cluster.ResourceVersion, c.cluster.UID
		goal.OwnerReferences = c.cluster.OwnerReferences
		if err := p.writeCluster(ctx, goal, false); err != nil {
			p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedUpdateCluster, "Failed to update the %s RayCluster %s/%s: %v", c.role, rs.Namespace, c.cluster.Name, err)
			return nil, nil, err
		}
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeNormal, EventUpdatedCluster, "Updated the %s RayCluster %s/%s", c.role, rs.Namespace, c.cluster.Name)
	}
	return active, pending, nil
}

// createCluster creates the RayCluster name from the RayService's spec, owned by it.
func (p *pass) createCluster(ctx context.Context, name string) (*rayv1.RayCluster, error) {
	rs := p.rs
	c, err := buildCluster(rs, name)
	if err != nil {
		return nil, err
	}
	if err := controllerutil.SetControllerReference(rs, c, p.r.client.Scheme()); err != nil {
		return nil, err
	}
	if err := p.writeCluster(ctx, c, true); err != nil {
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedCreateCluster, "Failed to create the RayCluster %s/%s: %v", rs.Namespace, name, err)
		return nil, err
	}
	p.r.opts.Hooks.Wrote(ctx, c, chain.Create)
	p.r.opts.Recorder.Eventf(rs, corev1.EventTypeNormal, EventCreatedCluster, "Created the RayCluster %s/%s", rs.Namespace, name)
	return c, nil
}

// writeCluster creates or updates the RayCluster c with the RayService's rayClusterConfig as stored,
// read unstructured: rayctl's Go types are KubeRay v1.6.2's, and a typed copy would drop the fields
// KubeRay v1.7 added (fieldwarnings reports those rayctl does not act on). c carries the metadata; on
// success it holds what the API server returned.
func (p *pass) writeCluster(ctx context.Context, c *rayv1.RayCluster, create bool) error {
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(rayv1.GroupVersion.WithKind("RayService"))
	if err := p.r.client.Get(ctx, client.ObjectKeyFromObject(p.rs), raw); err != nil {
		return err
	}
	spec, found, err := unstructured.NestedMap(raw.Object, "spec", "rayClusterConfig")
	if err != nil || !found || raw.GetUID() != p.rs.UID || raw.GetGeneration() != p.rs.Generation {
		// Not the generation this pass read: its spec would not match the hash; the next pass retries.
		return apierrors.NewConflict(rayv1.Resource("rayservices"), p.rs.Name, fmt.Errorf("the RayService changed while its RayCluster was being written"))
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(rayv1.GroupVersion.WithKind("RayCluster"))
	u.Object["spec"] = spec
	delete(u.Object, "status")
	if create {
		err = p.r.client.Create(ctx, u)
	} else {
		err = p.r.client.Update(ctx, u)
	}
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c)
}

// cleanUpClusters deletes the RayService's clusters that are neither active nor pending, each
// rayClusterDeletionDelaySeconds after it was first seen unused.
func (p *pass) cleanUpClusters(ctx context.Context) error {
	rs := p.rs
	var list rayv1.RayClusterList
	if err := p.r.client.List(ctx, &list, client.InNamespace(rs.Namespace), client.MatchingLabels(originLabels(rs))); err != nil {
		return err
	}
	keep := map[string]bool{rs.Status.ActiveServiceStatus.RayClusterName: true, rs.Status.PendingServiceStatus.RayClusterName: true}
	delay := deletionDelay(rs)
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	// Only the clusters still listed keep a deletion time.
	old := p.r.deleteAt[rs.UID]
	deleteAt := map[types.UID]time.Time{}
	p.r.deleteAt[rs.UID] = deleteAt
	for i := range list.Items {
		c := &list.Items[i]
		if keep[c.Name] || !metav1.IsControlledBy(c, rs) || !c.DeletionTimestamp.IsZero() {
			continue
		}
		at, ok := old[c.UID]
		if !ok {
			at = p.now.Add(delay)
			p.log.Info("RayCluster no longer used; deleting it later", "rayCluster", c.Name, "at", at)
		}
		deleteAt[c.UID] = at
		if p.now.Before(at) {
			p.requeue = min(p.requeue, at.Sub(p.now)+10*time.Millisecond)
			continue
		}
		if err := p.r.client.Delete(ctx, c, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedDeleteCluster, "Failed to delete the RayCluster %s/%s: %v", rs.Namespace, c.Name, err)
			return err
		}
		delete(deleteAt, c.UID)
		p.r.opts.Hooks.Wrote(ctx, c, chain.Delete)
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeNormal, EventDeletedCluster, "Deleted the RayCluster %s/%s", rs.Namespace, c.Name)
	}
	return nil
}

// headPod returns the cluster's head Pod, or nil.
func (p *pass) headPod(ctx context.Context, c *rayv1.RayCluster) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := p.r.client.List(ctx, &pods, client.InNamespace(c.Namespace),
		client.MatchingLabels{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.HeadNode)}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp.IsZero() {
			return &pods.Items[i], nil
		}
	}
	return nil, nil
}

// runningAndReady reports a Pod Running with its Ready condition True.
func runningAndReady(pod *corev1.Pod) bool {
	return pod != nil && pod.Status.Phase == corev1.PodRunning && podutils.IsPodReady(pod)
}

// servingPort is the head container's Serve port.
func servingPort(c *rayv1.RayCluster) int32 {
	return rayparams.HeadContainerPort(&c.Spec, rayparams.ServingPortName, rayparams.DefaultServingPort)
}

// updateHeadServeLabel sets the head Pod's ray.io/serve label, as KubeRay does: "true" while its
// Serve proxy answers /-/healthz, "false" otherwise or when excludeHeadPodFromServeSvc is set.
func (p *pass) updateHeadServeLabel(ctx context.Context, c *rayv1.RayCluster) error {
	if c == nil {
		return nil
	}
	pod, err := p.headPod(ctx, c)
	if err != nil || pod == nil {
		return err
	}
	want := "false"
	if !p.rs.Spec.ExcludeHeadPodFromServeSvc && pod.Status.PodIP != "" && pod.Status.Phase == corev1.PodRunning {
		url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(servingPort(c))))
		if p.r.opts.NewClient(url).ProxyHealthy(ctx) == nil {
			want = "true"
		}
	}
	if pod.Labels[rayparams.LabelServe] == want {
		return nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[rayparams.LabelServe] = want
	if err := p.r.client.Patch(ctx, pod, patch); err != nil {
		p.r.opts.Recorder.Eventf(p.rs, corev1.EventTypeWarning, EventFailedUpdateHeadPodServeLbl, "Failed to update the serve label to %q for the Head Pod %s/%s: %v", want, pod.Namespace, pod.Name, err)
		return client.IgnoreNotFound(err)
	}
	p.r.opts.Recorder.Eventf(p.rs, corev1.EventTypeNormal, EventUpdatedHeadPodServeLabel, "Updated the serve label to %q for the Head Pod %s/%s", want, pod.Namespace, pod.Name)
	return nil
}

// reconcileServe deploys the Serve config to cluster when it needs it and reads the applications'
// status back. ready is true when every application runs there.
func (p *pass) reconcileServe(ctx context.Context, c *rayv1.RayCluster) (ready bool, apps map[string]rayv1.AppStatus) {
	rs := p.rs
	pod, err := p.headPod(ctx, c)
	if err != nil || !runningAndReady(pod) {
		p.notReady = fmt.Sprintf("waiting for the head Pod of RayCluster %s to be running and ready", c.Name)
		return false, nil
	}
	if c.Status.Head.PodIP == "" && pod.Status.PodIP != "" {
		c = c.DeepCopy()
		c.Status.Head.PodIP = pod.Status.PodIP
	}
	base, err := p.r.opts.Resolver(ctx, c)
	if err != nil {
		p.notReady = err.Error()
		return false, nil
	}
	token, err := raycluster.ClusterToken(ctx, p.r.client, p.r.opts.Secrets, c)
	if err != nil {
		p.notReady = err.Error()
		return false, nil
	}
	ctx = raydashboard.WithAuthToken(ctx, token)
	dash := p.r.opts.NewClient(base)
	details, err := dash.GetServeApplications(ctx)
	if err != nil {
		p.notReady = fmt.Sprintf("cannot read Serve applications from RayCluster %s: %v", c.Name, err)
		p.log.Info("reading Serve applications", "rayCluster", c.Name, "error", err.Error())
		return false, nil
	}
	ready, apps = appStatuses(details)
	deploy, why := needsDeploy(p.r.configs.get(rs.UID, c.Name), rs.Spec.ServeConfigV2, apps)
	if deploy && p.skipServeDeploy(c) {
		deploy = false
		p.log.Info("leaving the Serve config of a cluster being upgraded away from (or rolled back from) as it is", "rayCluster", c.Name)
	}
	if !deploy {
		if err := p.reconcileTargetCapacity(ctx, c, dash.DeployServeConfig); err != nil {
			p.notReady = err.Error()
		}
	}
	if deploy {
		var capacity *int32
		if p.incremental() {
			capacity = p.targetCapacityOf(c)
		}
		body, err := serveConfigWithCapacity(rs.Spec.ServeConfigV2, capacity)
		if err == nil {
			err = dash.DeployServeConfig(ctx, body)
		}
		if err != nil {
			p.notReady = fmt.Sprintf("RayCluster %s refused the Serve config: %v", c.Name, err)
			p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedUpdateServeApps, "Failed to update serve applications to the RayCluster %s/%s: %v", rs.Namespace, c.Name, err)
			return false, apps
		}
		p.log.Info("deployed the Serve config", "rayCluster", c.Name, "why", why)
		p.r.configs.set(rs.UID, c.Name, rs.Spec.ServeConfigV2)
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeNormal, EventUpdatedServeApplications, "Updated serve applications to the RayCluster %s/%s", rs.Namespace, c.Name)
		// The applications' status is the old config's until Ray reports again.
		return false, apps
	}
	if !ready {
		p.notReady = fmt.Sprintf("Serve applications on RayCluster %s: %s", c.Name, appsSummary(apps))
		if len(apps) == 0 {
			p.notReady = fmt.Sprintf("RayCluster %s reports no Serve application", c.Name)
		}
	}
	return ready, apps
}

// reconcileServices creates the head and serve Services, or switches them to cluster.
func (p *pass) reconcileServices(ctx context.Context, c *rayv1.RayCluster) (*corev1.Service, error) {
	if _, err := p.reconcileService(ctx, headService(p.rs, c), c); err != nil {
		return nil, err
	}
	return p.reconcileService(ctx, serveService(p.rs, c), c)
}

func (p *pass) reconcileService(ctx context.Context, want *corev1.Service, c *rayv1.RayCluster) (*corev1.Service, error) {
	rs := p.rs
	have := &corev1.Service{}
	err := p.r.client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case err == nil:
		if have.Spec.Selector[rayparams.LabelCluster] == c.Name {
			return have, nil
		}
		want.Spec.ClusterIP, want.Spec.ClusterIPs = have.Spec.ClusterIP, have.Spec.ClusterIPs
		want.Spec.IPFamilies, want.Spec.IPFamilyPolicy = have.Spec.IPFamilies, have.Spec.IPFamilyPolicy
		have.Spec = want.Spec
		if err := p.r.client.Update(ctx, have); err != nil {
			p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedUpdateService, "Failed to update the service %s/%s, %v", have.Namespace, have.Name, err)
			return nil, err
		}
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeNormal, EventUpdatedService, "Updated the service %s/%s to select RayCluster %s", have.Namespace, have.Name, c.Name)
		return have, nil
	case apierrors.IsNotFound(err):
		if err := controllerutil.SetControllerReference(rs, want, p.r.client.Scheme()); err != nil {
			return nil, err
		}
		if err := p.r.client.Create(ctx, want); err != nil {
			p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedCreateService, "Failed to create the service %s/%s, %v", want.Namespace, want.Name, err)
			return nil, err
		}
		p.r.opts.Hooks.Wrote(ctx, want, chain.Create)
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeNormal, EventCreatedService, "Created the service %s/%s", want.Namespace, want.Name)
		return want, nil
	default:
		return nil, err
	}
}

// calculateStatus fills the status from what this pass saw: the clusters' status and applications,
// the promotion of a pending cluster the Services now select, a new pending cluster when the spec
// asks for one, the serve endpoints and the conditions.
func (p *pass) calculateStatus(ctx context.Context, serveSvc *corev1.Service, active, pending *rayv1.RayCluster, activeApps, pendingApps map[string]rayv1.AppStatus) error {
	rs := p.rs
	st := &rs.Status
	st.ObservedGeneration = rs.Generation
	st.ActiveServiceStatus.RayClusterStatus, st.PendingServiceStatus.RayClusterStatus = rayv1.RayClusterStatus{}, rayv1.RayClusterStatus{}
	if active != nil {
		st.ActiveServiceStatus.RayClusterStatus = active.Status
	}
	if pending != nil {
		st.PendingServiceStatus.RayClusterStatus = pending.Status
	}
	st.ActiveServiceStatus.Applications = activeApps
	st.PendingServiceStatus.Applications = pendingApps

	pendingServing := false
	incremental := p.incremental()
	if serveSvc != nil || incremental {
		selected := ""
		if serveSvc != nil {
			selected = serveSvc.Spec.Selector[rayparams.LabelCluster]
		}
		pendingServing = selected != "" && selected == st.PendingServiceStatus.RayClusterName
		if incremental && st.ActiveServiceStatus.RayClusterName != "" {
			// The Gateway's traffic, not the Services, decides an incremental upgrade's promotion.
			pendingServing = p.incrementalPromotion(pending)
			selected = st.PendingServiceStatus.RayClusterName
		}
		if pendingServing {
			p.log.Info("promoting the pending RayCluster", "from", st.ActiveServiceStatus.RayClusterName, "to", selected)
			p.promoted = [2]string{st.ActiveServiceStatus.RayClusterName, selected}
			st.ActiveServiceStatus = st.PendingServiceStatus
			st.PendingServiceStatus = rayv1.RayServiceStatus{}
		}
	}
	if shouldPrepareNewCluster(rs, active, pending, pendingServing, incremental) {
		st.PendingServiceStatus = rayv1.RayServiceStatus{RayClusterName: newClusterName(rs)}
		if incremental {
			st.PendingServiceStatus.TargetCapacity = capacityOfNewPending(&st.ActiveServiceStatus)
		}
		p.log.Info("preparing a new RayCluster", "rayCluster", st.PendingServiceStatus.RayClusterName)
	}

	n, err := p.serveEndpoints(ctx)
	if err != nil {
		return err
	}
	st.NumServeEndpoints = n
	setConditions(rs, p.notReady)
	return nil
}

// serveEndpoints counts the distinct ready Pods in the serve Service's EndpointSlices.
func (p *pass) serveEndpoints(ctx context.Context) (int32, error) {
	var slices discoveryv1.EndpointSliceList
	if err := p.r.client.List(ctx, &slices, client.InNamespace(p.rs.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: serveServiceName(p.rs)}); err != nil {
		return 0, err
	}
	pods := map[string]bool{}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				continue
			}
			key := ""
			if e.TargetRef != nil {
				key = string(e.TargetRef.UID) + e.TargetRef.Name
			}
			if key == "" && len(e.Addresses) > 0 {
				key = e.Addresses[0]
			}
			pods[key] = true
		}
	}
	return int32(len(pods)), nil //nolint:gosec // a count of Pods
}

// writeStatus writes the status when it changed (lastUpdateTime aside).
func (p *pass) writeStatus(ctx context.Context) error {
	a, b := p.orig.Status.DeepCopy(), p.rs.Status.DeepCopy()
	a.LastUpdateTime, b.LastUpdateTime = nil, nil
	if equality.Semantic.DeepEqual(a, b) {
		return nil
	}
	now := metav1.NewTime(p.now)
	p.rs.Status.LastUpdateTime = &now
	if err := p.r.client.Status().Update(ctx, p.rs); err != nil {
		return err
	}
	st := p.rs.Status
	p.r.opts.Hooks.StatusWritten(ctx, p.rs, chain.F("serviceStatus", strconv.Quote(string(st.ServiceStatus))),
		chain.F("active", st.ActiveServiceStatus.RayClusterName+" ("+appsSummary(st.ActiveServiceStatus.Applications)+")"),
		chain.F("pending", st.PendingServiceStatus.RayClusterName+" ("+appsSummary(st.PendingServiceStatus.Applications)+")"),
		chain.F("numServeEndpoints", st.NumServeEndpoints))
	if p.promoted[1] != "" {
		p.r.opts.Hooks.Transition(ctx, p.rs, "active="+p.promoted[0], "active="+p.promoted[1])
	}
	if o, n := string(p.orig.Status.ServiceStatus), string(st.ServiceStatus); o != n {
		p.r.opts.Hooks.Transition(ctx, p.rs, o, n)
	}
	return nil
}
