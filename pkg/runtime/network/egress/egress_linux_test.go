//go:build linux

package egress_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/network/egress"
	"github.com/rayctl/rayctl/pkg/runtime/network/nettest"
	"github.com/rayctl/rayctl/pkg/runtime/network/nodetest"
)

// place is a node namespace with one pod, and a "world" beyond the host: a namespace of its own behind a
// veth from the host's, which the host routes to as it would to a LAN.
type place struct {
	m                *network.Manager
	pod              *network.Attachment
	world, hostSide  net.IP
	worldNS, brName  string
	hostLn, worldLns net.Listener
}

func randByte(n int64) int64 {
	v, _ := rand.Int(rand.Reader, big.NewInt(n))
	return v.Int64()
}

func setUp(t *testing.T) *place {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("slirp4netns is not installed")
	}
	dir := t.TempDir()
	m := nodetest.New(t, "eg")
	p := &place{m: m, brName: m.Config().Bridge}
	var err error
	if p.pod, err = m.Setup("pod-a"); err != nil {
		t.Fatal(err)
	}
	// The world: 198.18.X.Y/30 (the benchmarking range), host side .1, world side .2.
	base := net.IPv4(198, 18+byte(randByte(2)), byte(randByte(256)), byte(randByte(64)*4)).To4()
	p.hostSide = net.IPv4(base[0], base[1], base[2], base[3]+1).To4()
	p.world = net.IPv4(base[0], base[1], base[2], base[3]+2).To4()
	p.worldNS = filepath.Join(dir, "world")
	name := fmt.Sprintf("w%d", randByte(1e9))
	run(t, "ip", "netns", "add", filepath.Base(p.worldNS)+name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", filepath.Base(p.worldNS)+name).Run() })
	p.worldNS = "/run/netns/" + filepath.Base(p.worldNS) + name
	run(t, "ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", p.worldNS)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	run(t, "ip", "addr", "add", p.hostSide.String()+"/30", "dev", name)
	run(t, "ip", "link", "set", name, "up")
	run(t, "ip", "-n", filepath.Base(p.worldNS), "addr", "add", p.world.String()+"/30", "dev", "eth0")
	run(t, "ip", "-n", filepath.Base(p.worldNS), "link", "set", "eth0", "up")
	p.worldLns = nodetest.Serve(t, p.worldNS, net.JoinHostPort(p.world.String(), "8080"), "world")
	p.hostLn = nodetest.Serve(t, "", net.JoinHostPort(p.hostSide.String(), "8081"), "host")
	return p
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// fromPod dials addr from the pod and returns the line it answers.
func (p *place) fromPod(addr string) (string, error) {
	return nettest.ReadLine(func(ctx context.Context, nw, a string) (net.Conn, error) {
		return network.DialIn(ctx, p.pod.NetNSPath, nw, a)
	}, addr)
}

func (p *place) start(t *testing.T, mode string) *egress.Egress {
	t.Helper()
	_, svc, _ := net.ParseCIDR("10.96.0.0/16")
	e, err := egress.Start(egress.Config{Mode: mode, NodeNSPath: p.m.NodeNSPath(), Bridge: p.brName, Subnet: p.m.Subnet(),
		ServiceCIDR: svc, LogPath: filepath.Join(t.TempDir(), "slirp.log"), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// wantRefused asserts that dialing addr from the pod is refused (not left to time out).
func (p *place) wantRefused(t *testing.T, addr string) {
	t.Helper()
	line, err := p.fromPod(addr)
	if err == nil {
		t.Fatalf("%s from the pod answered %q, want a refusal", addr, line)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("%s from the pod: %v, want connection refused", addr, err)
	}
}

// With egress on, a pod reaches a machine beyond the host, but neither the host's own addresses nor its
// loopback (through slirp4netns's gateway) nor a ClusterIP nothing answers; with egress off the world
// is refused at once; the node's namespace keeps reaching the pod throughout.
func TestPodsReachTheWorldNotTheHost(t *testing.T) {
	p := setUp(t)
	e := p.start(t, egress.Auto)
	if !e.On() {
		t.Fatalf("auto egress on a host with a route out: %s", e.Line())
	}
	world := net.JoinHostPort(p.world.String(), "8080")
	if got, err := p.fromPod(world); err != nil || got != "world" {
		t.Fatalf("the world from the pod: %q, %v", got, err)
	}
	p.wantRefused(t, net.JoinHostPort(p.hostSide.String(), "8081"))
	p.wantRefused(t, "10.0.2.2:8081")
	p.wantRefused(t, "10.96.7.7:80")
	p.wantRefused(t, "169.254.169.254:80")
	// A listener of the node's namespace is not reachable from the uplink's side.
	lnk, err := netlinkIn(p.m.NodeNSPath(), egress.Uplink)
	if err != nil || lnk == nil {
		t.Fatalf("no %s in the node namespace: %v", egress.Uplink, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	off := p.start(t, egress.Off)
	defer off.Close()
	if off.On() {
		t.Fatal("--pod-egress=off is on")
	}
	p.wantRefused(t, world)
	if l, _ := netlinkIn(p.m.NodeNSPath(), egress.Uplink); l != nil {
		t.Fatalf("%s is still in the node namespace after Close", egress.Uplink)
	}
	// The node still reaches the pod.
	nodetest.Serve(t, p.pod.NetNSPath, net.JoinHostPort(p.pod.IP.String(), "9000"), "pod")
	if got, err := nettest.ReadLine(p.m.DialContext, net.JoinHostPort(p.pod.IP.String(), "9000")); err != nil || got != "pod" {
		t.Fatalf("the pod from the node: %q, %v", got, err)
	}
}

// netlinkIn finds the link called name in the namespace at nsPath (nil when there is none).
func netlinkIn(nsPath, name string) (netlink.Link, error) {
	var l netlink.Link
	err := network.Do(nsPath, func() error {
		var err error
		l, err = netlink.LinkByName(name)
		if errors.As(err, new(netlink.LinkNotFoundError)) {
			return nil
		}
		return err
	})
	return l, err
}

// With slirp4netns missing, auto is off and says why, and on refuses to start.
func TestNoSlirp4netns(t *testing.T) {
	p := setUp(t)
	cfg := egress.Config{Mode: egress.Auto, NodeNSPath: p.m.NodeNSPath(), Bridge: p.brName, Subnet: p.m.Subnet(),
		Slirp4netns: "/nonexistent/slirp4netns"}
	e, err := egress.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.On() {
		t.Fatal("egress on without slirp4netns")
	}
	t.Log(e.Line())
	p.wantRefused(t, net.JoinHostPort(p.world.String(), "8080"))
	cfg.Mode = egress.On
	if _, err := egress.Start(cfg); err == nil {
		t.Fatal("--pod-egress=on started without slirp4netns")
	} else {
		t.Log(err)
	}
}
