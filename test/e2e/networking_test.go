package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
// and the Ingress and the NetworkPolicy each get a Warning event saying that nothing acts on them here.
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

	for name, reason := range map[string]string{"dashboard": "NoIngressController", "head-only": "NetworkPolicyNotEnforced"} {
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
