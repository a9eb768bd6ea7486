package framework

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// NodeNetNS is the path of the instance's node network namespace file (network.Manager.NodeNSPath),
// which rayctl as root mounts in the host's mount namespace, or "" when no node namespace is mounted
// there: pods on the host's network, or a rootless rayctl whose mounts live in its own mount namespace.
func (in *Instance) NodeNetNS() string {
	path := filepath.Join(in.DataDir, "network", "node.netns")
	if ok, err := mountinfo.Mounted(path); err != nil || !ok {
		return ""
	}
	return path
}

// DialPod connects to addr, a pod IP and port, the way this instance's node reaches its pods: from
// inside its node network namespace when it has one (the host's namespace has no route to pods), else
// from the host's. Tests use it where they read a pod's program directly; users reach pods through the
// API server (port-forward, proxy), which the tests of those paths use. Each instance has its own node
// namespace, and two may hand out the same pod IPs, so the instance, not the address, picks it.
func (in *Instance) DialPod(ctx context.Context, network_, addr string) (net.Conn, error) {
	return network.DialIn(ctx, in.NodeNetNS(), network_, addr)
}

// InPodNetwork runs fn on a thread inside the instance's node network namespace (as is without one):
// sockets fn makes are made there.
func (in *Instance) InPodNetwork(fn func() error) error {
	return network.Do(in.NodeNetNS(), fn)
}

// PodHTTPClient is an HTTP client that reaches the instance's pod IPs through DialPod.
func (in *Instance) PodHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: in.DialPod}, Timeout: timeout}
}
