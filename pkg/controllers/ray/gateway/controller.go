// Package gateway is rayctl's own Gateway API implementation (with `rayctl up --gateway-api`). It claims
// the GatewayClasses whose spec.controllerName is ControllerName and, for each Gateway of such a class,
// runs an HTTP reverse proxy in a pod of the node: a Deployment of one pod running `rayctl gateway-proxy`
// (in the raysim image, which carries the rayctl binary), a ClusterIP Service named
// <gateway>-<gatewayclass> with the listeners' ports, and a ConfigMap of the same name holding the
// routing table the proxy follows (its ServiceAccount may read that ConfigMap and nothing else). The
// table comes from the HTTPRoutes attached to the Gateway's listeners: path (Exact, PathPrefix,
// RegularExpression), header, query parameter and method matches, hostnames, backendRefs to Services
// with weights, the filters RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite
// and RequestMirror (on rules and on backends) and the rules' request and backendRequest timeouts. A
// rule with another filter (CORS) is dropped with the route's PartiallyInvalid condition (Accepted
// False, UnsupportedValue, when no rule is left); HTTPS/TLS listeners and other route kinds are not
// implemented.
//
// Status is written as a conformant implementation writes it: GatewayClass Accepted and
// SupportedVersion; Gateway Accepted and Programmed (once the proxy pod is ready), the Service's
// ClusterIP as its address, and per listener Accepted, Programmed, ResolvedRefs and Conflicted with the
// number of attached routes; each HTTPRoute's status.parents entry for the Gateway with Accepted and
// ResolvedRefs. From the host, `kubectl port-forward svc/<gateway>-<gatewayclass> <local>:<listener
// port>` reaches the proxy.
package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// Name is the controller's name in the registry (and its chain hooks).
const Name = "gateway"

// ControllerName is what a GatewayClass's spec.controllerName says for rayctl's Gateway to claim it.
const ControllerName gwv1.GatewayController = "rayctl.dev/gateway-controller"

// DefaultProxyImage is the image of the proxy pods: the raysim image every `rayctl up` loads, which holds
// /usr/bin/rayctl.
const DefaultProxyImage = "rayctl.local/raysim:latest"

// Options configures the controller.
type Options struct {
	// ProxyImage is the proxy pods' image; empty means DefaultProxyImage.
	ProxyImage string
	// ReconcilerOptions are the recorder, the chain hooks and the number of workers.
	ctrlset.ReconcilerOptions
}

// Setup registers the controller with the registry's env and default options.
func Setup(mgr manager.Manager, env ctrlset.Env) error { return Options{}.Setup(mgr, env) }

// Setup registers the Gateway and GatewayClass reconcilers in mgr, whose scheme must know
// gateway.networking.k8s.io/v1. Where the API server does not serve the Gateway API (rayctl up without
// --gateway-api) it registers nothing.
func (o Options) Setup(mgr manager.Manager, env ctrlset.Env) error {
	if !mgr.GetScheme().Recognizes(gwv1.SchemeGroupVersion.WithKind("Gateway")) {
		return fmt.Errorf("gateway controller: the manager's scheme lacks %s", gwv1.SchemeGroupVersion)
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: gwv1.GroupName, Kind: "GatewayClass"}, gwv1.GroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			mgr.GetLogger().WithName(Name).Info("the Gateway API is not served; rayctl's Gateway controller stays off (rayctl up --gateway-api)")
			return nil
		}
		return err
	}
	if o.ProxyImage == "" {
		o.ProxyImage = DefaultProxyImage
	}
	o.ReconcilerOptions = o.ReconcilerOptions.FromEnv(env).WithDefaults(0)
	r := &reconciler{client: mgr.GetClient(), opts: o}
	classHooks := o.Hooks.Sub("class")
	if err := classHooks.NewControllerManagedBy(mgr).
		For(&gwv1.GatewayClass{}, claimedClass).
		Complete(&classReconciler{client: mgr.GetClient(), hooks: classHooks}); err != nil {
		return err
	}
	return r.setupWithManager(mgr)
}

// routeSpecChanged passes an HTTPRoute's creation, deletion and spec changes, not the status writes
// (this controller's own among them).
var routeSpecChanged = chainhooks.Named("generation changed", predicate.GenerationChangedPredicate{})

// claimedClass passes the GatewayClasses that name ControllerName.
var claimedClass = chainhooks.Named("controllerName is rayctl's", predicate.NewPredicateFuncs(func(o client.Object) bool {
	return o.(*gwv1.GatewayClass).Spec.ControllerName == ControllerName
}))

// reconciler programs the Gateways of rayctl's GatewayClasses.
type reconciler struct {
	client client.Client
	opts   Options
}

// setupWithManager wires the watches: For Gateway; Owns the proxy's Deployment, Service and ConfigMap;
// the GatewayClasses, HTTPRoutes (their spec), ReferenceGrants and backend Services a Gateway depends on.
func (r *reconciler) setupWithManager(mgr manager.Manager) error {
	return r.opts.Hooks.NewControllerManagedBy(mgr).
		For(&gwv1.Gateway{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.ConfigMap{}).
		Watches(&gwv1.GatewayClass{}, "gateway class of the gateway", handler.EnqueueRequestsFromMapFunc(r.gatewaysOfClass)).
		Watches(&gwv1.HTTPRoute{}, "route's parent gateway", handler.EnqueueRequestsFromMapFunc(r.gatewaysOfRoute), routeSpecChanged).
		Watches(&gwv1.ReferenceGrant{}, "reference grant", handler.EnqueueRequestsFromMapFunc(r.allGateways)).
		Watches(&corev1.Service{}, "proxy or backend service", handler.EnqueueRequestsFromMapFunc(r.gatewaysOfService)).
		MaxConcurrentReconciles(r.opts.MaxConcurrentReconciles).
		Complete(r)
}

// Reconcile programs one Gateway: its proxy, its routing table, and the status of it and its routes.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	gw := &gwv1.Gateway{}
	if err := r.client.Get(ctx, req.NamespacedName, gw); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	class := &gwv1.GatewayClass{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: string(gw.Spec.GatewayClassName)}, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if class.Spec.ControllerName != ControllerName || !gw.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	w, err := r.readWorld(ctx, gw)
	if err != nil {
		return reconcile.Result{}, err
	}
	p := attach(gw, w)
	table, err := json.Marshal(p.table)
	if err != nil {
		return reconcile.Result{}, err
	}
	inf := infraFor(gw, class, r.opts.ProxyImage)
	svc, dep, err := r.ensureInfra(ctx, gw, inf, table)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.writeGatewayStatus(ctx, gw, p, svc, dep); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.writeRouteStatuses(ctx, gw, p, w)
}

// readWorld reads what gw's routing depends on: every HTTPRoute, the Services they name, the
// ReferenceGrants and (for selector-allowed routes) the namespaces.
func (r *reconciler) readWorld(ctx context.Context, gw *gwv1.Gateway) (world, error) {
	w := world{services: map[types.NamespacedName]*corev1.Service{}, namespaces: map[string]*corev1.Namespace{}}
	routes := &gwv1.HTTPRouteList{}
	if err := r.client.List(ctx, routes); err != nil {
		return w, err
	}
	w.routes = routes.Items
	grants := &gwv1.ReferenceGrantList{}
	if err := r.client.List(ctx, grants); err != nil {
		return w, err
	}
	w.grants = grants.Items
	for _, rt := range w.routes {
		if !routeNames(&rt, gw) {
			continue
		}
		if _, ok := w.namespaces[rt.Namespace]; !ok {
			ns := &corev1.Namespace{}
			if err := r.client.Get(ctx, types.NamespacedName{Name: rt.Namespace}, ns); err == nil {
				w.namespaces[rt.Namespace] = ns
			}
		}
		for _, key := range serviceRefs(&rt) {
			if _, ok := w.services[key]; ok {
				continue
			}
			svc := &corev1.Service{}
			switch err := r.client.Get(ctx, key, svc); {
			case err == nil:
				w.services[key] = svc
			case !apierrors.IsNotFound(err):
				return w, err
			}
		}
	}
	return w, nil
}

// routeNames reports whether rt names gw among its parents.
func routeNames(rt *gwv1.HTTPRoute, gw *gwv1.Gateway) bool {
	for _, ref := range rt.Spec.ParentRefs {
		if refersTo(ref, rt.Namespace, gw) {
			return true
		}
	}
	return false
}

// ourParentStatus reports whether s is this controller's entry for gw.
func ourParentStatus(s gwv1.RouteParentStatus, routeNS string, gw *gwv1.Gateway) bool {
	return s.ControllerName == ControllerName && refersTo(s.ParentRef, routeNS, gw)
}

// writeGatewayStatus writes gw's conditions, address and listeners, if they changed.
func (r *reconciler) writeGatewayStatus(ctx context.Context, gw *gwv1.Gateway, p plan, svc *corev1.Service, dep *appsv1.Deployment) error {
	gen := gw.Generation
	st := gw.Status.DeepCopy()
	invalid := 0
	for _, ls := range p.listeners {
		if !ls.accepted || !ls.resolvedRefs {
			invalid++
		}
	}
	acceptedReason := string(gwv1.GatewayReasonAccepted)
	if invalid > 0 {
		acceptedReason = string(gwv1.GatewayReasonListenersNotValid)
	}
	accepted := condition(string(gwv1.GatewayConditionAccepted), invalid < len(p.listeners), acceptedReason, "", gen)
	if len(gw.Spec.Addresses) > 0 {
		accepted = condition(string(gwv1.GatewayConditionAccepted), false, string(gwv1.GatewayReasonUnsupportedAddress), "rayctl's Gateway takes its address from its Service; spec.addresses is not supported", gen)
	}
	ready := dep != nil && dep.Status.AvailableReplicas > 0 && dep.Status.ObservedGeneration >= dep.Generation && svc != nil && svc.Spec.ClusterIP != ""
	programmed := condition(string(gwv1.GatewayConditionProgrammed), ready && accepted.Status == metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed), "", gen)
	if !ready {
		programmed.Reason, programmed.Message = string(gwv1.GatewayReasonPending), "waiting for the proxy pod of Deployment "+inProxyName(dep)+" to be ready"
	} else if accepted.Status != metav1.ConditionTrue {
		programmed.Reason, programmed.Message = string(gwv1.GatewayReasonInvalid), "the Gateway is not accepted"
	}
	setConditions(&st.Conditions, accepted, programmed)
	st.Addresses = nil
	if svc != nil && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		st.Addresses = []gwv1.GatewayStatusAddress{{Type: ptrTo(gwv1.IPAddressType), Value: svc.Spec.ClusterIP}}
	}
	old := map[gwv1.SectionName]gwv1.ListenerStatus{}
	for _, l := range gw.Status.Listeners {
		old[l.Name] = l
	}
	st.Listeners = nil
	for _, ls := range p.listeners {
		l := old[ls.l.Name]
		l.Name, l.AttachedRoutes = ls.l.Name, ls.attached
		l.SupportedKinds = nil
		if ls.resolvedRefs {
			l.SupportedKinds = []gwv1.RouteGroupKind{httpRouteKind}
		}
		lprog := condition(string(gwv1.ListenerConditionProgrammed), ls.accepted && ls.resolvedRefs && ready, string(gwv1.ListenerReasonProgrammed), "", gen)
		if !ls.accepted || !ls.resolvedRefs {
			lprog.Reason = string(gwv1.ListenerReasonInvalid)
		} else if !ready {
			lprog.Reason = string(gwv1.ListenerReasonPending)
		}
		conflict := condition(string(gwv1.ListenerConditionConflicted), ls.conflicted, string(gwv1.ListenerReasonNoConflicts), "", gen)
		if ls.conflicted {
			conflict.Reason = string(gwv1.ListenerReasonHostnameConflict)
		}
		setConditions(&l.Conditions,
			condition(string(gwv1.ListenerConditionAccepted), ls.accepted, ls.reason, ls.message, gen),
			condition(string(gwv1.ListenerConditionResolvedRefs), ls.resolvedRefs, ls.resolvedReason, ls.resolved, gen),
			conflict, lprog)
		st.Listeners = append(st.Listeners, l)
	}
	if apiequality.Semantic.DeepEqual(st, &gw.Status) {
		return nil
	}
	gw = gw.DeepCopy()
	gw.Status = *st
	if err := r.client.Status().Update(ctx, gw); err != nil {
		return err
	}
	r.opts.Hooks.StatusWritten(ctx, gw, chain.F("accepted", string(accepted.Status)), chain.F("programmed", string(programmed.Status)))
	return nil
}

func inProxyName(dep *appsv1.Deployment) string {
	if dep == nil {
		return "(not made yet)"
	}
	return dep.Name
}

// writeRouteStatuses writes, on each route that names gw (or did), this controller's parent entries
// for gw, leaving other parents' and other controllers' entries alone.
func (r *reconciler) writeRouteStatuses(ctx context.Context, gw *gwv1.Gateway, p plan, w world) error {
	results := map[types.NamespacedName][]parentResult{}
	for _, rr := range p.routes {
		results[client.ObjectKeyFromObject(rr.route)] = rr.parents
	}
	for i := range w.routes {
		rt := &w.routes[i]
		key := client.ObjectKeyFromObject(rt)
		prs, names := results[key]
		hadOurs := false
		for _, s := range rt.Status.Parents {
			hadOurs = hadOurs || ourParentStatus(s, rt.Namespace, gw)
		}
		if !names && !hadOurs {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &gwv1.HTTPRoute{}
			if err := r.client.Get(ctx, key, cur); err != nil {
				return err
			}
			next := routeParents(cur, gw, prs)
			if apiequality.Semantic.DeepEqual(next, cur.Status.Parents) {
				return nil
			}
			cur.Status.Parents = next
			if err := r.client.Status().Update(ctx, cur); err != nil {
				return err
			}
			r.opts.Hooks.StatusWritten(ctx, cur, routeSummary(cur, gw)...)
			return nil
		})
		if client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// routeParents is rt's status.parents with this controller's entries for gw replaced by prs.
func routeParents(rt *gwv1.HTTPRoute, gw *gwv1.Gateway, prs []parentResult) []gwv1.RouteParentStatus {
	var out []gwv1.RouteParentStatus
	prev := map[string]gwv1.RouteParentStatus{}
	for _, s := range rt.Status.Parents {
		if ourParentStatus(s, rt.Namespace, gw) {
			prev[parentKey(s.ParentRef)] = s
			continue
		}
		out = append(out, s)
	}
	for _, pr := range prs {
		s := prev[parentKey(pr.ref)]
		s.ParentRef, s.ControllerName = pr.ref, ControllerName
		setConditions(&s.Conditions,
			condition(string(gwv1.RouteConditionAccepted), pr.accepted, pr.acceptedReason, pr.acceptMsg, rt.Generation),
			condition(string(gwv1.RouteConditionResolvedRefs), pr.resolved, pr.resolvedReason, pr.resolvMsg, rt.Generation))
		if pr.partial != "" {
			setConditions(&s.Conditions, condition(string(gwv1.RouteConditionPartiallyInvalid), true, string(gwv1.RouteReasonUnsupportedValue), pr.partial, rt.Generation))
		} else {
			meta.RemoveStatusCondition(&s.Conditions, string(gwv1.RouteConditionPartiallyInvalid))
		}
		out = append(out, s)
	}
	return out
}

// routeSummary is what a route's status write says of its parent entries for gw, for the chain:
// accepted and resolvedRefs, with their reasons.
func routeSummary(rt *gwv1.HTTPRoute, gw *gwv1.Gateway) []chain.Field {
	var out []chain.Field
	for _, s := range rt.Status.Parents {
		if !ourParentStatus(s, rt.Namespace, gw) {
			continue
		}
		if c := meta.FindStatusCondition(s.Conditions, string(gwv1.RouteConditionAccepted)); c != nil {
			out = append(out, chain.F("accepted", string(c.Status)+"/"+c.Reason))
		}
		if c := meta.FindStatusCondition(s.Conditions, string(gwv1.RouteConditionResolvedRefs)); c != nil {
			out = append(out, chain.F("resolvedRefs", string(c.Status)+"/"+c.Reason))
		}
	}
	return out
}

func parentKey(ref gwv1.ParentReference) string {
	b, _ := json.Marshal(ref)
	return string(b)
}

// classReconciler accepts the GatewayClasses that name ControllerName.
type classReconciler struct {
	client client.Client
	hooks  *chainhooks.Hooks
}

// Reconcile marks a claimed GatewayClass Accepted (and its version supported).
func (c *classReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	gc := &gwv1.GatewayClass{}
	if err := c.client.Get(ctx, req.NamespacedName, gc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if gc.Spec.ControllerName != ControllerName {
		return reconcile.Result{}, nil
	}
	st := gc.Status.DeepCopy()
	accepted := condition(string(gwv1.GatewayClassConditionStatusAccepted), true, string(gwv1.GatewayClassReasonAccepted), "claimed by rayctl's Gateway controller", gc.Generation)
	if gc.Spec.ParametersRef != nil {
		accepted = condition(string(gwv1.GatewayClassConditionStatusAccepted), false, string(gwv1.GatewayClassReasonInvalidParameters), "rayctl's Gateway takes no parameters", gc.Generation)
	}
	setConditions(&st.Conditions, accepted,
		condition(string(gwv1.GatewayClassConditionStatusSupportedVersion), true, string(gwv1.GatewayClassReasonSupportedVersion), "", gc.Generation))
	if apiequality.Semantic.DeepEqual(st, &gc.Status) {
		return reconcile.Result{}, nil
	}
	gc.Status = *st
	if err := c.client.Status().Update(ctx, gc); err != nil {
		return reconcile.Result{}, err
	}
	c.hooks.StatusWritten(ctx, gc, chain.F("accepted", string(accepted.Status)))
	return reconcile.Result{}, nil
}
