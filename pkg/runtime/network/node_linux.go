package network

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"

	"github.com/vishvananda/netlink"

	"github.com/rayctl/rayctl/pkg/userns"
)

// nodeState is the manager's open handle on the node namespace (nil until first needed).
type nodeState struct {
	handle *netlink.Handle
	// bridgeFiltered says the IPv4 hooks see traffic bridged between pods (br_netfilter), once known.
	bridgeFiltered bool
}

// EnsureNode makes the node namespace if it is missing, with its loopback up and the bridge (holding
// the gateway address) in it, so that listeners for pods can be bound before the first pod starts. A
// HostOnly manager has no node namespace.
func (m *Manager) EnsureNode() error {
	if m.cfg.HostOnly {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, err := m.ensureNode()
	return err
}

// ensureNode returns a handle on the node namespace and its bridge, making the namespace, its loopback
// and its bridge as needed; m.mu is held.
func (m *Manager) ensureNode() (*netlink.Handle, netlink.Link, error) {
	path := m.NodeNSPath()
	if m.node.handle != nil && isNetNS(path) {
		br, err := m.ensureBridge(m.node.handle)
		if err != nil {
			return nil, nil, err
		}
		return m.node.handle, br, nil
	}
	m.closeNode()
	if !isNetNS(path) {
		_ = removeNetNS(path) // a file a crash left unmounted
		if err := createNetNS(path); err != nil {
			return nil, nil, fmt.Errorf("network: the node namespace: %w", err)
		}
	}
	h, err := handleIn(path)
	if err != nil {
		return nil, nil, fmt.Errorf("network: a netlink handle in the node namespace: %w", err)
	}
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("network: bringing the node namespace's loopback up: %w", err)
	}
	if err := Do(path, enableForwarding); err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("network: turning on forwarding in the node namespace: %w", err)
	}
	m.node.bridgeFiltered = Do(path, enableBridgeFiltering) == nil
	br, err := m.ensureBridge(h)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	m.node.handle = h
	return h, br, nil
}

// enableForwarding turns IPv4 forwarding on in the calling thread's network namespace (the node's, where a
// new namespace starts with it off): packets from pods to a Service's ClusterIP, and out to the world, are
// routed there. What may cross is the nftables rules' business (egress, Services, NetworkPolicy).
func enableForwarding() error {
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
}

// bridgeNFCall is the switch (per network namespace) that hands IPv4 packets bridged between ports of a
// bridge to the IPv4 netfilter hooks; it exists while the kernel's br_netfilter module is loaded.
const bridgeNFCall = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// enableBridgeFiltering makes the IPv4 hooks of the calling thread's network namespace see what the pod
// bridge passes between pods: NetworkPolicy filters it there, and a ClusterIP connection between two pods
// is translated back on its reply. As root a missing br_netfilter is loaded (modprobe), as Docker and k3s
// do; an ordinary user cannot load it.
func enableBridgeFiltering() error {
	if _, err := os.Stat(bridgeNFCall); err != nil && os.Geteuid() == 0 && !userns.Inside() {
		_ = exec.Command("modprobe", "br_netfilter").Run()
	}
	return os.WriteFile(bridgeNFCall, []byte("1\n"), 0o644)
}

// BridgeFiltered says whether traffic bridged between pods passes the node namespace's IPv4 hooks (the
// kernel's br_netfilter is loaded): without it NetworkPolicy cannot filter pod-to-pod traffic, and a
// ClusterIP connection from one pod to another must be masqueraded. False for a HostOnly manager.
func (m *Manager) BridgeFiltered() bool {
	if m.cfg.HostOnly {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, _, err := m.ensureNode(); err != nil {
		return false
	}
	return m.node.bridgeFiltered
}

// RemoveNodeIfUnused deletes the node namespace when no pod has a network in it any more (at a clean
// stop: pods that still run keep it, and with it their network, for the next start). A HostOnly
// manager has none.
func (m *Manager) RemoveNodeIfUnused() error {
	if m.cfg.HostOnly {
		return nil
	}
	uids, err := m.podUIDs()
	if err != nil || len(uids) > 0 {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeNode()
	return removeNetNS(m.NodeNSPath())
}

// openNode returns a handle on the node namespace if it exists, else nil; m.mu is held.
func (m *Manager) openNode() *netlink.Handle {
	if m.node.handle != nil {
		return m.node.handle
	}
	if !isNetNS(m.NodeNSPath()) {
		return nil
	}
	h, err := handleIn(m.NodeNSPath())
	if err != nil {
		return nil
	}
	m.node.handle = h
	return h
}

// closeNode lets go of the node namespace's handle; m.mu is held.
func (m *Manager) closeNode() {
	if m.node.handle != nil {
		m.node.handle.Close()
		m.node.handle = nil
	}
}

// DialContext connects to addr: to a pod IP from inside the node namespace, where pods are reachable
// (the host's namespace has no route to them); to anything else (a pod on the host's network) from the
// host's. A HostOnly manager always dials from the host's namespace.
func (m *Manager) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && m.subnet.Contains(ip) {
			return DialIn(ctx, m.NodeNSPath(), network, addr)
		}
	}
	return DialIn(ctx, "", network, addr)
}

// Listen listens on addr inside the node namespace (the host's for a HostOnly manager): for what pods
// must reach on the bridge's gateway, such as the cluster DNS and the API server.
func (m *Manager) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := Do(m.NodeNSPath(), func() error {
		var err error
		ln, err = (&net.ListenConfig{}).Listen(ctx, network, addr)
		return err
	})
	return ln, err
}

// ListenPacket is Listen for packet sockets (UDP).
func (m *Manager) ListenPacket(ctx context.Context, network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := Do(m.NodeNSPath(), func() error {
		var err error
		pc, err = (&net.ListenConfig{}).ListenPacket(ctx, network, addr)
		return err
	})
	return pc, err
}
