package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

const networkingManifests = `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: e2e-nginx
spec:
  controller: k8s.io/ingress-nginx
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: dashboard
spec:
  ingressClassName: e2e-nginx
  rules:
  - host: ray.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: raycluster-head-svc
            port:
              number: 8265
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: head-only
spec:
  podSelector:
    matchLabels:
      ray.io/node-type: head
  ingress:
  - ports:
    - port: 8265
`

// brokenIngress has a Prefix path that is not absolute.
const brokenIngress = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: broken
spec:
  rules:
  - http:
      paths:
      - path: dashboard
        pathType: Prefix
        backend:
          service:
            name: raycluster-head-svc
            port:
              number: 8265
`

// TestIngressAndNetworkPolicyAreStoredWithAWarning: networking.k8s.io/v1 Ingress, IngressClass and
// NetworkPolicy are stored and printed as on a cluster, a broken Ingress is refused with the field's path,
// and the Ingress gets a Warning event saying that nothing acts on it here (the NetworkPolicy too where
// pods share the host's network).
func TestIngressAndNetworkPolicyAreStoredWithAWarning(t *testing.T) {
	in, ctx, ns := setup(t)
	t.Cleanup(func() {
		_ = in.Client.NetworkingV1().IngressClasses().Delete(context.Background(), "e2e-nginx", metav1.DeleteOptions{})
	})
	out, stderr, err := in.Kubectl(ctx, networkingManifests, "apply", "-n", ns, "-f", "-")
	must(t, "applying an IngressClass, an Ingress and a NetworkPolicy: "+out+stderr, err)

	out, _, err = in.Kubectl(ctx, "", "get", "-n", ns, "ingress,networkpolicy")
	must(t, "kubectl get ingress,networkpolicy", err)
	for _, want := range []string{"CLASS", "HOSTS", "e2e-nginx", "ray.example.com", "POD-SELECTOR", "ray.io/node-type=head"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get ingress,networkpolicy lacks %q:\n%s", want, out)
		}
	}
	np, err := in.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, "head-only", metav1.GetOptions{})
	must(t, "reading the NetworkPolicy", err)
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Ingress" || np.Spec.Ingress[0].Ports[0].Protocol == nil {
		t.Errorf("the NetworkPolicy is not defaulted as on a cluster: policyTypes %v, ports %+v", np.Spec.PolicyTypes, np.Spec.Ingress[0].Ports)
	}

	_, stderr, err = in.Kubectl(ctx, brokenIngress, "apply", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(stderr, "spec.rules[0].http.paths[0].path") {
		t.Errorf("an Ingress with a relative Prefix path: err %v, stderr %q; want a refusal naming spec.rules[0].http.paths[0].path", err, stderr)
	}

	warned := map[string]string{"dashboard": "NoIngressController"}
	if in.NodeNetNS() == "" {
		// Pods on the host's network: policies are not enforced, and say so (elsewhere pkg/netpolicy enforces them).
		warned["head-only"] = "NetworkPolicyNotEnforced"
	}
	for name, reason := range warned {
		eventually(t, ctx, nodeTimeout, "the "+reason+" Warning on "+name, func(ctx context.Context) (bool, error) {
			events, err := in.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
			})
			if err != nil {
				return false, err
			}
			for _, e := range events.Items {
				if e.Reason == reason && e.Type == corev1.EventTypeWarning {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// gatewayManifests is KubeRay's Gateway API shape for a Ray dashboard: a Gateway of a class whose
// controller does not run here, and an HTTPRoute to the head service, with a ReferenceGrant beside them.
// The GatewayClass is cluster-scoped; its name carries the namespace, which is unique per test.
const gatewayManifests = `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: e2e-NS
spec:
  controllerName: example.com/gateway-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: ray-gateway
spec:
  gatewayClassName: e2e-NS
  listeners:
  - name: http
    protocol: HTTP
    port: 80
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: dashboard
spec:
  parentRefs:
  - name: ray-gateway
  hostnames: ["ray.example.com"]
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /
    backendRefs:
    - name: raycluster-head-svc
      port: 8265
---
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata:
  name: from-routes
spec:
  from:
  - group: gateway.networking.k8s.io
    kind: HTTPRoute
    namespace: other
  to:
  - group: ""
    kind: Service
`

// brokenHTTPRoute breaks one of the HTTPRoute CRD's CEL rules (a PathPrefix must be absolute) and one of
// its schema's bounds (a port above 65535).
const brokenHTTPRoute = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: broken
spec:
  parentRefs:
  - name: ray-gateway
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: dashboard
    backendRefs:
    - name: raycluster-head-svc
      port: 70000
`

// TestGatewayAPIIsStoredWithAWarning: by default the Gateway API is not served (as on kind, whose users
// install its CRDs themselves); with `rayctl up --gateway-api` its standard kinds are served (as the
// CRDs a cluster installs), printed with their columns, validated by their schemas and CEL rules with
// the field's path in a 422, and, with no Gateway controller running, keep the status the API defaults
// (Programmed Unknown, "Waiting for controller") while a Warning event says nothing acts on them.
func TestGatewayAPIIsStoredWithAWarning(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, stderr, err := shared(t).Kubectl(ctx, "", "get", "gateways", "-A")
	if err == nil || !strings.Contains(stderr, `doesn't have a resource type "gateways"`) {
		t.Errorf("kubectl get gateways on a default rayctl up: err %v, stderr %q; want the resource type unknown", err, stderr)
	}
	in := framework.StartTest(t, "--gateway-api", "--kubelet=false")
	ns := newNamespace(t, ctx, in)
	class := "e2e-" + ns
	t.Cleanup(func() {
		_, _, _ = in.Kubectl(context.Background(), "", "delete", "gatewayclass", class, "--ignore-not-found")
	})
	manifests := strings.ReplaceAll(gatewayManifests, "e2e-NS", class)
	out, stderr, err := in.Kubectl(ctx, manifests, "apply", "-n", ns, "-f", "-")
	must(t, "applying a GatewayClass, a Gateway, an HTTPRoute and a ReferenceGrant: "+out+stderr, err)

	out, _, err = in.Kubectl(ctx, "", "get", "-n", ns, "gateway,httproute,referencegrant")
	must(t, "kubectl get gateway,httproute,referencegrant", err)
	for _, want := range []string{"CLASS", "PROGRAMMED", class, "Unknown", "HOSTNAMES", "ray.example.com", "referencegrant.gateway.networking.k8s.io/from-routes"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get gateway,httproute,referencegrant lacks %q:\n%s", want, out)
		}
	}

	_, stderr, err = in.Kubectl(ctx, brokenHTTPRoute, "apply", "-n", ns, "-f", "-")
	for _, want := range []string{"spec.rules[0].matches[0].path", "value must be an absolute path", "spec.rules[0].backendRefs[0].port"} {
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("an HTTPRoute with a relative PathPrefix and port 70000: err %v, stderr %q; want a refusal naming %q", err, stderr, want)
		}
	}

	hasWarning := func(ctx context.Context, namespace, kind, name string) (bool, error) {
		events, err := in.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.String(),
		})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "NoGatewayController" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, kind) {
				return true, nil
			}
		}
		return false, nil
	}
	for _, obj := range []struct{ namespace, kind, name string }{
		{metav1.NamespaceDefault, "GatewayClass", class}, {ns, "Gateway", "ray-gateway"}, {ns, "HTTPRoute", "dashboard"},
	} {
		eventually(t, ctx, nodeTimeout, "the NoGatewayController Warning on "+obj.kind+" "+obj.name, func(ctx context.Context) (bool, error) {
			return hasWarning(ctx, obj.namespace, obj.kind, obj.name)
		})
	}

	// The status is the API's default, as on a cluster whose Gateway controller is absent.
	out, _, err = in.Kubectl(ctx, "", "get", "-n", ns, "gateway", "ray-gateway", "-o",
		`jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason};{end}`)
	must(t, "reading the Gateway's conditions", err)
	if out != "Accepted=Unknown/Pending;Programmed=Unknown/Pending;" {
		t.Errorf("the Gateway's conditions are %q; want Accepted and Programmed Unknown/Pending", out)
	}
}
