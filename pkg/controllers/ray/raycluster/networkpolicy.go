package raycluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// NetworkPolicyName is the name of the controller that acts on a RayCluster's spec.networkPolicy (KubeRay
// v1.7's, behind its RayClusterNetworkPolicy feature gate: rayctl acts on it as KubeRay with the gate on).
const NetworkPolicyName = "raycluster-networkpolicy"

// The networkPolicy modes (KubeRay v1.7): which directions the cluster's pods are isolated in.
const (
	NetworkPolicyDenyAll        = "DenyAll"
	NetworkPolicyDenyAllIngress = "DenyAllIngress"
	NetworkPolicyDenyAllEgress  = "DenyAllEgress"
)

// The events of the NetworkPolicy controller, KubeRay's reasons.
const (
	EventCreatedNetworkPolicy       = "CreatedNetworkPolicy"
	EventUpdatedNetworkPolicy       = "UpdatedNetworkPolicy"
	EventDeletedNetworkPolicy       = "DeletedNetworkPolicy"
	EventFailedToCreateNetworkPol   = "FailedToCreateNetworkPolicy"
	EventNetworkPolicyNameCollision = "NetworkPolicyNameCollision"
)

// NetworkPolicyConfig is a RayCluster's spec.networkPolicy (KubeRay v1.7; rayctl's Go types are v1.6.2's,
// which lack it, so the controller reads it from the object as stored).
type NetworkPolicyConfig struct {
	// Mode is DenyAll (the default), DenyAllIngress or DenyAllEgress.
	Mode *string `json:"mode,omitempty"`
	// Head's rules are added to the head's policy.
	Head *NetworkPolicyRules `json:"head,omitempty"`
	// Worker's rules are added to every worker group's policy without an entry in WorkerGroups.
	Worker *NetworkPolicyRules `json:"worker,omitempty"`
	// WorkerGroups' entries replace Worker for their group.
	WorkerGroups []WorkerGroupNetworkPolicyRules `json:"workerGroups,omitempty"`
}

// NetworkPolicyRules are rules added to a generated policy.
type NetworkPolicyRules struct {
	// IngressRules are added to the policy's ingress rules.
	IngressRules []networkingv1.NetworkPolicyIngressRule `json:"ingressRules,omitempty"`
	// EgressRules are added to the policy's egress rules.
	EgressRules []networkingv1.NetworkPolicyEgressRule `json:"egressRules,omitempty"`
}

// WorkerGroupNetworkPolicyRules are one worker group's rules.
type WorkerGroupNetworkPolicyRules struct {
	// GroupName is the worker group's name.
	GroupName          string `json:"groupName"`
	NetworkPolicyRules `json:",inline"`
}

// networkPolicyReconciler makes a RayCluster's NetworkPolicies as KubeRay v1.7 does: with
// spec.networkPolicy set, one for the head (<cluster>-head) and one per worker group
// (<cluster>-workers-<group>), each isolating its pods in the mode's directions while letting the
// cluster's own pods through (and, for a K8sJobMode RayJob's cluster, the job's submitter to the
// dashboard), plus the user's rules; owned by the cluster, and removed when the field or the group goes.
type networkPolicyReconciler struct {
	client   client.Client
	scheme   *runtime.Scheme
	recorder record.EventRecorder
}

// SetupNetworkPolicy is the ctrlset.SetupFunc of the NetworkPolicy controller.
func SetupNetworkPolicy(mgr ctrl.Manager, env ctrlset.Env) error {
	r := &networkPolicyReconciler{client: mgr.GetClient(), scheme: mgr.GetScheme(), recorder: env.Recorder}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rayv1.GroupVersion.WithKind("RayCluster"))
	return ctrl.NewControllerManagedBy(mgr).
		Named(NetworkPolicyName).
		For(u, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&networkingv1.NetworkPolicy{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(env.ReconcileConcurrency, 1)}).
		Complete(r)
}

// Reconcile brings one RayCluster's NetworkPolicies to what its spec.networkPolicy asks for.
func (r *networkPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rayv1.GroupVersion.WithKind("RayCluster"))
	if err := r.client.Get(ctx, req.NamespacedName, u); err != nil || u.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var c rayv1.RayCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		return ctrl.Result{}, err
	}
	if m := c.Spec.ManagedBy; m != nil && *m != "" && *m != rayparams.ManagedByKubeRay {
		return ctrl.Result{}, nil
	}
	np, err := networkPolicyOf(u)
	if err != nil {
		return ctrl.Result{}, err
	}
	if np == nil {
		return ctrl.Result{}, r.deleteStale(ctx, &c, nil)
	}
	if err := ValidateNetworkPolicy(&c, np); err != nil {
		// KubeRay refuses such a spec (its validation, with the InvalidRayClusterSpec Warning); here the
		// cluster's pods still start, and it gets no NetworkPolicies until the spec is fixed.
		r.recorder.Eventf(&c, corev1.EventTypeWarning, EventInvalidSpec, "The RayCluster spec is invalid %s/%s: %v", c.Namespace, c.Name, err)
		return ctrl.Result{}, nil
	}
	want := BuildNetworkPolicies(&c, np)
	names := map[string]bool{}
	var errs []error
	for _, p := range want {
		names[p.Name] = true
		// One policy that cannot be written (a name another object holds) does not keep the others.
		errs = append(errs, r.createOrUpdate(ctx, &c, p))
	}
	errs = append(errs, r.deleteStale(ctx, &c, names))
	return ctrl.Result{}, errors.Join(errs...)
}

// ValidateNetworkPolicy checks np against cluster c as KubeRay v1.7 does: rules only for the directions
// the mode restricts, worker group names fit for a policy's name, and every workerGroups entry naming a
// group of the cluster.
func ValidateNetworkPolicy(c *rayv1.RayCluster, np *NetworkPolicyConfig) error {
	mode := NetworkPolicyDenyAll
	if np.Mode != nil && *np.Mode != "" {
		mode = *np.Mode
	}
	switch mode {
	case NetworkPolicyDenyAll, NetworkPolicyDenyAllIngress, NetworkPolicyDenyAllEgress:
	default:
		return fmt.Errorf("networkPolicy.mode %q is not one of DenyAll, DenyAllIngress, DenyAllEgress", mode)
	}
	check := func(where string, r *NetworkPolicyRules) error {
		if r == nil {
			return nil
		}
		if mode == NetworkPolicyDenyAllEgress && len(r.IngressRules) > 0 {
			return fmt.Errorf("networkPolicy.%s.ingressRules cannot be set when mode is %q (ingress is not restricted)", where, mode)
		}
		if mode == NetworkPolicyDenyAllIngress && len(r.EgressRules) > 0 {
			return fmt.Errorf("networkPolicy.%s.egressRules cannot be set when mode is %q (egress is not restricted)", where, mode)
		}
		return nil
	}
	if err := check("head", np.Head); err != nil {
		return err
	}
	if err := check("worker", np.Worker); err != nil {
		return err
	}
	groups := map[string]bool{}
	for _, g := range c.Spec.WorkerGroupSpecs {
		if errs := validation.IsDNS1123Label(g.GroupName); len(errs) > 0 {
			return fmt.Errorf("worker group name %q must be a valid DNS-1123 label when networkPolicy is set (it is part of the NetworkPolicy's name): %s",
				g.GroupName, strings.Join(errs, "; "))
		}
		groups[g.GroupName] = true
	}
	for i := range np.WorkerGroups {
		g := &np.WorkerGroups[i]
		if err := check(fmt.Sprintf("workerGroups[%q]", g.GroupName), &g.NetworkPolicyRules); err != nil {
			return err
		}
		if !groups[g.GroupName] {
			return fmt.Errorf("networkPolicy.workerGroups[%q] does not match any group name in workerGroupSpecs", g.GroupName)
		}
	}
	return nil
}

// networkPolicyOf reads spec.networkPolicy from the stored object (nil when unset).
func networkPolicyOf(u *unstructured.Unstructured) (*NetworkPolicyConfig, error) {
	m, ok, err := unstructured.NestedMap(u.Object, "spec", "networkPolicy")
	if err != nil || !ok {
		return nil, err
	}
	np := &NetworkPolicyConfig{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, np); err != nil {
		return nil, fmt.Errorf("spec.networkPolicy: %w", err)
	}
	return np, nil
}

// BuildNetworkPolicies are the NetworkPolicies KubeRay v1.7 makes for cluster c with spec.networkPolicy
// np: the head's, then one per worker group in spec order.
func BuildNetworkPolicies(c *rayv1.RayCluster, np *NetworkPolicyConfig) []*networkingv1.NetworkPolicy {
	mode := NetworkPolicyDenyAll
	if np.Mode != nil && *np.Mode != "" {
		mode = *np.Mode
	}
	ingress := mode == NetworkPolicyDenyAll || mode == NetworkPolicyDenyAllIngress
	egress := mode == NetworkPolicyDenyAll || mode == NetworkPolicyDenyAllEgress
	out := []*networkingv1.NetworkPolicy{policyFor(c, c.Name+"-head", rayparams.HeadGroup,
		map[string]string{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.HeadNode)},
		ingress, egress, headIngress(c), np.Head)}
	for _, g := range c.Spec.WorkerGroupSpecs {
		custom := np.Worker
		for i := range np.WorkerGroups {
			if np.WorkerGroups[i].GroupName == g.GroupName {
				custom = &np.WorkerGroups[i].NetworkPolicyRules
				break
			}
		}
		out = append(out, policyFor(c, c.Name+"-workers-"+g.GroupName, g.GroupName,
			map[string]string{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.WorkerNode), rayparams.LabelGroup: g.GroupName},
			ingress, egress, clusterIngress(c), custom))
	}
	return out
}

// policyFor is one generated policy: the cluster's own pods always let through, the user's rules added.
func policyFor(c *rayv1.RayCluster, name, group string, selector map[string]string, ingress, egress bool,
	base []networkingv1.NetworkPolicyIngressRule, custom *NetworkPolicyRules) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: map[string]string{
			rayparams.LabelCluster: c.Name, rayparams.LabelGroup: group, rayparams.LabelAppName: rayparams.AppName, rayparams.LabelCreatedBy: rayparams.CreatedBy}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: selector}},
	}
	if ingress {
		p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		p.Spec.Ingress = base
		if custom != nil {
			p.Spec.Ingress = append(p.Spec.Ingress, custom.IngressRules...)
		}
	}
	if egress {
		p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{clusterPeer(c)}}}
		if custom != nil {
			p.Spec.Egress = append(p.Spec.Egress, custom.EgressRules...)
		}
	}
	defaultProtocols(&p.Spec)
	return p
}

// clusterPeer is every pod of the cluster.
func clusterPeer(c *rayv1.RayCluster) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{rayparams.LabelCluster: c.Name}}}
}

// clusterIngress lets the cluster's own pods in, on every port.
func clusterIngress(c *rayv1.RayCluster) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{clusterPeer(c)}}}
}

// headIngress is clusterIngress, and for the cluster of a K8sJobMode RayJob its submitter pod to the
// dashboard port.
func headIngress(c *rayv1.RayCluster) []networkingv1.NetworkPolicyIngressRule {
	rules := clusterIngress(c)
	if c.Labels[rayparams.LabelSubmissionMode] != string(rayv1.K8sJobMode) {
		return rules
	}
	for _, o := range c.OwnerReferences {
		if o.Kind != "RayJob" || o.Controller == nil || !*o.Controller || !strings.HasPrefix(o.APIVersion, "ray.io/") {
			continue
		}
		port := intstr.FromInt32(rayparams.DefaultDashboardPort)
		if s, ok := c.Spec.HeadGroupSpec.RayStartParams["dashboard-port"]; ok {
			if n, err := strconv.ParseInt(s, 10, 32); err == nil {
				port = intstr.FromInt32(int32(n))
			}
		}
		tcp := corev1.ProtocolTCP
		return append(rules, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				rayparams.LabelOriginName: o.Name, rayparams.LabelOriginatedCRD: rayparams.OriginRayJob}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
		})
	}
	return rules
}

// defaultProtocols sets an unset port protocol to TCP, as the API server defaults it, so that a policy
// read back compares equal to the one built.
func defaultProtocols(spec *networkingv1.NetworkPolicySpec) {
	tcp := corev1.ProtocolTCP
	fix := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				ports[i].Protocol = &tcp
			}
		}
	}
	for i := range spec.Ingress {
		fix(spec.Ingress[i].Ports)
	}
	for i := range spec.Egress {
		fix(spec.Egress[i].Ports)
	}
}

// createOrUpdate makes p (controlled by c), or brings an existing one of c's to p's spec and labels; one
// of the same name that c does not control is left alone, with a Warning.
func (r *networkPolicyReconciler) createOrUpdate(ctx context.Context, c *rayv1.RayCluster, p *networkingv1.NetworkPolicy) error {
	if err := controllerutil.SetControllerReference(c, p, r.scheme); err != nil {
		return err
	}
	err := r.client.Create(ctx, p)
	if err == nil {
		r.recorder.Eventf(c, corev1.EventTypeNormal, EventCreatedNetworkPolicy, "Created NetworkPolicy %s/%s", p.Namespace, p.Name)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		r.recorder.Eventf(c, corev1.EventTypeWarning, EventFailedToCreateNetworkPol, "Failed to create NetworkPolicy %s/%s: %v", p.Namespace, p.Name, err)
		return err
	}
	var have networkingv1.NetworkPolicy
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(p), &have); err != nil {
		return err
	}
	if !metav1.IsControlledBy(&have, c) {
		r.recorder.Eventf(c, corev1.EventTypeWarning, EventNetworkPolicyNameCollision,
			"NetworkPolicy %s/%s exists and is not this RayCluster's: its pods are not isolated by it; rename one of the two", p.Namespace, p.Name)
		return fmt.Errorf("NetworkPolicy %s/%s exists and is not RayCluster %s's", p.Namespace, p.Name, c.Name)
	}
	labels := maps.Clone(have.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, p.Labels) // ours set, other tools' kept
	if apiequality.Semantic.DeepEqual(have.Spec, p.Spec) && apiequality.Semantic.DeepEqual(have.Labels, labels) {
		return nil
	}
	have.Spec, have.Labels = p.Spec, labels
	if err := r.client.Update(ctx, &have); err != nil {
		return err
	}
	r.recorder.Eventf(c, corev1.EventTypeNormal, EventUpdatedNetworkPolicy, "Updated NetworkPolicy %s/%s", p.Namespace, p.Name)
	return nil
}

// deleteStale deletes c's NetworkPolicies whose names keep does not hold.
func (r *networkPolicyReconciler) deleteStale(ctx context.Context, c *rayv1.RayCluster, keep map[string]bool) error {
	var list networkingv1.NetworkPolicyList
	if err := r.client.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{rayparams.LabelCluster: c.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if keep[p.Name] || !metav1.IsControlledBy(p, c) {
			continue
		}
		if err := r.client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.recorder.Eventf(c, corev1.EventTypeNormal, EventDeletedNetworkPolicy, "Deleted NetworkPolicy %s/%s", c.Namespace, p.Name)
	}
	return nil
}
