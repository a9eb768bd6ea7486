package framework

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// nodeNSSuffix ends the path of every rayctl instance's node network namespace file (see
// network.Manager.NodeNSPath), which rayctl bind-mounts in the host's mount namespace as root.
const nodeNSSuffix = "/network/node.netns"

// DialPod connects to addr, a pod IP and port, the way rayctl's node reaches pods: from inside the node
// network namespace of the instance whose bridge holds that address (the host's namespace has no route
// to pods). Tests use it where they read a pod's program directly; users reach pods through the API
// server (port-forward, proxy), which the tests of those paths use.
func DialPod(ctx context.Context, network_, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("dial pod %s: not an IP address", addr)
	}
	var conn net.Conn
	err = InPodNetwork(ip, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network_, addr)
		return err
	})
	return conn, err
}

// InPodNetwork runs fn on a thread inside the node network namespace of the instance whose bridge holds
// ip: sockets fn makes are made there.
func InPodNetwork(ip net.IP, fn func() error) error {
	path, err := nodeNSOf(ip)
	if err != nil {
		return err
	}
	return network.Do(path, fn)
}

// PodHTTPClient is an HTTP client that reaches pod IPs through DialPod.
func PodHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: DialPod}, Timeout: timeout}
}

// nodeNSOf finds the node namespace whose bridge's subnet holds ip, among those mounted now.
func nodeNSOf(ip net.IP) (string, error) {
	paths, err := mountedNodeNamespaces()
	if err != nil {
		return "", err
	}
	for _, p := range paths {
		if nsHolds(p, ip) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no rayctl node namespace (of %d mounted) has a bridge for %s", len(paths), ip)
}

// mountedNodeNamespaces lists the node namespace files mounted in this process's mount namespace.
func mountedNodeNamespaces() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasSuffix(fields[4], nodeNSSuffix) {
			out = append(out, fields[4])
		}
	}
	return out, sc.Err()
}

// nsHolds reports whether a link in the namespace at path has an IPv4 subnet that holds ip.
func nsHolds(path string, ip net.IP) bool {
	var h *netlink.Handle
	if err := network.Do(path, func() (err error) { h, err = netlink.NewHandle(); return err }); err != nil {
		return false
	}
	defer h.Close()
	addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if a.IPNet != nil && a.IPNet.Contains(ip) && !a.IP.IsLoopback() {
			return true
		}
	}
	return false
}
