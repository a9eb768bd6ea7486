package raycluster

import (
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// The policies of KubeRay v1.7's deny-all shape: names, selectors, directions, the cluster's own pods let
// through, the user's rules added (a group's entry replacing the worker rules), and a K8sJobMode job's
// submitter let in to the dashboard port.
func TestBuildNetworkPolicies(t *testing.T) {
	raw := `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: c
  namespace: ns
  labels: {ray.io/job-submission-mode: K8sJobMode}
  ownerReferences:
  - {apiVersion: ray.io/v1, kind: RayJob, name: job, uid: u1, controller: true}
spec:
  networkPolicy:
    head:
      egressRules:
      - ports: [{port: 53, protocol: UDP}]
    worker:
      egressRules:
      - ports: [{port: 53}]
    workerGroups:
    - groupName: special
      ingressRules:
      - from: [{ipBlock: {cidr: 10.1.0.0/16}}]
  headGroupSpec:
    rayStartParams: {dashboard-port: "8300"}
  workerGroupSpecs:
  - groupName: plain
  - groupName: special
`
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(raw), &u.Object); err != nil {
		t.Fatal(err)
	}
	np, err := networkPolicyOf(u)
	if err != nil || np == nil {
		t.Fatalf("networkPolicyOf: %v, %v", np, err)
	}
	var c rayv1.RayCluster
	if err := yaml.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	if err := ValidateNetworkPolicy(&c, np); err != nil {
		t.Fatal(err)
	}
	pols := BuildNetworkPolicies(&c, np)
	if len(pols) != 3 || pols[0].Name != "c-head" || pols[1].Name != "c-workers-plain" || pols[2].Name != "c-workers-special" {
		t.Fatalf("policies %v", names(pols))
	}
	head, plain, special := pols[0], pols[1], pols[2]
	if got := fmt.Sprint(head.Spec.PodSelector.MatchLabels); got != "map[ray.io/cluster:c ray.io/node-type:head]" {
		t.Errorf("head selector %s", got)
	}
	if got := fmt.Sprint(special.Spec.PodSelector.MatchLabels); got != "map[ray.io/cluster:c ray.io/group:special ray.io/node-type:worker]" {
		t.Errorf("group selector %s", got)
	}
	if got := fmt.Sprint(head.Labels); got != "map[app.kubernetes.io/created-by:kuberay-operator app.kubernetes.io/name:kuberay ray.io/cluster:c ray.io/group:headgroup]" {
		t.Errorf("head labels %s", got)
	}
	for _, p := range pols {
		if fmt.Sprint(p.Spec.PolicyTypes) != "[Ingress Egress]" {
			t.Errorf("%s policyTypes %v, want both (DenyAll is the default)", p.Name, p.Spec.PolicyTypes)
		}
		if own := p.Spec.Ingress[0].From[0].PodSelector; own == nil || own.MatchLabels[rayparams.LabelCluster] != "c" || len(p.Spec.Ingress[0].Ports) != 0 {
			t.Errorf("%s: first ingress rule %+v, want the cluster's pods on every port", p.Name, p.Spec.Ingress[0])
		}
	}
	// The head: the submitter on the dashboard port, and its own DNS rule.
	sub := head.Spec.Ingress[1]
	if len(head.Spec.Ingress) != 2 || sub.From[0].PodSelector.MatchLabels["ray.io/originated-from-cr-name"] != "job" || sub.Ports[0].Port.IntValue() != 8300 {
		t.Errorf("head ingress %+v, want the RayJob's submitter on 8300", head.Spec.Ingress)
	}
	if len(head.Spec.Egress) != 2 || *head.Spec.Egress[1].Ports[0].Protocol != "UDP" {
		t.Errorf("head egress %+v", head.Spec.Egress)
	}
	// plain takes the worker rules (the protocol defaulted to TCP); special its own entry instead.
	if len(plain.Spec.Egress) != 2 || *plain.Spec.Egress[1].Ports[0].Protocol != "TCP" || len(plain.Spec.Ingress) != 1 {
		t.Errorf("plain: ingress %+v egress %+v", plain.Spec.Ingress, plain.Spec.Egress)
	}
	if len(special.Spec.Egress) != 1 || len(special.Spec.Ingress) != 2 || special.Spec.Ingress[1].From[0].IPBlock == nil {
		t.Errorf("special: ingress %+v egress %+v", special.Spec.Ingress, special.Spec.Egress)
	}

	// DenyAllIngress restricts ingress only, and refuses egress rules.
	np.Mode = ptr.To(NetworkPolicyDenyAllIngress)
	if err := ValidateNetworkPolicy(&c, np); err == nil || err.Error() != `networkPolicy.head.egressRules cannot be set when mode is "DenyAllIngress" (egress is not restricted)` {
		t.Errorf("head egress rules under DenyAllIngress: %v", err)
	}
	np.Head.EgressRules = nil
	for _, p := range BuildNetworkPolicies(&c, np) {
		if fmt.Sprint(p.Spec.PolicyTypes) != "[Ingress]" || p.Spec.Egress != nil {
			t.Errorf("%s under DenyAllIngress: %v, egress %v", p.Name, p.Spec.PolicyTypes, p.Spec.Egress)
		}
	}
	// Not a RayJob's K8sJobMode cluster: no submitter rule.
	c.Labels = nil
	if got := BuildNetworkPolicies(&c, np)[0].Spec.Ingress; len(got) != 1 {
		t.Errorf("head ingress of a plain cluster: %+v", got)
	}
}

func names(pols []*networkingv1.NetworkPolicy) []string {
	var out []string
	for _, p := range pols {
		out = append(out, p.Name)
	}
	return out
}
