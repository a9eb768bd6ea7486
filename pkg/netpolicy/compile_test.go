package netpolicy

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func testPod(ns, name, ip string, lbls map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, CreationTimestamp: metav1.Now()},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}
}

// render is a ruleset as text: one line per isolated pod, "in|eg pod: entry; entry".
func render(r *Ruleset) string {
	var b strings.Builder
	for d, l := range [][]Isolated{r.Ingress, r.Egress} {
		for _, i := range l {
			b.WriteString([]string{"in", "eg"}[d] + " " + i.Pod + ":")
			for _, a := range i.Allow {
				b.WriteString(" " + a.String() + ";")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func TestCompile(t *testing.T) {
	udp := corev1.ProtocolUDP
	http := intstr.FromString("http")
	pods := []*corev1.Pod{
		testPod("a", "web1", "10.0.0.2", map[string]string{"app": "web"}, corev1.ContainerPort{Name: "http", ContainerPort: 8080}),
		testPod("a", "web2", "10.0.0.3", map[string]string{"app": "web"}, corev1.ContainerPort{Name: "http", ContainerPort: 9000}),
		testPod("a", "db", "10.0.0.4", map[string]string{"app": "db"}),
		testPod("b", "other", "10.0.0.5", nil),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "host", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{HostNetwork: true}, Status: corev1.PodStatus{PodIP: "192.168.1.1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "done", Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{PodIP: "10.0.0.9", Phase: corev1.PodSucceeded}},
		// An older object claiming db's address: db, the newer, counts.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "stale", Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
			Status: corev1.PodStatus{PodIP: "10.0.0.4", Phase: corev1.PodRunning}},
	}
	web := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for _, c := range []struct {
		name string
		spec networkingv1.NetworkPolicySpec
		want string
	}{
		{"no types, no rules: ingress isolated, nothing allowed", networkingv1.NetworkPolicySpec{PodSelector: web},
			"in a/web1:\nin a/web2:\n"},
		{"no types, egress rules: both directions", networkingv1.NetworkPolicySpec{PodSelector: web,
			Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
			"in a/web1:\nin a/web2:\neg a/web1: any;\neg a/web2: any;\n"},
		{"named port: each pod its own number", networkingv1.NetworkPolicySpec{PodSelector: web,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}}}},
			"in a/web1: any TCP/8080;\nin a/web2: any TCP/9000;\n"},
		{"a named port of the wrong protocol allows nothing", networkingv1.NetworkPolicySpec{PodSelector: web,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &http, Protocol: &udp}}}}},
			"in a/web1:\nin a/web2:\n"},
		{"egress to a named port: the destination pods', by number", networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}}}},
			"eg a/db: 10.0.0.2 TCP/8080; 10.0.0.3 TCP/9000;\n"},
		{"peers: podSelector in the policy's namespace, namespaceSelector across, ipBlock (IPv6 ignored)", networkingv1.NetworkPolicySpec{PodSelector: web,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{}},
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "b"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "172.16.0.0/12", Except: []string{"172.16.1.0/24"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/8"}},
			}}}},
			"in a/web1: 172.16.0.0/12 !172.16.1.0/24; 10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5;\nin a/web2: 172.16.0.0/12 !172.16.1.0/24; 10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5;\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pol := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"}, Spec: c.spec}
			nss := []*corev1.Namespace{
				{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"kubernetes.io/metadata.name": "a"}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"kubernetes.io/metadata.name": "b"}}},
			}
			if text := render(Compile([]*networkingv1.NetworkPolicy{pol}, pods, nss)); text != c.want {
				t.Errorf("got\n%s\nwant\n%s", text, c.want)
			}
		})
	}
}
