package network

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/network/nettest"
)

// hostDial dials from the calling thread's network namespace.
func hostDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// testManager makes a manager with its own bridge and /24 so tests running
// side by side (or next to a real rayctl) do not meet; the bridge goes at the end.
func testManager(t *testing.T) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("pod networking needs root (network namespaces, bridge, veth)")
	}
	a, _ := rand.Int(rand.Reader, big.NewInt(50))
	b, _ := rand.Int(rand.Reader, big.NewInt(256))
	m, err := New(Config{StateDir: t.TempDir(), Bridge: "rt" + randomHex(t, 5), CIDR: fmt.Sprintf("10.%d.%d.0/24", 200+a.Int64(), b.Int64())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = m.Cleanup(nil)
		if err := m.RemoveBridge(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// listenIn starts a TCP server in the pod's namespace that answers each
// connection with the given word.
func listenIn(t *testing.T, nsPath, addr, word string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := Do(nsPath, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, word)
			c.Close()
		}
	}()
	return ln
}

// TestPodsReachEachOtherAndTheNodeReachesThem: pods reach each other and the node namespace's gateway;
// the node namespace reaches pods; the host's namespace has no bridge and no route to them.
func TestPodsReachEachOtherAndTheNodeReachesThem(t *testing.T) {
	m := testManager(t)
	a, err := m.Setup("pod-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Setup("pod-b")
	if err != nil {
		t.Fatal(err)
	}
	if a.IP.Equal(b.IP) {
		t.Fatalf("both pods got %s", a.IP)
	}
	if !m.Subnet().Contains(a.IP) || a.IP.Equal(m.Gateway()) {
		t.Fatalf("pod IP %s is not a pod address of %s (gateway %s)", a.IP, m.Subnet(), m.Gateway())
	}

	// The same port in both pods: each namespace has its own.
	listenIn(t, a.NetNSPath, ":7000", "from-a")
	listenIn(t, b.NetNSPath, ":7000", "from-b")

	got, err := nettest.ReadLine(m.DialContext, net.JoinHostPort(a.IP.String(), "7000"))
	if err != nil || got != "from-a" {
		t.Fatalf("node → pod a: %q, %v", got, err)
	}
	if _, err := netlink.LinkByName(m.cfg.Bridge); err == nil {
		t.Errorf("the bridge %s is in the host's namespace", m.cfg.Bridge)
	}
	if _, err := netlink.LinkByName(a.HostVeth); err == nil {
		t.Errorf("pod a's veth %s is in the host's namespace", a.HostVeth)
	}
	// No packet is sent to find out (an address with no local route leaves the machine): the host's
	// route to the pod is not a link of its own.
	if routes, err := netlink.RouteGet(a.IP); err == nil && len(routes) > 0 && routes[0].Gw == nil {
		if l, err := netlink.LinkByIndex(routes[0].LinkIndex); err == nil && l.Attrs().Name != "lo" {
			t.Errorf("the host's namespace routes pod a's %s straight to its link %s", a.IP, l.Attrs().Name)
		}
	}
	err = Do(b.NetNSPath, func() error {
		got, err := nettest.ReadLine(hostDial, net.JoinHostPort(a.IP.String(), "7000"))
		if err != nil || got != "from-a" {
			return fmt.Errorf("pod b → pod a: %q, %v", got, err)
		}
		// Inside b, its own port 7000 is b's listener, on loopback too.
		got, err = nettest.ReadLine(hostDial, "127.0.0.1:7000")
		if err != nil || got != "from-b" {
			return fmt.Errorf("pod b → its own loopback: %q, %v", got, err)
		}
		// The gateway is not the pod's to bind.
		hostLn, err := net.Listen("tcp4", m.Gateway().String()+":0")
		if err == nil {
			hostLn.Close()
			return fmt.Errorf("the pod could bind the gateway address %s: it is not in its own namespace", m.Gateway())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The pod reaches a listener on the gateway in the node namespace.
	hostLn, err := m.Listen(context.Background(), "tcp4", m.Gateway().String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	go func() {
		c, err := hostLn.Accept()
		if err == nil {
			fmt.Fprintln(c, "from-host")
			c.Close()
		}
	}()
	err = Do(a.NetNSPath, func() error {
		got, err := nettest.ReadLine(hostDial, hostLn.Addr().String())
		if err != nil || got != "from-host" {
			return fmt.Errorf("pod a → the node's gateway: %q, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGatewayMACStaysPut: pods joining and leaving the bridge do not change the gateway's MAC address
// (an unpinned Linux bridge takes its lowest port's), so the ARP entries of the pods already there stay
// right and their connections to the host (API server, DNS) carry on.
func TestGatewayMACStaysPut(t *testing.T) {
	m := testManager(t)
	if _, err := m.Setup("pod-0"); err != nil {
		t.Fatal(err)
	}
	mac := func() string {
		l, err := m.openNode().LinkByName(m.cfg.Bridge)
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().HardwareAddr.String()
	}
	before := mac()
	for i := 1; i <= 4; i++ {
		if _, err := m.Setup(fmt.Sprintf("pod-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 4; i++ {
		if err := m.Teardown(fmt.Sprintf("pod-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if after := mac(); after != before {
		t.Errorf("the gateway's MAC moved from %s to %s as pods came and went", before, after)
	}
}

func TestSetupIsIdempotentAndSurvivesARestart(t *testing.T) {
	m := testManager(t)
	first, err := m.Setup("pod-x")
	if err != nil {
		t.Fatal(err)
	}
	again, err := m.Setup("pod-x")
	if err != nil {
		t.Fatal(err)
	}
	if !again.IP.Equal(first.IP) || again.NetNSPath != first.NetNSPath {
		t.Fatalf("second setup gave %+v, first %+v", again, first)
	}
	// A new manager on the same state dir (rayctl restarted) keeps the IP.
	m2, err := New(m.Config())
	if err != nil {
		t.Fatal(err)
	}
	third, err := m2.Setup("pod-x")
	if err != nil || !third.IP.Equal(first.IP) {
		t.Fatalf("after restart: %+v, %v (was %s)", third, err, first.IP)
	}
	// A half-torn-down pod (veth gone, as after a crash) is rebuilt with its IP.
	node := m.openNode()
	link, err := node.LinkByName(first.HostVeth)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.LinkDel(link); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := m2.Setup("pod-x")
	if err != nil || !rebuilt.IP.Equal(first.IP) {
		t.Fatalf("rebuild: %+v, %v", rebuilt, err)
	}
	listenIn(t, rebuilt.NetNSPath, ":7001", "back")
	if got, err := nettest.ReadLine(m2.DialContext, net.JoinHostPort(rebuilt.IP.String(), "7001")); err != nil || got != "back" {
		t.Fatalf("rebuilt pod unreachable: %q %v", got, err)
	}
}

func assertGone(t *testing.T, m *Manager, att *Attachment) {
	t.Helper()
	if node := m.openNode(); node != nil {
		if _, err := node.LinkByName(att.HostVeth); err == nil {
			t.Errorf("veth %s still exists", att.HostVeth)
		}
	}
	if _, err := os.Stat(att.NetNSPath); !os.IsNotExist(err) {
		t.Errorf("netns file %s still exists (%v)", att.NetNSPath, err)
	}
	if got, err := m.Attachment(att.PodUID); err != nil || got != nil {
		t.Errorf("pod %s still holds an IP: %+v %v", att.PodUID, got, err)
	}
}

func TestTeardownLeavesNothing(t *testing.T) {
	m := testManager(t)
	att, err := m.Setup("pod-t")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Teardown("pod-t"); err != nil {
		t.Fatal(err)
	}
	assertGone(t, m, att)
	if err := m.Teardown("pod-t"); err != nil {
		t.Fatalf("second teardown: %v", err)
	}
	// The released address is not the next one handed out.
	next, err := m.Setup("pod-u")
	if err != nil {
		t.Fatal(err)
	}
	if next.IP.Equal(att.IP) {
		t.Errorf("released IP %s reused at once", att.IP)
	}
}

func TestSandboxFilesAndCleanup(t *testing.T) {
	m := testManager(t)
	podDir := t.TempDir()
	cfg := runtime.SandboxConfig{PodUID: "uid-1", Namespace: "ns1", Name: "head", Hostname: "head-0", Subdomain: "svc",
		Dir: podDir, DNS: runtime.DNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: []string{"ns1.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5"}},
		HostAliases: []runtime.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo", "bar"}}}, Labels: map[string]string{"k": "v"}}
	sb, err := m.RunSandbox(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hosts, _ := os.ReadFile(sb.HostsPath)
	for _, want := range []string{"127.0.0.1\tlocalhost", sb.IP + "\thead-0.svc.ns1.svc.cluster.local\thead-0", "1.2.3.4\tfoo\tbar"} {
		if !strings.Contains(string(hosts), want) {
			t.Errorf("hosts lacks %q:\n%s", want, hosts)
		}
	}
	resolv, _ := os.ReadFile(sb.ResolvConfPath)
	if want := "nameserver 10.96.0.10\nsearch ns1.svc.cluster.local svc.cluster.local\noptions ndots:5\n"; string(resolv) != want {
		t.Errorf("resolv.conf = %q, want %q", resolv, want)
	}
	if h, _ := os.ReadFile(sb.HostnamePath); string(h) != "head-0\n" {
		t.Errorf("hostname = %q", h)
	}
	again, err := m.RunSandbox(cfg)
	if err != nil || again.IP != sb.IP {
		t.Fatalf("second RunSandbox: %+v %v", again, err)
	}
	hostPod, err := m.RunSandbox(runtime.SandboxConfig{PodUID: "uid-host", Name: "hostpod", HostNetwork: true})
	if err != nil || hostPod.NetNSPath != "" || hostPod.IP == "" {
		t.Fatalf("host-network sandbox: %+v %v", hostPod, err)
	}
	list, err := m.ListSandboxes()
	if err != nil || len(list) != 2 || list[0].PodUID != "uid-1" || list[0].Labels["k"] != "v" || list[0].IP != sb.IP {
		t.Fatalf("ListSandboxes = %+v, %v", list, err)
	}

	att, _ := m.Attachment("uid-1")
	removed, err := m.Cleanup(map[string]bool{"uid-host": true})
	if err != nil || len(removed) != 1 || removed[0] != "uid-1" {
		t.Fatalf("Cleanup removed %v, %v", removed, err)
	}
	assertGone(t, m, att)
	if _, err := os.Stat(sb.HostsPath); !os.IsNotExist(err) {
		t.Errorf("hosts file left behind")
	}
	if _, err := os.Stat(podDir); err != nil {
		t.Errorf("the pod's own dir was removed: %v", err)
	}
	if list, _ := m.ListSandboxes(); len(list) != 1 || list[0].PodUID != "uid-host" {
		t.Errorf("after cleanup: %+v", list)
	}
}

// TestNodeNamespaceGoesWhenUnused: the node namespace stays while a pod has a network in it and goes
// with the last one, so a stopped rayctl without pods leaves nothing mounted.
func TestNodeNamespaceGoesWhenUnused(t *testing.T) {
	m := testManager(t)
	if err := m.EnsureNode(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup("pod-n"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveNodeIfUnused(); err != nil || !isNetNS(m.NodeNSPath()) {
		t.Fatalf("with a pod: %v, mounted %v", err, isNetNS(m.NodeNSPath()))
	}
	if err := m.Teardown("pod-n"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveNodeIfUnused(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.NodeNSPath()); !os.IsNotExist(err) {
		t.Errorf("the node namespace file is still there: %v", err)
	}
}
