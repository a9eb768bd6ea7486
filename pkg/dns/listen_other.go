//go:build !linux

package dns

import "net"

// listenConfig returns a plain ListenConfig: IP_FREEBIND exists only on Linux, and elsewhere pods share the
// host's network, so only loopback addresses are listened on.
func listenConfig(freeBind bool) *net.ListenConfig { return &net.ListenConfig{} }
