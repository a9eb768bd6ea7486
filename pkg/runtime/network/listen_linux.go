package network

import (
	"net"
	"syscall"
)

// ListenConfig returns a ListenConfig that sets IP_FREEBIND on its sockets when freeBind is true.
func ListenConfig(freeBind bool) *net.ListenConfig {
	if !freeBind {
		return &net.ListenConfig{}
	}
	return &net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_IP, syscall.IP_FREEBIND, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
}
