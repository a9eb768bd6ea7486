package network

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/rayctl/rayctl/pkg/runtime"
)

func TestIPAMSkipsReservedAddressesAndFills(t *testing.T) {
	_, subnet, _ := net.ParseCIDR("10.9.9.0/29") // .1 gateway, .2–.6 pods, .7 broadcast
	a := newIPAM(t.TempDir(), subnet, net.ParseIP("10.9.9.1").To4())
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		ip, err := a.allocate(fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if s := ip.String(); s == "10.9.9.0" || s == "10.9.9.1" || s == "10.9.9.7" || seen[s] {
			t.Fatalf("allocated %s (seen %v)", s, seen)
		}
		seen[ip.String()] = true
	}
	if _, err := a.allocate("p5"); err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("allocating past the end: %v", err)
	}
	ip2, _ := a.lookup("p2")
	if err := a.release("p2"); err != nil {
		t.Fatal(err)
	}
	got, err := a.allocate("p6")
	if err != nil || !got.Equal(ip2) {
		t.Fatalf("the only free address %s was not reused: %s %v", ip2, got, err)
	}
	if again, _ := a.allocate("p6"); !again.Equal(got) {
		t.Fatalf("allocate is not idempotent: %s then %s", got, again)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{}, {StateDir: t.TempDir(), CIDR: "nonsense"}, {StateDir: t.TempDir(), CIDR: "fd00::/64"},
		{StateDir: t.TempDir(), Bridge: "a-very-long-bridge-name"}, {StateDir: t.TempDir(), CIDR: "10.0.0.0/31"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestHostNetworkPortsAreNotShared: where pods share the host's network (HostOnly, as without root), a
// pod declaring a port another pod declares is refused naming the port and that pod, and so is one whose
// port a program on the host holds; once the holder's sandbox is gone the port is free again. The pod
// already holding its sandbox is not refused its own ports again (the kubelet re-adopting it).
func TestHostNetworkPortsAreNotShared(t *testing.T) {
	m, err := New(Config{StateDir: t.TempDir(), HostOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if gw := m.Gateway(); gw != nil {
		t.Errorf("a HostOnly manager has a gateway %s (nothing may listen for pods on a bridge that is never made)", gw)
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := int32(l.Addr().(*net.TCPAddr).Port)
	free := func() int32 {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return int32(l.Addr().(*net.TCPAddr).Port)
	}()
	head := runtime.SandboxConfig{PodUID: "uid-head", Namespace: "ns", Name: "head",
		Ports: []runtime.Port{{Container: "ray-head", Name: "metrics", Port: free}}}
	if _, err := m.RunSandbox(head); err != nil {
		t.Fatalf("the first pod declaring port %d: %v", free, err)
	}
	if _, err := m.RunSandbox(head); err != nil {
		t.Fatalf("the same pod's sandbox again: %v", err)
	}
	worker := runtime.SandboxConfig{PodUID: "uid-worker", Namespace: "ns", Name: "worker",
		Ports: []runtime.Port{{Container: "ray-worker", Name: "metrics", Port: free}}}
	_, err = m.RunSandbox(worker)
	want := fmt.Sprintf("port %d/TCP (metrics, container ray-worker) is declared by pod ns/head (container ray-head): pods share the host's network here", free)
	if !errors.Is(err, runtime.ErrPortHeld) || !strings.Contains(err.Error(), want) {
		t.Errorf("a second pod declaring port %d: %v, want ErrPortHeld saying %q", free, err, want)
	}
	if _, err := m.Sandbox("uid-worker"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("the refused pod has a sandbox recorded: %v", err)
	}
	udp := runtime.SandboxConfig{PodUID: "uid-udp", Name: "udp", Ports: []runtime.Port{{Container: "c", Port: free, Protocol: "UDP"}}}
	if _, err := m.RunSandbox(udp); err != nil {
		t.Errorf("UDP %d beside TCP %d: %v", free, free, err)
	}
	prog := runtime.SandboxConfig{PodUID: "uid-prog", Name: "prog", Ports: []runtime.Port{{Container: "c", Port: taken}}}
	if _, err := m.RunSandbox(prog); !errors.Is(err, runtime.ErrPortHeld) || !strings.Contains(err.Error(), "in use on this host by a program outside rayctl's pods") {
		t.Errorf("a pod declaring port %d, which a program holds: %v", taken, err)
	}
	if err := m.RemoveSandbox("uid-head"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RunSandbox(worker); err != nil {
		t.Errorf("port %d after its holder's sandbox is gone: %v", free, err)
	}
}
