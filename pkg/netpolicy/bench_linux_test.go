//go:build linux

package netpolicy

import (
	"fmt"
	"net"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// scale makes 500 pods in 10 namespaces (50 apps of 10 pods) and 100 policies: per app one
// ingress policy (from two other apps' pods, on a port and a named port) and one egress policy (to the
// namespace's pods and to 0.0.0.0/0 except the pod network on 443).
func scale() ([]*networkingv1.NetworkPolicy, []*corev1.Pod, []*corev1.Namespace) {
	var pols []*networkingv1.NetworkPolicy
	var pods []*corev1.Pod
	var nss []*corev1.Namespace
	for ns := range 10 {
		nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns%d", ns), Labels: map[string]string{"n": fmt.Sprint(ns)}}})
	}
	for i := range 500 {
		app := i / 10
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", app/5), Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": fmt.Sprint(app)}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "dashboard", ContainerPort: 8265}}}}},
			Status:     corev1.PodStatus{PodIP: fmt.Sprintf("10.244.%d.%d", 1+i/250, 2+i%250)},
		})
	}
	for app := range 50 {
		ns := fmt.Sprintf("ns%d", app/5)
		sel := metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint(app)}}
		pols = append(pols, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("in%d", app)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: sel, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint((app + 1) % 50)}}, NamespaceSelector: &metav1.LabelSelector{}},
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint((app + 2) % 50)}}, NamespaceSelector: &metav1.LabelSelector{}},
				},
				Ports: []networkingv1.NetworkPolicyPort{tcpPort(intstr.FromInt32(6379)), tcpPort(intstr.FromString("dashboard"))},
			}}}})
		pols = append(pols, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("out%d", app)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: sel, PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.244.0.0/16"}}}},
					Ports: []networkingv1.NetworkPolicyPort{tcpPort(intstr.FromInt32(443))}},
			}}})
	}
	return pols, pods, nss
}

// BenchmarkCompile: the ruleset of 100 policies over 500 pods.
func BenchmarkCompile(b *testing.B) {
	pols, pods, nss := scale()
	var r *Ruleset
	for b.Loop() {
		r = Compile(pols, pods, nss)
	}
	b.ReportMetric(float64(r.Rules()), "entries")
}

// BenchmarkWrite: replacing the whole table with that ruleset in a node namespace (root only).
func BenchmarkWrite(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("network namespaces and nftables need root")
	}
	m, err := network.New(network.Config{StateDir: b.TempDir(), Bridge: fmt.Sprintf("nb%d", os.Getpid()%100000), CIDR: "10.252.9.0/24"})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.EnsureNode(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.RemoveNodeIfUnused() }()
	tb, err := OpenTable(m.NodeNSPath())
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	r := Compile(scale())
	_ = net.IPv4len
	for b.Loop() {
		if err := tb.Write(r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.Rules()), "entries")
}
