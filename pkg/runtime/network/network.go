// Package network gives pods their network: one network namespace per pod
// (a bind-mounted namespace file under the state dir, like `ip netns`), a
// veth pair whose node end sits on a Linux bridge and whose pod end is eth0
// with an address from the pod CIDR, and the pod's /etc/hosts,
// /etc/resolv.conf and /etc/hostname. Addresses are kept in a file so they
// survive restarts. The containerd and process runtimes share it.
//
// The bridge and the node ends of the veths live in the node namespace
// (NodeNSPath), which the manager makes and which the host's network
// namespace has no route into: pods reach each other and what listens for
// them in the node namespace (Listen), and rayctl reaches pods from there
// (DialContext). Forwarding is on in the node namespace; what crosses it
// beyond the bridge (egress, Services) is up to the nftables tables other
// packages keep there (package nft).
package network

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// Defaults for Config.
const (
	DefaultBridge = "rayctl0"
	DefaultCIDR   = "10.244.0.0/16"
	// ClusterDomain is the DNS domain of pods and services.
	ClusterDomain = "cluster.local"
)

// Config says where the network lives.
type Config struct {
	// StateDir holds the namespace files (netns/), the address file and the
	// sandbox records. Required.
	StateDir string
	// Bridge is the bridge's name (DefaultBridge when empty, at most 15 bytes).
	Bridge string
	// CIDR is the IPv4 pod network (DefaultCIDR when empty); the bridge takes
	// its first address as the pods' gateway.
	CIDR string
	// MTU of the bridge and veths; 0 means 1500.
	MTU int
	// HostOnly makes every sandbox use the host's network (no namespaces,
	// no root needed): the process runtime's mode off Linux or without root.
	HostOnly bool
}

// Manager sets pods' networks up and tears them down.
type Manager struct {
	cfg     Config
	subnet  *net.IPNet
	gateway net.IP
	ipam    *ipam
	mu      sync.Mutex
	// hostPorts serialises the port check and record of sandboxes on the host's network.
	hostPorts sync.Mutex
	// node is the node namespace's handle, under mu.
	node nodeState
}

// Attachment is a pod's place on the network.
type Attachment struct {
	// PodUID identifies the pod.
	PodUID string
	// IP is the pod's address, Gateway the bridge's; PrefixLen the CIDR's.
	IP, Gateway net.IP
	PrefixLen   int
	// NetNSPath is the pod's network namespace file.
	NetNSPath string
	// HostVeth is the host end of the pod's veth pair.
	HostVeth string
}

// New checks cfg and prepares the state dir. It changes nothing in the
// kernel: the bridge is made by the first Setup.
func New(cfg Config) (*Manager, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("network: a state dir is required")
	}
	if cfg.Bridge == "" {
		cfg.Bridge = DefaultBridge
	}
	if len(cfg.Bridge) > 15 {
		return nil, fmt.Errorf("network: bridge name %q is longer than 15 bytes", cfg.Bridge)
	}
	if cfg.CIDR == "" {
		cfg.CIDR = DefaultCIDR
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	_, subnet, err := net.ParseCIDR(cfg.CIDR)
	if err != nil {
		return nil, fmt.Errorf("network: pod CIDR: %w", err)
	}
	if subnet.IP.To4() == nil {
		return nil, fmt.Errorf("network: pod CIDR %s is not IPv4", cfg.CIDR)
	}
	if ones, _ := subnet.Mask.Size(); ones > 30 {
		return nil, fmt.Errorf("network: pod CIDR %s is too small", cfg.CIDR)
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	cfg.StateDir = abs
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "netns"), filepath.Join(cfg.StateDir, "sandboxes")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	gw := gatewayOf(subnet)
	return &Manager{cfg: cfg, subnet: subnet, gateway: gw, ipam: newIPAM(cfg.StateDir, subnet, gw)}, nil
}

// GatewayOf is the bridge's address for the pod CIDR cidr (DefaultCIDR when empty): its first address.
// It is known before the network is made, for certificates that must name it.
func GatewayOf(cidr string) (net.IP, error) {
	if cidr == "" {
		cidr = DefaultCIDR
	}
	_, subnet, err := net.ParseCIDR(cidr)
	if err != nil || subnet.IP.To4() == nil {
		return nil, fmt.Errorf("network: pod CIDR %q is not an IPv4 CIDR", cidr)
	}
	return gatewayOf(subnet), nil
}

func gatewayOf(subnet *net.IPNet) net.IP { return intToIP4(ip4ToInt(subnet.IP) + 1) }

// Config returns the configuration in use, defaults filled in.
func (m *Manager) Config() Config { return m.cfg }

// Gateway is the bridge's address, the pods' default route; nil for a HostOnly manager, which makes no
// bridge (so nothing listens for pods on one: they reach the host's loopback and resolver).
func (m *Manager) Gateway() net.IP {
	if m.cfg.HostOnly {
		return nil
	}
	return m.gateway
}

// Subnet is the pod network.
func (m *Manager) Subnet() *net.IPNet { return m.subnet }

// nodeNSFile is the node namespace's file in the state dir.
const nodeNSFile = "node.netns"

// NodeNSPath is the node namespace's file: the namespace that holds the bridge, every pod's veth and
// the listeners pods reach on the gateway, which the host's namespace has no route into. Empty for a
// HostOnly manager, whose pods share the host's network.
func (m *Manager) NodeNSPath() string {
	if m.cfg.HostOnly {
		return ""
	}
	return filepath.Join(m.cfg.StateDir, nodeNSFile)
}

// NetNSPath is where the pod's namespace file is (or would be).
func (m *Manager) NetNSPath(podUID string) string {
	return filepath.Join(m.cfg.StateDir, "netns", podUID)
}

// HostVethName is the host end of the pod's veth pair: a hash of bridge and
// pod UID, so managers with different bridges never collide.
func (m *Manager) HostVethName(podUID string) string {
	sum := sha256.Sum256([]byte(m.cfg.Bridge + "/" + podUID))
	return "rv" + hex.EncodeToString(sum[:])[:11]
}

func (m *Manager) attachment(podUID string, ip net.IP) *Attachment {
	ones, _ := m.subnet.Mask.Size()
	return &Attachment{PodUID: podUID, IP: ip, Gateway: m.gateway, PrefixLen: ones,
		NetNSPath: m.NetNSPath(podUID), HostVeth: m.HostVethName(podUID)}
}

// Attachment returns the pod's attachment if it has an IP, else nil.
func (m *Manager) Attachment(podUID string) (*Attachment, error) {
	ip, err := m.ipam.lookup(podUID)
	if err != nil || ip == nil {
		return nil, err
	}
	return m.attachment(podUID, ip), nil
}

// Teardown removes the pod's veth, namespace and IP. Tearing down a pod that
// has none of them is not an error.
func (m *Manager) Teardown(podUID string) error {
	if m.cfg.HostOnly {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.removeLinkAndNS(podUID)
	if rerr := m.ipam.release(podUID); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("network: tearing down pod %s: %w", podUID, err)
	}
	return nil
}

// podUIDs lists the pods that hold an IP or a namespace file.
func (m *Manager) podUIDs() ([]string, error) {
	seen := map[string]bool{}
	uids, err := m.ipam.pods()
	if err != nil {
		return nil, err
	}
	for _, u := range uids {
		seen[u] = true
	}
	entries, err := os.ReadDir(filepath.Join(m.cfg.StateDir, "netns"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, e := range entries {
		if !seen[e.Name()] {
			seen[e.Name()] = true
			uids = append(uids, e.Name())
		}
	}
	return uids, nil
}

// HostIP is the address host-network pods report: the first IPv4 address of
// an interface that is up and is not loopback or rayctl's, else 127.0.0.1.
func HostIP() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !isOurs(ifc.Name) {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// isOurs tells rayctl's bridges and veths (and other local bridges such as
// docker0) from uplinks, roughly.
func isOurs(name string) bool {
	for _, p := range []string{"rayctl", "rv", "docker", "cni", "veth", "br-"} {
		if len(name) >= len(p) && name[:len(p)] == p {
			return true
		}
	}
	return false
}
