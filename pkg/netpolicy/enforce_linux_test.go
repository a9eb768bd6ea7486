//go:build linux

package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/network/nettest"
	"github.com/rayctl/rayctl/pkg/runtime/network/nodetest"
)

// node is a node namespace with pods on its bridge, each listening on TCP 8080 and 9090 (answering its
// own name), and the table written there.
type node struct {
	t     *testing.T
	m     *network.Manager
	table *Table
	pods  map[string]*corev1.Pod
	ns    map[string]string // pod name → its netns path
	nss   []*corev1.Namespace
}

func newNode(t *testing.T) *node {
	t.Helper()
	m := nodetest.New(t, "np")
	tb, err := OpenTable(m.NodeNSPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Close() })
	n := &node{t: t, m: m, table: tb, pods: map[string]*corev1.Pod{}, ns: map[string]string{}}
	for _, ns := range []struct{ name, team string }{{"team", "a"}, {"other", "b"}} {
		n.nss = append(n.nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name,
			Labels: map[string]string{"kubernetes.io/metadata.name": ns.name, "team": ns.team}}})
	}
	return n
}

// pod starts a pod in namespace ns with labels; its container declares 8080 as "http".
func (n *node) pod(ns, name string, lbls map[string]string) *corev1.Pod {
	att, err := n.m.Setup(ns + "-" + name)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, port := range []string{"8080", "9090"} {
		listen(n.t, att.NetNSPath, ":"+port, name)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080}, {Name: "other", ContainerPort: 9090}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: att.IP.String()},
	}
	n.pods[name] = p
	n.ns[name] = att.NetNSPath
	return p
}

func listen(t *testing.T, nsPath, addr, word string) { nodetest.Serve(t, nsPath, addr, word) }

// apply compiles the policies against the node's pods and writes the table.
func (n *node) apply(pols ...*networkingv1.NetworkPolicy) {
	n.t.Helper()
	var pods []*corev1.Pod
	for _, p := range n.pods {
		pods = append(pods, p)
	}
	if err := n.table.Write(Compile(pols, pods, n.nss)); err != nil {
		n.t.Fatal(err)
	}
}

func dialFrom(nsPath string) nettest.DialFunc {
	return func(ctx context.Context, network_, addr string) (net.Conn, error) {
		var c net.Conn
		err := network.Do(nsPath, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network_, addr)
			return err
		})
		return c, err
	}
}

// reach asserts that pod from reaches pod to's port (ok) or is refused at once (!ok).
func (n *node) reach(from, to string, port int, ok bool) {
	n.t.Helper()
	addr := net.JoinHostPort(n.pods[to].Status.PodIP, fmt.Sprint(port))
	got, err := nettest.ReadLine(dialFrom(n.ns[from]), addr)
	switch {
	case ok && (err != nil || got != to):
		n.t.Errorf("%s → %s:%d: %q, %v; want it let through", from, to, port, got, err)
	case !ok && err == nil:
		n.t.Errorf("%s → %s:%d answered %q; want it blocked", from, to, port, got)
	case !ok && !errors.Is(err, syscall.ECONNREFUSED):
		n.t.Errorf("%s → %s:%d: %v; want a refusal", from, to, port, err)
	}
}

func policy(ns string, sel map[string]string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	spec.PodSelector = metav1.LabelSelector{MatchLabels: sel}
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: spec}
}

func tcpPort(p intstr.IntOrString) networkingv1.NetworkPolicyPort {
	tcp := corev1.ProtocolTCP
	return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &p}
}

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	web         = map[string]string{"app": "web"}
	client      = map[string]string{"role": "client"}
)

// Policies compiled from networking/v1 objects are enforced on pod-to-pod traffic across the bridge,
// while the node keeps reaching pods and pods keep reaching the gateway's listeners.
func TestPoliciesInTheNodeNamespace(t *testing.T) {
	n := newNode(t)
	n.pod("team", "web", web)
	n.pod("team", "client", client)
	n.pod("team", "stranger", nil)
	n.pod("other", "outsider", client)

	t.Run("no policy, everything passes", func(t *testing.T) {
		n.apply()
		n.reach("client", "web", 8080, true)
		n.reach("outsider", "web", 9090, true)
	})

	t.Run("deny-all ingress", func(t *testing.T) {
		n.apply(policy("team", web, networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly}))
		n.reach("client", "web", 8080, false)
		n.reach("outsider", "web", 9090, false)
		// The isolated pod still dials out, and its replies come back.
		n.reach("web", "client", 8080, true)
		// The node reaches the pod (probes, port-forward).
		got, err := nettest.ReadLine(n.m.DialContext, net.JoinHostPort(n.pods["web"].Status.PodIP, "8080"))
		if err != nil || got != "web" {
			t.Errorf("node → web: %q, %v", got, err)
		}
	})

	t.Run("allow from a podSelector on one port, and a port range", func(t *testing.T) {
		end := int32(9100)
		r := tcpPort(intstr.FromInt32(9000))
		r.EndPort = &end
		n.apply(policy("team", web, networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: client}}},
				Ports: []networkingv1.NetworkPolicyPort{tcpPort(intstr.FromInt32(8080))}},
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
				Ports: []networkingv1.NetworkPolicyPort{r}},
		}}))
		n.reach("client", "web", 8080, true)
		n.reach("stranger", "web", 8080, false)
		n.reach("stranger", "web", 9090, true)  // in 9000-9100 from any pod of the namespace
		n.reach("outsider", "web", 8080, false) // a client, in another namespace
		n.reach("outsider", "web", 9090, false)
	})

	t.Run("named port", func(t *testing.T) {
		n.apply(policy("team", web, networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{Ports: []networkingv1.NetworkPolicyPort{tcpPort(intstr.FromString("http"))}},
		}}))
		n.reach("stranger", "web", 8080, true)
		n.reach("outsider", "web", 8080, true)
		n.reach("stranger", "web", 9090, false)
	})

	t.Run("namespaceSelector, alone and with a podSelector", func(t *testing.T) {
		n.apply(policy("team", web, networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}}}},
		}}))
		n.reach("outsider", "web", 8080, true)
		n.reach("client", "web", 8080, false)
		n.apply(policy("team", web, networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{},
				PodSelector: &metav1.LabelSelector{MatchLabels: client}}}},
		}}))
		n.reach("outsider", "web", 8080, true)
		n.reach("client", "web", 8080, true)
		n.reach("stranger", "web", 8080, false)
	})

	t.Run("ipBlock with except", func(t *testing.T) {
		n.apply(policy("team", web, networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{
				CIDR: n.m.Subnet().String(), Except: []string{n.pods["client"].Status.PodIP + "/32"}}}}},
		}}))
		n.reach("outsider", "web", 8080, true)
		n.reach("stranger", "web", 8080, true)
		n.reach("client", "web", 8080, false)
	})

	t.Run("egress deny-all", func(t *testing.T) {
		// The same namespace: web isolated for ingress (allowing everything), client for egress.
		n.apply(
			policy("team", client, networkingv1.NetworkPolicySpec{PolicyTypes: egressOnly}),
		)
		n.reach("client", "web", 8080, false)
		n.reach("client", "outsider", 8080, false)
		// Into the egress-isolated pod still works: the replies are of an allowed connection.
		n.reach("web", "client", 8080, true)
		// The gateway's DNS port stays open to it (the node's own listener, not forwarded).
		dns := udpEcho(t, n.m)
		c, err := dialFrom(n.ns["client"])(context.Background(), "udp", dns)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(timeNow().Add(dnsWait))
		b := make([]byte, 8)
		if k, err := c.Read(b); err != nil || string(b[:k]) != "q" {
			t.Errorf("client → the gateway's port 53: %q, %v", b[:k], err)
		}
	})

	t.Run("egress allowed by a rule needs the peer's ingress too", func(t *testing.T) {
		n.apply(
			policy("team", client, networkingv1.NetworkPolicySpec{PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}, Ports: []networkingv1.NetworkPolicyPort{tcpPort(intstr.FromString("http"))}},
			}}),
			policy("team", web, networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly}),
		)
		n.reach("client", "stranger", 8080, true)
		n.reach("client", "stranger", 9090, false)
		n.reach("client", "web", 8080, false) // web allows no ingress
		n.reach("client", "outsider", 8080, false)
	})
}

var timeNow = time.Now

const dnsWait = 5 * time.Second

// udpEcho answers UDP on the gateway's port 53 in the node namespace, as the cluster DNS server listens.
func udpEcho(t *testing.T, m *network.Manager) string {
	pc, err := m.ListenPacket(context.Background(), "udp4", net.JoinHostPort(m.Gateway().String(), "53"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		b := make([]byte, 512)
		for {
			k, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(b[:k], from)
		}
	}()
	return pc.LocalAddr().String()
}
