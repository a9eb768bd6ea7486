package rayservice

// Incremental upgrades (upgradeStrategy.type NewClusterWithIncrementalUpgrade), as KubeRay v1.7 runs
// them where the Gateway API is served: the RayService gets a Gateway (<rayservice>-gateway, of
// clusterUpgradeOptions.gatewayClassName, one HTTP listener on port 80) and an HTTPRoute
// (<rayservice>-httproute) whose one rule sends / to each cluster's own serve Service
// (<cluster>-serve-svc) with weights. During an upgrade the new (pending) cluster's Serve
// target_capacity is raised by maxSurgePercent at a time, traffic follows it in stepSizePercent steps
// every intervalSeconds (never above its capacity), the old (active) cluster's capacity is lowered by
// maxSurgePercent once the two sum above 100, and the new cluster is promoted when the old one's
// capacity is 0 and the new one carries all traffic. A spec changed back (or to a third spec) during
// the upgrade rolls back: traffic and capacity return to the old cluster in the same steps, and the
// pending cluster is dropped. Status carries targetCapacity, trafficRoutedPercent and
// lastTrafficMigratedTime for both clusters, and the RollbackInProgress condition.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// reasonDesiredClusterSpecChanged is KubeRay v1.7's reason of RollbackInProgress (v1.6.2's types lack it).
const reasonDesiredClusterSpecChanged rayv1.RayServiceConditionReason = "DesiredClusterSpecChanged"

// gatewayListenerPort is the port of the RayService's Gateway listener (named "http"), as KubeRay's.
const gatewayListenerPort = 80

func gatewayName(rs *rayv1.RayService) string   { return rs.Name + "-gateway" }
func httpRouteName(rs *rayv1.RayService) string { return rs.Name + "-httproute" }

// clusterServeServiceName is a cluster's own serve Service, the HTTPRoute's backend.
func clusterServeServiceName(c *rayv1.RayCluster) string { return c.Name + "-serve-svc" }

// isIncremental reports whether rs asks for incremental upgrades.
func isIncremental(rs *rayv1.RayService) bool {
	s := rs.Spec.UpgradeStrategy
	return s != nil && s.Type != nil && *s.Type == rayv1.RayServiceNewClusterWithIncrementalUpgrade
}

// incremental reports whether this pass upgrades incrementally: asked for, and the Gateway API served.
func (p *pass) incremental() bool { return p.r.opts.GatewayAPI && isIncremental(p.rs) }

// rollingBack reads the RollbackInProgress condition.
func rollingBack(rs *rayv1.RayService) bool {
	return meta.IsStatusConditionTrue(rs.Status.Conditions, string(rayv1.RollbackInProgress))
}

// validateIncremental checks clusterUpgradeOptions as KubeRay v1.7 does, with the fields' paths.
func validateIncremental(rs *rayv1.RayService) error {
	const path = "spec.upgradeStrategy.clusterUpgradeOptions"
	if !ptr.Deref(rs.Spec.RayClusterSpec.EnableInTreeAutoscaling, false) {
		return errors.New("spec.rayClusterConfig.enableInTreeAutoscaling: Ray Autoscaler is required for NewClusterWithIncrementalUpgrade")
	}
	o := rs.Spec.UpgradeStrategy.ClusterUpgradeOptions
	if o == nil {
		return errors.New(path + ": ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade")
	}
	surge := ptr.Deref(o.MaxSurgePercent, 100)
	switch {
	case surge < 0 || surge > 100:
		return errors.New(path + ".maxSurgePercent: maxSurgePercent must be between 0 and 100")
	case o.StepSizePercent == nil || *o.StepSizePercent < 0 || *o.StepSizePercent > 100:
		return errors.New(path + ".stepSizePercent: stepSizePercent must be between 0 and 100")
	case *o.StepSizePercent > surge:
		return errors.New(path + ".stepSizePercent: stepSizePercent must be less than or equal to maxSurgePercent")
	case o.IntervalSeconds == nil || *o.IntervalSeconds <= 0:
		return errors.New(path + ".intervalSeconds: intervalSeconds must be greater than 0")
	case o.GatewayClassName == "":
		return errors.New(path + ".gatewayClassName: gatewayClassName is required for NewClusterWithIncrementalUpgrade")
	}
	return nil
}

// reconcileRollback sets or clears RollbackInProgress while an upgrade runs: the goal spec back at the
// active cluster's (or at a third spec) rolls back; at the pending cluster's, the upgrade goes on.
func (p *pass) reconcileRollback(active, pending *rayv1.RayCluster) {
	rs := p.rs
	if !upgradeInProgress(rs) || active == nil || pending == nil {
		return
	}
	goal, err := clusterSpecHash(rs.Spec.RayClusterSpec)
	if err != nil {
		return
	}
	switch goal {
	case active.Annotations[rayparams.AnnotationClusterHash]:
		if !rollingBack(rs) {
			setCondition(rs, rayv1.RollbackInProgress, metav1.ConditionTrue, reasonDesiredClusterSpecChanged, "Goal state reverted to original cluster, rolling back.")
		}
	case pending.Annotations[rayparams.AnnotationClusterHash]:
		meta.RemoveStatusCondition(&rs.Status.Conditions, string(rayv1.RollbackInProgress))
	default:
		if !rollingBack(rs) {
			setCondition(rs, rayv1.RollbackInProgress, metav1.ConditionTrue, reasonDesiredClusterSpecChanged, "Goal state changed mid-upgrade, rolling back to original cluster.")
		}
	}
}

// skipServeDeploy says whether a cluster's Serve config is left as it is: the active cluster's during an
// upgrade (the new config goes to the pending one), the pending cluster's during a rollback.
func (p *pass) skipServeDeploy(c *rayv1.RayCluster) bool {
	if !p.incremental() || !upgradeInProgress(p.rs) {
		return false
	}
	isActive := c.Name == p.rs.Status.ActiveServiceStatus.RayClusterName
	return isActive != rollingBack(p.rs)
}

// targetCapacityOf is the target_capacity the status gives cluster c (nil when none).
func (p *pass) targetCapacityOf(c *rayv1.RayCluster) *int32 {
	st := &p.rs.Status
	switch c.Name {
	case st.ActiveServiceStatus.RayClusterName:
		return st.ActiveServiceStatus.TargetCapacity
	case st.PendingServiceStatus.RayClusterName:
		return st.PendingServiceStatus.TargetCapacity
	}
	return nil
}

// serveConfigWithCapacity is the Serve config as JSON with target_capacity set (when capacity is).
func serveConfigWithCapacity(configYAML string, capacity *int32) ([]byte, error) {
	body, err := serveConfigJSON(configYAML)
	if err != nil || capacity == nil {
		return body, err
	}
	cfg := map[string]any{}
	if err := json.Unmarshal(body, &cfg); err != nil {
		return nil, err
	}
	cfg["target_capacity"] = *capacity
	return json.Marshal(cfg)
}

// reconcileTargetCapacity moves one cluster's Serve target_capacity one step (maxSurgePercent), as the
// upgrade (or rollback) allows, once traffic has caught up with the capacity already given.
func (p *pass) reconcileTargetCapacity(ctx context.Context, c *rayv1.RayCluster, deploy func(ctx context.Context, body []byte) error) error {
	rs := p.rs
	st := &rs.Status
	if !p.incremental() || !upgradeInProgress(rs) || st.ActiveServiceStatus.RayClusterName == "" || st.PendingServiceStatus.RayClusterName == "" {
		return nil
	}
	if !p.routeReady(ctx) {
		return nil
	}
	if st.ActiveServiceStatus.TargetCapacity == nil {
		st.ActiveServiceStatus.TargetCapacity = ptr.To[int32](100)
	}
	if st.PendingServiceStatus.TargetCapacity == nil {
		st.PendingServiceStatus.TargetCapacity = ptr.To[int32](0)
	}
	activeCap, pendingCap := *st.ActiveServiceStatus.TargetCapacity, *st.PendingServiceStatus.TargetCapacity
	surge := ptr.Deref(rs.Spec.UpgradeStrategy.ClusterUpgradeOptions.MaxSurgePercent, 100)
	isActive := c.Name == st.ActiveServiceStatus.RayClusterName
	var goal int32
	switch {
	case rollingBack(rs):
		if activeCap == 100 && pendingCap == 0 || activeCap != ptr.Deref(st.ActiveServiceStatus.TrafficRoutedPercent, 0) {
			return nil
		}
		switch {
		case activeCap+pendingCap > 100 && !isActive:
			goal = max(0, pendingCap-surge)
		case activeCap+pendingCap <= 100 && isActive:
			goal = min(100, activeCap+surge)
		default:
			return nil
		}
	default:
		if activeCap == 0 && pendingCap == 100 || pendingCap != ptr.Deref(st.PendingServiceStatus.TrafficRoutedPercent, 0) {
			return nil
		}
		switch {
		case activeCap+pendingCap > 100 && isActive:
			goal = max(0, activeCap-surge)
		case activeCap+pendingCap <= 100 && !isActive:
			goal = min(100, pendingCap+surge)
		default:
			return nil
		}
	}
	cfg := p.r.configs.get(rs.UID, c.Name)
	if cfg == "" {
		cfg = rs.Spec.ServeConfigV2
	}
	body, err := serveConfigWithCapacity(cfg, &goal)
	if err == nil {
		err = deploy(ctx, body)
	}
	if err != nil {
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedUpdateTargetCapacity, "Failed to update target_capacity of serve applications to the RayCluster %s/%s: %v", rs.Namespace, c.Name, err)
		return err
	}
	p.log.Info("set Serve target_capacity", "rayCluster", c.Name, "targetCapacity", goal)
	if isActive {
		st.ActiveServiceStatus.TargetCapacity = &goal
	} else {
		st.PendingServiceStatus.TargetCapacity = &goal
	}
	p.r.opts.Recorder.Eventf(rs, corev1.EventTypeNormal, EventUpdatedServeTargetCapacity, "Updated target_capacity of serve applications to %d on the RayCluster %s/%s", goal, rs.Namespace, c.Name)
	return nil
}

// routeReady reports whether the RayService's Gateway is Accepted and Programmed and its HTTPRoute
// Accepted with its references resolved, as KubeRay checks before moving capacity.
func (p *pass) routeReady(ctx context.Context) bool {
	gw := &gwv1.Gateway{}
	if err := p.r.client.Get(ctx, client.ObjectKey{Namespace: p.rs.Namespace, Name: gatewayName(p.rs)}, gw); err != nil {
		return false
	}
	if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted)) || !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
		p.notReady = fmt.Sprintf("waiting for Gateway %s to be accepted and programmed", gw.Name)
		return false
	}
	rt := &gwv1.HTTPRoute{}
	if err := p.r.client.Get(ctx, client.ObjectKey{Namespace: p.rs.Namespace, Name: httpRouteName(p.rs)}, rt); err != nil {
		return false
	}
	for _, s := range rt.Status.Parents {
		if string(s.ParentRef.Name) == gw.Name && meta.IsStatusConditionTrue(s.Conditions, string(gwv1.RouteConditionAccepted)) && meta.IsStatusConditionTrue(s.Conditions, string(gwv1.RouteConditionResolvedRefs)) {
			return true
		}
	}
	p.notReady = fmt.Sprintf("waiting for HTTPRoute %s to be accepted by Gateway %s", rt.Name, gw.Name)
	return false
}

// reconcileGatewayObjects makes each cluster's serve Service, the Gateway and the HTTPRoute with the
// traffic split this pass computes, and returns the route.
func (p *pass) reconcileGatewayObjects(ctx context.Context, active, pending *rayv1.RayCluster, pendingReady bool) (*gwv1.HTTPRoute, error) {
	rs := p.rs
	for _, c := range []*rayv1.RayCluster{active, pending} {
		if c == nil {
			continue
		}
		svc := serveService(rs, c)
		svc.ObjectMeta = metav1.ObjectMeta{Name: clusterServeServiceName(c), Namespace: rs.Namespace, Labels: map[string]string{rayparams.LabelCluster: c.Name}}
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		if err := controllerutil.SetControllerReference(c, svc, p.r.client.Scheme()); err != nil {
			return nil, err
		}
		switch err := p.r.client.Create(ctx, svc); {
		case err == nil:
			p.r.opts.Hooks.Wrote(ctx, svc, chain.Create)
		case !apierrors.IsAlreadyExists(err):
			return nil, err
		}
	}
	opts := rs.Spec.UpgradeStrategy.ClusterUpgradeOptions
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: gatewayName(rs), Namespace: rs.Namespace}}
	if _, err := p.r.opts.Hooks.CreateOrUpdate(ctx, p.r.client, gw, func() error {
		gw.Spec.GatewayClassName = gwv1.ObjectName(opts.GatewayClassName)
		// Written with the API's defaults, so that an unchanged Gateway is not updated again each pass.
		gw.Spec.Listeners = []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: gatewayListenerPort,
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}}}}
		return controllerutil.SetControllerReference(rs, gw, p.r.client.Scheme())
	}); err != nil {
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedToCreateGateway, "Failed to create or update the Gateway %s/%s: %v", rs.Namespace, gw.Name, err)
		return nil, err
	}
	if active == nil {
		return nil, nil
	}
	activeW, pendingW := p.trafficSplit(pendingReady)
	ns := gwv1.Namespace(rs.Namespace)
	backend := func(c *rayv1.RayCluster, w int32) gwv1.HTTPBackendRef {
		return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Service")),
			Name: gwv1.ObjectName(clusterServeServiceName(c)), Namespace: &ns, Port: ptr.To(servingPort(c))}, Weight: ptr.To(w)}}
	}
	refs := []gwv1.HTTPBackendRef{backend(active, activeW)}
	if pending != nil {
		refs = append(refs, backend(pending, pendingW))
	}
	rt := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: httpRouteName(rs), Namespace: rs.Namespace}}
	if _, err := p.r.opts.Hooks.CreateOrUpdate(ctx, p.r.client, rt, func() error {
		rt.Spec.ParentRefs = []gwv1.ParentReference{{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")),
			Name: gwv1.ObjectName(gw.Name), Namespace: &ns}}
		rt.Spec.Rules = []gwv1.HTTPRouteRule{{
			Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/")}}},
			BackendRefs: refs,
		}}
		return controllerutil.SetControllerReference(rs, rt, p.r.client.Scheme())
	}); err != nil {
		p.r.opts.Recorder.Eventf(rs, corev1.EventTypeWarning, EventFailedToCreateHTTPRoute, "Failed to create or update the HTTPRoute %s/%s: %v", rs.Namespace, rt.Name, err)
		return nil, err
	}
	return rt, nil
}

// trafficSplit is the active and pending clusters' weights for this pass: the status's, moved one
// stepSizePercent towards the cluster gaining traffic once intervalSeconds have passed since it last
// moved, never beyond that cluster's target capacity (and, upgrading, only while the pending cluster's
// applications run).
func (p *pass) trafficSplit(pendingReady bool) (activeW, pendingW int32) {
	st := &p.rs.Status
	activeW = ptr.Deref(st.ActiveServiceStatus.TrafficRoutedPercent, 100)
	pendingW = ptr.Deref(st.PendingServiceStatus.TrafficRoutedPercent, 0)
	if st.PendingServiceStatus.RayClusterName == "" {
		return 100, 0
	}
	o := p.rs.Spec.UpgradeStrategy.ClusterUpgradeOptions
	pendingCap := ptr.Deref(st.PendingServiceStatus.TargetCapacity, 0)
	activeCap := ptr.Deref(st.ActiveServiceStatus.TargetCapacity, 100)
	back := rollingBack(p.rs)
	if !back && pendingW == pendingCap || back && activeW == activeCap {
		return activeW, pendingW
	}
	last := st.PendingServiceStatus.LastTrafficMigratedTime
	if back {
		last = st.ActiveServiceStatus.LastTrafficMigratedTime
	}
	interval := time.Duration(ptr.Deref(o.IntervalSeconds, 1)) * time.Second
	if last != nil && p.now.Sub(last.Time) < interval {
		p.requeue = min(p.requeue, interval-p.now.Sub(last.Time)+10*time.Millisecond)
		return activeW, pendingW
	}
	step := ptr.Deref(o.StepSizePercent, 0)
	switch {
	case back:
		activeW = min(100, activeW+step, activeCap)
		pendingW = 100 - activeW
	case pendingReady:
		pendingW = min(100, pendingW+step, pendingCap)
		activeW = 100 - pendingW
	}
	return activeW, pendingW
}

// recordTraffic copies the route's weights into the status (with the time each last changed).
func (p *pass) recordTraffic(rt *gwv1.HTTPRoute, pending *rayv1.RayCluster) {
	if rt == nil || len(rt.Spec.Rules) == 0 {
		return
	}
	st := &p.rs.Status
	now := metav1.NewTime(p.now)
	for _, ref := range rt.Spec.Rules[0].BackendRefs {
		w := ptr.Deref(ref.Weight, 1)
		name := string(ref.Name)
		var s *rayv1.RayServiceStatus
		switch {
		case st.ActiveServiceStatus.RayClusterName != "" && strings.HasPrefix(name, st.ActiveServiceStatus.RayClusterName+"-"):
			s = &st.ActiveServiceStatus
		case pending != nil && st.PendingServiceStatus.RayClusterName != "" && strings.HasPrefix(name, st.PendingServiceStatus.RayClusterName+"-"):
			s = &st.PendingServiceStatus
		default:
			continue
		}
		if ptr.Deref(s.TrafficRoutedPercent, -1) != w {
			s.LastTrafficMigratedTime = &now
		}
		s.TrafficRoutedPercent = ptr.To(w)
	}
}

// incrementalPromotion reports whether the incremental upgrade is done (the old cluster at capacity 0,
// the new one carrying all traffic), or a first cluster is to become active; and completes a rollback
// whose traffic and capacity are back on the active cluster.
func (p *pass) incrementalPromotion(pending *rayv1.RayCluster) bool {
	rs := p.rs
	st := &rs.Status
	if rollingBack(rs) {
		headReady := pending != nil && meta.IsStatusConditionTrue(pending.Status.Conditions, string(rayv1.HeadPodReady))
		if ptr.Deref(st.ActiveServiceStatus.TargetCapacity, -1) == 100 && ptr.Deref(st.ActiveServiceStatus.TrafficRoutedPercent, -1) == 100 &&
			(!headReady || ptr.Deref(st.PendingServiceStatus.TargetCapacity, -1) == 0 && ptr.Deref(st.PendingServiceStatus.TrafficRoutedPercent, -1) == 0) {
			p.log.Info("rollback complete; dropping the pending RayCluster", "rayCluster", st.PendingServiceStatus.RayClusterName)
			st.PendingServiceStatus = rayv1.RayServiceStatus{}
			meta.RemoveStatusCondition(&st.Conditions, string(rayv1.RollbackInProgress))
			setCondition(rs, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.NoPendingCluster, "Rollback complete, active Ray cluster exists and no pending Ray cluster")
		}
		return false
	}
	if st.ActiveServiceStatus.RayClusterName == "" {
		return st.PendingServiceStatus.RayClusterName != "" && pending != nil
	}
	return upgradeInProgress(rs) && pending != nil && ptr.Deref(st.ActiveServiceStatus.TargetCapacity, -1) == 0 &&
		ptr.Deref(st.PendingServiceStatus.TrafficRoutedPercent, -1) == 100
}

// capacityOfNewPending is the target capacity a new pending cluster starts with: all of it for a
// RayService's first cluster, none when it is to take traffic over from an active one.
func capacityOfNewPending(active *rayv1.RayServiceStatus) *int32 {
	if active.RayClusterName == "" {
		if active.TargetCapacity == nil {
			return ptr.To[int32](100)
		}
		return nil
	}
	return ptr.To[int32](0)
}
