//go:build linux

package serviceproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/network/nodetest"
)

// testNode is a node namespace of the test's own, with pods and the proxy's table in it.
type testNode struct {
	m     *network.Manager
	table *Table
	pods  map[string]*network.Attachment
}

var serviceCIDR = &net.IPNet{IP: net.IPv4(10, 96, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}

func newTestNode(t testing.TB, pods ...string) *testNode {
	t.Helper()
	m := nodetest.New(t, "sp")
	n := &testNode{m: m, pods: map[string]*network.Attachment{}}
	for _, p := range pods {
		att, err := m.Setup(p)
		if err != nil {
			t.Fatal(err)
		}
		n.pods[p] = att
	}
	var err error
	n.table, err = OpenTable(TableOptions{NetNS: m.NodeNSPath(), Bridge: m.Config().Bridge, Gateway: m.Gateway(), ServiceCIDR: serviceCIDR})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.table.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// serve answers every TCP connection and UDP datagram to the pod's port with the pod's name.
func (n *testNode) serve(t testing.TB, pod string, port int) {
	t.Helper()
	att := n.pods[pod]
	addr := net.JoinHostPort(att.IP.String(), fmt.Sprint(port))
	var ln net.Listener
	var pc net.PacketConn
	err := network.Do(att.NetNSPath, func() (err error) {
		if ln, err = net.Listen("tcp4", addr); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					fmt.Fprintln(c, pod)
				}
			}()
		}
	}()
	go func() {
		buf := make([]byte, 100)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(pod+"\n"), from)
		}
	}()
}

// ask connects from the namespace at ns (a pod's, or the node's) to addr and returns who answered.
func ask(ns, proto, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := network.DialIn(ctx, ns, proto, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, "who"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func (n *testNode) from(pod string) string { return n.pods[pod].NetNSPath }

func (n *testNode) endpoint(pod string, port int32) Endpoint {
	return Endpoint{IP: n.pods[pod].IP, Port: port}
}

func (n *testNode) write(t testing.TB, ports ...Port) {
	t.Helper()
	if err := n.table.Write(ports); err != nil {
		t.Fatal(err)
	}
}

func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// A ClusterIP port reaches its endpoint's target port, from another pod and from the node namespace, over
// TCP and UDP; a pod reaches itself through its own Service.
func TestClusterIPReachesTheEndpoint(t *testing.T) {
	n := newTestNode(t, "a", "b")
	n.serve(t, "a", 8265)
	n.write(t,
		Port{Service: "ns/web", IP: net.IPv4(10, 96, 0, 10), Protocol: corev1.ProtocolTCP, Port: 80, Endpoints: []Endpoint{n.endpoint("a", 8265)}},
		Port{Service: "ns/web", Name: "dns", IP: net.IPv4(10, 96, 0, 10), Protocol: corev1.ProtocolUDP, Port: 53, Endpoints: []Endpoint{n.endpoint("a", 8265)}},
	)
	for _, c := range []struct{ what, ns, proto, addr string }{
		{"pod b, TCP", n.from("b"), "tcp4", "10.96.0.10:80"},
		{"the node, TCP", n.m.NodeNSPath(), "tcp4", "10.96.0.10:80"},
		{"pod b, UDP", n.from("b"), "udp4", "10.96.0.10:53"},
		{"the node, UDP", n.m.NodeNSPath(), "udp4", "10.96.0.10:53"},
		{"pod a itself (hairpin), TCP", n.from("a"), "tcp4", "10.96.0.10:80"},
		{"pod a itself (hairpin), UDP", n.from("a"), "udp4", "10.96.0.10:53"},
	} {
		got, err := ask(c.ns, c.proto, c.addr)
		if err != nil || got != "a" {
			t.Errorf("%s to %s: answer %q, error %v; want a", c.what, c.addr, got, err)
		}
	}
}

// Connections spread over the endpoints at random; with ClientIP affinity one client stays on one.
func TestEndpointsShareAndAffinityHolds(t *testing.T) {
	n := newTestNode(t, "a", "c", "client")
	n.serve(t, "a", 8080)
	n.serve(t, "c", 8080)
	eps := []Endpoint{n.endpoint("a", 8080), n.endpoint("c", 8080)}
	n.write(t,
		Port{Service: "ns/spread", IP: net.IPv4(10, 96, 0, 20), Protocol: corev1.ProtocolTCP, Port: 80, Endpoints: eps},
		Port{Service: "ns/sticky", IP: net.IPv4(10, 96, 0, 21), Protocol: corev1.ProtocolTCP, Port: 80, Endpoints: eps, Affinity: time.Hour},
	)
	seen := map[string]int{}
	// Both are seen within 200 connections unless the choice is not random (a chance of 2^-199).
	for i := 0; i < 200 && len(seen) < 2; i++ {
		got, err := ask(n.from("client"), "tcp4", "10.96.0.20:80")
		if err != nil {
			t.Fatal(err)
		}
		seen[got]++
	}
	if seen["a"] == 0 || seen["c"] == 0 {
		t.Fatalf("answers without affinity: %v; want both a and c", seen)
	}
	first, err := ask(n.from("client"), "tcp4", "10.96.0.21:80")
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		for range 30 {
			got, err := ask(n.from("client"), "tcp4", "10.96.0.21:80")
			if err != nil || got != first {
				t.Fatalf("%s: answer %q (error %v), want %q every time (ClientIP affinity)", when, got, err, first)
			}
		}
	}
	check("with affinity")
	// Rewriting the table (another Service changed) keeps the client where it was.
	n.write(t,
		Port{Service: "ns/sticky", IP: net.IPv4(10, 96, 0, 21), Protocol: corev1.ProtocolTCP, Port: 80, Endpoints: eps, Affinity: time.Hour},
		Port{Service: "ns/other", IP: net.IPv4(10, 96, 0, 22), Protocol: corev1.ProtocolTCP, Port: 80, Endpoints: eps},
	)
	check("after a rewrite")
	// Not by chance: the client's address is still in the affinity set of the endpoint it had.
	if out := listTable(t, n.m.NodeNSPath()); out != "" && !strings.Contains(out, "elements = { "+n.pods["client"].IP.String()+" ") {
		t.Errorf("after a rewrite no affinity set holds the client %s:\n%s", n.pods["client"].IP, out)
	}
}

// A Service without a ready endpoint, a port no Service has and a removed Service all refuse at once.
func TestNoEndpointRefuses(t *testing.T) {
	n := newTestNode(t, "a", "b")
	n.serve(t, "a", 8080)
	web := Port{Service: "ns/web", IP: net.IPv4(10, 96, 0, 30), Protocol: corev1.ProtocolTCP, Port: 80, Endpoints: []Endpoint{n.endpoint("a", 8080)}}
	n.write(t, web, Port{Service: "ns/empty", IP: net.IPv4(10, 96, 0, 31), Protocol: corev1.ProtocolTCP, Port: 80})
	if got, err := ask(n.from("b"), "tcp4", "10.96.0.30:80"); err != nil || got != "a" {
		t.Fatalf("web: %q, %v", got, err)
	}
	for _, c := range []struct {
		what, ns, proto, addr string
		want                  syscall.Errno
	}{
		{"no endpoint, from a pod", n.from("b"), "tcp4", "10.96.0.31:80", syscall.ECONNREFUSED},
		{"no endpoint, from the node", n.m.NodeNSPath(), "tcp4", "10.96.0.31:80", syscall.ECONNREFUSED},
		{"no endpoint, UDP", n.from("b"), "udp4", "10.96.0.31:80", syscall.ECONNREFUSED},
		// The node's own datagram is refused before it leaves: the send fails.
		{"no endpoint, UDP, from the node", n.m.NodeNSPath(), "udp4", "10.96.0.31:80", syscall.EPERM},
		{"a port the Service lacks", n.from("b"), "tcp4", "10.96.0.30:81", syscall.ECONNREFUSED},
	} {
		if _, err := ask(c.ns, c.proto, c.addr); !errors.Is(err, c.want) {
			t.Errorf("%s (%s): error %v, want %v", c.what, c.addr, err, c.want)
		}
	}
	// Removing the Service removes its rules: its ClusterIP refuses, and no chain of it is left.
	n.write(t)
	if _, err := ask(n.from("b"), "tcp4", "10.96.0.30:80"); !refused(err) {
		t.Errorf("a removed Service: error %v, want connection refused", err)
	}
	if out := listTable(t, n.m.NodeNSPath()); strings.Contains(out, "ns/web") {
		t.Errorf("the table still names the removed Service:\n%s", out)
	}
}

// listTable prints the table with nft, when the nft command is there.
func listTable(t testing.TB, ns string) string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Log("nft is not installed: the table's text is not checked")
		return ""
	}
	var out []byte
	err := network.Do(ns, func() (err error) {
		out, err = exec.Command("nft", "list", "table", "ip", TableName).CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("nft list table: %v\n%s", err, out)
	}
	return string(out)
}

// Closing the table (rayctl stopping while pods keep the node namespace) leaves neither the table nor the
// route to the service range behind; opening it again after a crash replaces what was left.
func TestCloseLeavesNothing(t *testing.T) {
	n := newTestNode(t, "a")
	n.serve(t, "a", 8080)
	opts := n.table.opts
	n.write(t, Port{Service: "ns/web", IP: net.IPv4(10, 96, 0, 40), Protocol: corev1.ProtocolTCP, Port: 80, Endpoints: []Endpoint{n.endpoint("a", 8080)}})
	// A second table over the first, as a start after a crash: it begins empty.
	again, err := OpenTable(opts)
	if err != nil {
		t.Fatal(err)
	}
	if out := listTable(t, n.m.NodeNSPath()); strings.Contains(out, "ns/web") {
		t.Errorf("a new table still holds the old one's rules:\n%s", out)
	}
	for _, tb := range []*Table{again, n.table} {
		if err := tb.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var routes string
	err = network.Do(n.m.NodeNSPath(), func() error {
		out, err := exec.Command("ip", "route", "show", serviceCIDR.String()).CombinedOutput()
		routes = string(out)
		return err
	})
	if err != nil || strings.TrimSpace(routes) != "" {
		t.Errorf("a route to %s is left: %q (%v)", serviceCIDR, routes, err)
	}
	if _, err := exec.LookPath("nft"); err == nil {
		err := network.Do(n.m.NodeNSPath(), func() error { return exec.Command("nft", "list", "table", "ip", TableName).Run() })
		if err == nil {
			t.Errorf("the table %s is left after Close", TableName)
		}
	}
}

// A UDP client that keeps sending to a ClusterIP moves to another endpoint when its endpoint leaves the
// Service, though the old one still answers: its flow's translation is forgotten.
func TestUDPFlowFollowsTheEndpoints(t *testing.T) {
	n := newTestNode(t, "a", "c", "client")
	n.serve(t, "a", 5353)
	n.serve(t, "c", 5353)
	port := func(ep string) Port {
		return Port{Service: "ns/dns", IP: net.IPv4(10, 96, 0, 50), Protocol: corev1.ProtocolUDP, Port: 53, Endpoints: []Endpoint{n.endpoint(ep, 5353)}}
	}
	n.write(t, port("a"))
	var conn net.Conn
	err := network.Do(n.from("client"), func() (err error) {
		conn, err = net.Dial("udp4", "10.96.0.50:53")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	askOn := func() string {
		t.Helper()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintln(conn, "who"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(buf[:k]))
	}
	if got := askOn(); got != "a" {
		t.Fatalf("first answer from %q, want a", got)
	}
	n.write(t, port("c"))
	if got := askOn(); got != "c" {
		t.Fatalf("after the endpoint moved to c, the same socket's datagram reached %q", got)
	}
}

// Written in chunks (as rootless, where the netlink buffers stay small), the table ends the same: every
// port reaches its endpoint, and affinity survives the rewrite.
func TestChunkedWrite(t *testing.T) {
	n := newTestNode(t, "a", "client")
	n.serve(t, "a", 8080)
	n.table.chunk = 2
	var ports []Port
	for i := range 5 {
		ports = append(ports, Port{Service: fmt.Sprintf("ns/s%d", i), IP: net.IPv4(10, 96, 0, byte(60+i)), Protocol: corev1.ProtocolTCP, Port: 80,
			Endpoints: []Endpoint{n.endpoint("a", 8080)}, Affinity: time.Hour})
	}
	n.write(t, ports...)
	for _, p := range ports {
		if got, err := ask(n.from("client"), "tcp4", net.JoinHostPort(p.IP.String(), "80")); err != nil || got != "a" {
			t.Errorf("%s: %q, %v", p.IP, got, err)
		}
	}
	n.write(t, ports...)
	if out := listTable(t, n.m.NodeNSPath()); out != "" && strings.Count(out, "elements = { "+n.pods["client"].IP.String()+" ") != len(ports) {
		t.Errorf("after a chunked rewrite the client is not in every affinity set:\n%s", out)
	}
	if got, err := ask(n.from("client"), "tcp4", "10.96.0.64:80"); err != nil || got != "a" {
		t.Errorf("after a rewrite: %q, %v", got, err)
	}
}
