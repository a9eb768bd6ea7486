//go:build !linux

package network

import (
	"context"
	"errors"
	"net"
)

var errNotLinux = errors.New("network: pod network namespaces need Linux; use a HostOnly manager")

// Setup needs Linux; elsewhere pods share the host's network (HostOnly).
func (m *Manager) Setup(podUID string) (*Attachment, error) { return nil, errNotLinux }

func (m *Manager) removeLinkAndNS(podUID string) error { return nil }

// RemoveBridge has nothing to remove off Linux.
func (m *Manager) RemoveBridge() error { return nil }

// Do runs fn; off Linux there are no network namespaces to enter.
func Do(path string, fn func() error) error {
	if path != "" {
		return errNotLinux
	}
	return fn()
}

// nodeState is empty off Linux: there is no node namespace.
type nodeState struct{}

// EnsureNode has nothing to make off Linux.
func (m *Manager) EnsureNode() error { return nil }

// RemoveNodeIfUnused has nothing to remove off Linux.
func (m *Manager) RemoveNodeIfUnused() error { return nil }

// DialContext dials from the host: off Linux pods share its network.
func (m *Manager) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return DialIn(ctx, "", network, addr)
}

// Listen listens on the host: off Linux pods share its network.
func (m *Manager) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	return (&net.ListenConfig{}).Listen(ctx, network, addr)
}

// ListenPacket is Listen for packet sockets.
func (m *Manager) ListenPacket(ctx context.Context, network, addr string) (net.PacketConn, error) {
	return (&net.ListenConfig{}).ListenPacket(ctx, network, addr)
}

// DialIn dials from this process's own network: off Linux there are no others.
func DialIn(ctx context.Context, path, network, addr string) (net.Conn, error) {
	if path != "" {
		return nil, errNotLinux
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// BridgeFiltered is false off Linux: there is no pod bridge.
func (m *Manager) BridgeFiltered() bool { return false }
