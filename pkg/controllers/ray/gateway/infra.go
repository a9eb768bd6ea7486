package gateway

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/gatewayproxy"
)

// Labels of the objects made for a Gateway (the first is the Gateway API's well-known label).
const (
	GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"
	managedByLabel   = "app.kubernetes.io/managed-by"
	managedBy        = "rayctl-gateway"
)

// infra is what one Gateway runs on: every object is named name, in the Gateway's namespace.
type infra struct {
	name, namespace, image string
	labels                 map[string]string
	ports                  []int32
}

// InfraName is the name of the proxy's Service, Deployment, ConfigMap, ServiceAccount, Role and
// RoleBinding for a Gateway of a class: <gateway>-<class>, cut to 63 characters.
func InfraName(gateway, class string) string {
	n := gateway + "-" + class
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

func infraFor(gw *gwv1.Gateway, class *gwv1.GatewayClass, image string) infra {
	inf := infra{name: InfraName(gw.Name, class.Name), namespace: gw.Namespace, image: image,
		labels: map[string]string{GatewayNameLabel: gw.Name, managedByLabel: managedBy}}
	for _, l := range gw.Spec.Listeners {
		if l.Protocol == gwv1.HTTPProtocolType && l.Port != gatewayproxy.StatusPort && !slices.Contains(inf.ports, l.Port) {
			inf.ports = append(inf.ports, l.Port)
		}
	}
	slices.Sort(inf.ports)
	return inf
}

// ensureInfra creates or updates the proxy's objects, owned by gw, and returns its Service and
// Deployment as they now are.
func (r *reconciler) ensureInfra(ctx context.Context, gw *gwv1.Gateway, inf infra, table []byte) (*corev1.Service, *appsv1.Deployment, error) {
	meta := func(o client.Object) error {
		o.SetLabels(mergeLabels(o.GetLabels(), inf.labels))
		return controllerutil.SetControllerReference(gw, o, r.client.Scheme())
	}
	om := metav1.ObjectMeta{Name: inf.name, Namespace: inf.namespace}
	sa := &corev1.ServiceAccount{ObjectMeta: om}
	if _, err := r.opts.Hooks.CreateOrUpdate(ctx, r.client, sa, func() error { return meta(sa) }); err != nil {
		return nil, nil, fmt.Errorf("proxy service account: %w", err)
	}
	role := &rbacv1.Role{ObjectMeta: om}
	if _, err := r.opts.Hooks.CreateOrUpdate(ctx, r.client, role, func() error {
		role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{inf.name}, Verbs: []string{"get", "list", "watch"}}}
		return meta(role)
	}); err != nil {
		return nil, nil, fmt.Errorf("proxy role: %w", err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: om}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(rb), rb); client.IgnoreNotFound(err) != nil {
		return nil, nil, err
	} else if err != nil { // a RoleBinding's roleRef cannot change: it is made once
		rb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: inf.name}
		rb.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: inf.name, Namespace: inf.namespace}}
		if err := meta(rb); err != nil {
			return nil, nil, err
		}
		if err := r.client.Create(ctx, rb); err != nil {
			return nil, nil, fmt.Errorf("proxy role binding: %w", err)
		}
		r.opts.Hooks.Wrote(ctx, rb, chain.Create)
	}
	cm := &corev1.ConfigMap{ObjectMeta: om}
	if _, err := r.opts.Hooks.CreateOrUpdate(ctx, r.client, cm, func() error {
		cm.Data = map[string]string{gatewayproxy.ConfigMapKey: string(table)}
		return meta(cm)
	}); err != nil {
		return nil, nil, fmt.Errorf("proxy routing table: %w", err)
	}
	svc := &corev1.Service{ObjectMeta: om}
	if _, err := r.opts.Hooks.CreateOrUpdate(ctx, r.client, svc, func() error {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.Selector = inf.labels
		var ports []corev1.ServicePort
		for _, p := range inf.ports {
			ports = append(ports, corev1.ServicePort{Name: "http-" + strconv.Itoa(int(p)), Protocol: corev1.ProtocolTCP, Port: p, TargetPort: intstr.FromInt32(p)})
		}
		if len(ports) == 0 { // a Service needs a port: the status port then
			ports = []corev1.ServicePort{{Name: "status", Protocol: corev1.ProtocolTCP, Port: gatewayproxy.StatusPort, TargetPort: intstr.FromInt32(gatewayproxy.StatusPort)}}
		}
		svc.Spec.Ports = ports
		return meta(svc)
	}); err != nil {
		return nil, nil, fmt.Errorf("proxy service: %w", err)
	}
	dep := &appsv1.Deployment{ObjectMeta: om}
	if _, err := r.opts.Hooks.CreateOrUpdate(ctx, r.client, dep, func() error {
		dep.Spec.Replicas = ptrTo(int32(1))
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: inf.labels}
		dep.Spec.Template.Labels = inf.labels
		dep.Spec.Template.Spec = proxyPodSpec(inf)
		return meta(dep)
	}); err != nil {
		return nil, nil, fmt.Errorf("proxy deployment: %w", err)
	}
	return svc, dep, nil
}

// proxyPodSpec is the proxy pod: `rayctl gateway-proxy` on the pod's IP and loopback, ready once it
// serves the routing table.
func proxyPodSpec(inf infra) corev1.PodSpec {
	var ports []corev1.ContainerPort
	for _, p := range inf.ports {
		ports = append(ports, corev1.ContainerPort{Name: "http-" + strconv.Itoa(int(p)), ContainerPort: p, Protocol: corev1.ProtocolTCP})
	}
	ports = append(ports, corev1.ContainerPort{Name: "status", ContainerPort: gatewayproxy.StatusPort, Protocol: corev1.ProtocolTCP})
	grace := int64(5)
	return corev1.PodSpec{
		ServiceAccountName:            inf.name,
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{
			Name:            "proxy",
			Image:           inf.image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"rayctl", "gateway-proxy", "--namespace", inf.namespace, "--configmap", inf.name, "--bind", "$(POD_IP),127.0.0.1"},
			Env:             []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
			Ports:           ports,
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(gatewayproxy.StatusPort)}},
				PeriodSeconds: 1, FailureThreshold: 3,
			},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
		}},
	}
}

func mergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	for k, v := range want {
		have[k] = v
	}
	return have
}
