//go:build !linux

package framework

import (
	"context"
	"net"
	"net/http"
	"time"
)

// DialPod connects to addr directly: off Linux pods share the host's network.
func DialPod(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// InPodNetwork runs fn as is: off Linux pods share the host's network.
func InPodNetwork(_ net.IP, fn func() error) error { return fn() }

// PodHTTPClient is an HTTP client that reaches pod IPs through DialPod.
func PodHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: DialPod}, Timeout: timeout}
}
