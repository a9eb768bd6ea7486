package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// dialFromPod connects from inside pod ns/pod to addr with bash's /dev/tcp and says "open", "refused"
// or what else happened.
func dialFromPod(ctx context.Context, e *rayEnv, pod, ip string, port int) string {
	script := fmt.Sprintf("if exec 3<>/dev/tcp/%s/%d; then echo open; fi", ip, port)
	out, stderr, err := e.in.Kubectl(ctx, "", "-n", e.ns, "exec", pod, "--", "bash", "-c", script)
	switch {
	case err == nil && strings.TrimSpace(out) == "open":
		return "open"
	case strings.Contains(stderr, "Connection refused"):
		return "refused"
	}
	return fmt.Sprintf("%q %q %v", out, stderr, err)
}

// idlePod starts a pod labelled role=client that idles, for dialing from.
func idlePod(t *testing.T, e *rayEnv, name string) {
	t.Helper()
	termination := int64(1)
	c := shContainer("main", "while true; do sleep 1; done")
	c.Image, c.ImagePullPolicy = simImage, corev1.PullNever
	_, err := e.in.Client.CoreV1().Pods(e.ns).Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "client"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: &termination},
	}, metav1.CreateOptions{})
	must(t, "creating pod "+name, err)
	waitPod(t, e.ctx, e.in, e.ns, name, "runs", allRunning)
}

// waitDial waits until a connection from pod to ip:port ends as want ("open" or "refused"): the
// enforcer writes its table a moment after the API has the change.
func waitDial(t *testing.T, e *rayEnv, pod, ip string, port int, want string) {
	t.Helper()
	e.waitFor(t, time.Minute, fmt.Sprintf("%s → %s:%d %s", pod, ip, port, want), func(ctx context.Context) (bool, string, error) {
		got := dialFromPod(ctx, e, pod, ip, port)
		return got == want, got, nil
	})
}

// noEventReason fails the test if an object of the namespace has an event of reason whose message
// holds about ("" for any).
func noEventReason(t *testing.T, e *rayEnv, reason, about string) {
	t.Helper()
	l, err := e.in.Client.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", reason).String()})
	must(t, "listing events", err)
	for _, ev := range l.Items {
		if strings.Contains(ev.Message, about) {
			t.Errorf("%s %s has a %s event: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, reason, ev.Message)
		}
	}
}

// TestNetworkPolicyEnforced: in the pod network, a deny-all ingress NetworkPolicy on a Ray head refuses
// another pod's connections to its dashboard and GCS ports; an allow rule for that pod reopens the
// dashboard's port while the GCS port stays closed; and the policies get no "not enforced" Warning.
func TestNetworkPolicyEnforced(t *testing.T) {
	in := shared(t)
	if in.NodeNetNS() == "" {
		t.Skip("pods share the host's network here: NetworkPolicies are not enforced")
	}
	denyThenAllow(t, raySetup(t, in))
}

// TestNetworkPolicyEnforcedRootless: the same as an ordinary user, where the node namespace (and its
// nftables table) belongs to rayctl's own user namespace.
func TestNetworkPolicyEnforcedRootless(t *testing.T) {
	t.Parallel()
	ctx := framework.TestContext(t, 10*time.Minute)
	bin, err := framework.Binary()
	must(t, "the rayctl binary", err)
	mustReach(t, ctx, laptopUser, bin)
	in, err := framework.StartAs(laptopUser, "--ray=sim", "--node-capacity", sharedCapacity)
	if in != nil {
		t.Cleanup(func() { in.Cleanup(t) })
	}
	must(t, "rayctl up as an ordinary user", err)
	if !strings.Contains(in.Output.String(), "(rootless)") || !strings.Contains(in.Output.String(), "enforced in the pod network") {
		t.Fatalf("rayctl up as an ordinary user does not run rootless with NetworkPolicies enforced:\n%s", in.Output.String())
	}
	denyThenAllow(t, newRayEnv(t, in))
}

// denyThenAllow is the deny-all, then allow-one-port scenario on a raysim head in e's namespace.
func denyThenAllow(t *testing.T, e *rayEnv) {
	in := e.in
	c := sampleCluster(t, "guarded")
	c.Spec.WorkerGroupSpecs = nil
	e.createCluster(t, c)
	_, head, _ := e.waitClusterReady(t, "guarded", 0)
	idlePod(t, e, "client")
	ip := head.Status.PodIP
	for _, port := range []int{8265, 6379} {
		if got := dialFromPod(e.ctx, e, "client", ip, port); got != "open" {
			t.Fatalf("client → head:%d before any policy: %s", port, got)
		}
	}

	headOnly := metav1.LabelSelector{MatchLabels: map[string]string{"ray.io/cluster": "guarded", "ray.io/node-type": "head"}}
	_, err := in.Client.NetworkingV1().NetworkPolicies(e.ns).Create(e.ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: headOnly, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, metav1.CreateOptions{})
	must(t, "creating the deny-all policy", err)
	waitDial(t, e, "client", ip, 8265, "refused")
	if got := dialFromPod(e.ctx, e, "client", ip, 6379); got != "refused" {
		t.Errorf("client → head:6379 under deny-all: %s, want refused", got)
	}

	dashboard := intstr.FromString("dashboard") // the head container's named port 8265
	_, err = in.Client.NetworkingV1().NetworkPolicies(e.ns).Create(e.ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "clients-to-dashboard"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: headOnly, Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &dashboard}},
		}}},
	}, metav1.CreateOptions{})
	must(t, "creating the allow policy", err)
	waitDial(t, e, "client", ip, 8265, "open")
	if got := dialFromPod(e.ctx, e, "client", ip, 6379); got != "refused" {
		t.Errorf("client → head:6379 with only the dashboard allowed: %s, want refused", got)
	}
	// The node still reaches the head (the kubelet's probes, port-forward): the cluster stays ready.
	e.waitClusterReady(t, "guarded", 0)
	noEventReason(t, e, "NetworkPolicyNotEnforced", "")
}

// networkPolicyClusterYAML is KubeRay v1.7's network-policy-deny-all sample's networkPolicy, on raysim.
const networkPolicyClusterYAML = `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: raycluster-deny-all
spec:
  networkPolicy:
    mode: DenyAll
    head:
      egressRules:
      - to:
        - namespaceSelector:
            matchLabels:
              kubernetes.io/metadata.name: kube-system
          podSelector:
            matchLabels:
              k8s-app: kube-dns
        ports:
        - port: 53
          protocol: UDP
        - port: 53
          protocol: TCP
    worker:
      egressRules:
      - to:
        - namespaceSelector:
            matchLabels:
              kubernetes.io/metadata.name: kube-system
          podSelector:
            matchLabels:
              k8s-app: kube-dns
        ports:
        - port: 53
          protocol: UDP
        - port: 53
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayctl.local/raysim:latest
          ports:
          - containerPort: 6379
            name: gcs-server
          - containerPort: 8265
            name: dashboard
  workerGroupSpecs:
  - replicas: 1
    minReplicas: 1
    maxReplicas: 5
    groupName: workergroup
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayctl.local/raysim:latest
`

// TestKubeRayNetworkPolicyField: a RayCluster with KubeRay v1.7's spec.networkPolicy (its deny-all
// sample) gets the NetworkPolicies KubeRay makes — <cluster>-head and <cluster>-workers-<group>, labelled
// and owned as KubeRay's — and no UnsupportedField Warning for the field; the cluster still comes up
// (its pods reach each other and the node's DNS), while a pod outside it is refused at the head.
func TestKubeRayNetworkPolicyField(t *testing.T) {
	in := shared(t)
	e := raySetup(t, in)
	_, stderr, err := in.Kubectl(e.ctx, networkPolicyClusterYAML, "apply", "-n", e.ns, "-f", "-")
	must(t, "kubectl apply the RayCluster: "+stderr, err)
	var pols map[string]networkingv1.NetworkPolicy
	e.waitFor(t, time.Minute, "the cluster's two NetworkPolicies", func(ctx context.Context) (bool, string, error) {
		l, err := in.Client.NetworkingV1().NetworkPolicies(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=raycluster-deny-all"})
		if err != nil {
			return false, "", err
		}
		pols = map[string]networkingv1.NetworkPolicy{}
		var names []string
		for _, p := range l.Items {
			pols[p.Name] = p
			names = append(names, p.Name)
		}
		return len(pols) == 2, strings.Join(names, ","), nil
	})
	head, ok1 := pols["raycluster-deny-all-head"]
	workers, ok2 := pols["raycluster-deny-all-workers-workergroup"]
	if !ok1 || !ok2 {
		t.Fatalf("NetworkPolicies %v; want raycluster-deny-all-head and raycluster-deny-all-workers-workergroup", pols)
	}
	for _, c := range []struct {
		p        networkingv1.NetworkPolicy
		group    string
		selector map[string]string
	}{
		{head, "headgroup", map[string]string{"ray.io/cluster": "raycluster-deny-all", "ray.io/node-type": "head"}},
		{workers, "workergroup", map[string]string{"ray.io/cluster": "raycluster-deny-all", "ray.io/node-type": "worker", "ray.io/group": "workergroup"}},
	} {
		p := c.p
		want := map[string]string{"ray.io/cluster": "raycluster-deny-all", "ray.io/group": c.group,
			"app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
		if fmt.Sprint(p.Labels) != fmt.Sprint(want) {
			t.Errorf("%s labels %v, want %v", p.Name, p.Labels, want)
		}
		if fmt.Sprint(p.Spec.PodSelector.MatchLabels) != fmt.Sprint(c.selector) {
			t.Errorf("%s selects %v, want %v", p.Name, p.Spec.PodSelector.MatchLabels, c.selector)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "RayCluster" || p.OwnerReferences[0].Controller == nil || !*p.OwnerReferences[0].Controller {
			t.Errorf("%s owner references %v, want the RayCluster as controller", p.Name, p.OwnerReferences)
		}
		if fmt.Sprint(p.Spec.PolicyTypes) != "[Ingress Egress]" || len(p.Spec.Ingress) != 1 || len(p.Spec.Egress) != 2 {
			t.Errorf("%s: policyTypes %v, %d ingress and %d egress rules; want Ingress and Egress, the cluster's pods in, the cluster's pods and DNS out",
				p.Name, p.Spec.PolicyTypes, len(p.Spec.Ingress), len(p.Spec.Egress))
		}
	}
	// Under DenyAll the worker still joins the head: intra-cluster traffic is allowed, and DNS is the node's.
	_, hp, _ := e.waitClusterReady(t, "raycluster-deny-all", 1)
	idlePod(t, e, "outsider")
	waitDial(t, e, "outsider", hp.Status.PodIP, 8265, "refused")
	noEventReason(t, e, "UnsupportedField", "networkPolicy")
	noEventReason(t, e, "NetworkPolicyNotEnforced", "")

	// A RayJob's rayClusterSpec carries the field to the cluster it makes, as KubeRay's does.
	t.Run("RayJob", func(t *testing.T) {
		cluster := strings.SplitN(strings.SplitN(networkPolicyClusterYAML, "\nspec:\n", 2)[1], "\n", -1)
		var spec strings.Builder
		for _, l := range cluster {
			spec.WriteString("    " + l + "\n")
		}
		job := "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: job-deny-all\nspec:\n  entrypoint: python -c 'print(1)'\n" +
			"  submissionMode: HTTPMode\n  rayClusterSpec:\n" + spec.String()
		_, stderr, err := in.Kubectl(e.ctx, job, "apply", "-n", e.ns, "-f", "-")
		must(t, "kubectl apply the RayJob: "+stderr, err)
		e.waitFor(t, time.Minute, "the RayJob's cluster's head NetworkPolicy", func(ctx context.Context) (bool, string, error) {
			l, err := in.Client.NetworkingV1().NetworkPolicies(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			var names []string
			for _, p := range l.Items {
				names = append(names, p.Name)
				if strings.HasPrefix(p.Name, "job-deny-all-") && strings.HasSuffix(p.Name, "-head") {
					return true, "", nil
				}
			}
			return false, strings.Join(names, ","), nil
		})
		noEventReason(t, e, "UnsupportedField", "networkPolicy")
	})
}

// TestNetworkPolicyNotEnforcedOnTheHostNetwork: where pods share the host's network, rayctl up says
// policies are not enforced, and each NetworkPolicy gets a Warning saying so.
func TestNetworkPolicyNotEnforcedOnTheHostNetwork(t *testing.T) {
	t.Parallel()
	in := framework.StartTest(t, "--runtime", "process", "--pod-network=host", "--ray=sim")
	if out := in.Output.String(); !strings.Contains(out, "netpolicy") || !strings.Contains(out, "NetworkPolicies are not enforced") {
		t.Errorf("rayctl up on the host's network does not say NetworkPolicies are not enforced:\n%s", out)
	}
	ctx := testContext(t)
	ns := newNamespace(t, ctx, in)
	_, err := in.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, metav1.CreateOptions{})
	must(t, "creating a NetworkPolicy", err)
	eventually(t, ctx, time.Minute, "the NetworkPolicyNotEnforced Warning", func(ctx context.Context) (bool, error) {
		l, err := in.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "deny-all", "reason": "NetworkPolicyNotEnforced"}.AsSelector().String()})
		return err == nil && len(l.Items) > 0 && l.Items[0].Type == corev1.EventTypeWarning, err
	})
}
