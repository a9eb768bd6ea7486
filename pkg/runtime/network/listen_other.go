//go:build !linux

package network

import "net"

// ListenConfig returns a plain ListenConfig: IP_FREEBIND exists only on Linux, and elsewhere pods share the
// host's network, so only loopback addresses are listened on.
func ListenConfig(freeBind bool) *net.ListenConfig { return &net.ListenConfig{} }
