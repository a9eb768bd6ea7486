//go:build linux

package nft

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// Open returns a lasting nftables connection whose netlink socket is made inside the network namespace at
// nsPath (this process's own when empty). The socket is opened on a thread that enters the namespace and
// is then discarded (network.Do), so no thread is left behind in it; close it with CloseLasting.
func Open(nsPath string) (*nftables.Conn, error) {
	return open(nsPath)
}

// OpenLarge is Open with netlink socket buffers of size bytes each way, so that a table of thousands of
// rules and their acknowledgements fit one transaction. They are set with SO_SNDBUFFORCE and
// SO_RCVBUFFORCE where the process may (CAP_NET_ADMIN in the host's user namespace: real root); otherwise
// (rootless) the plain options are capped by net.core.wmem_max and rmem_max, and large is false.
func OpenLarge(nsPath string, size int) (c *nftables.Conn, large bool, err error) {
	large = true
	c, err = open(nsPath, nftables.WithSockOptions(func(nc *netlink.Conn) error {
		rc, err := nc.SyscallConn()
		if err != nil {
			return err
		}
		return rc.Control(func(fd uintptr) {
			for _, opt := range [][2]int{{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}, {unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}} {
				if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt[0], size) != nil {
					large = false
					_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt[1], size)
				}
			}
		})
	}))
	return c, large, err
}

func open(nsPath string, opts ...nftables.ConnOption) (*nftables.Conn, error) {
	var c *nftables.Conn
	err := network.Do(nsPath, func() error {
		var err error
		c, err = nftables.New(append([]nftables.ConnOption{nftables.AsLasting()}, opts...)...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftables in %s: %w", nsPathOrHost(nsPath), err)
	}
	return c, nil
}

// DeleteTable removes the table named name (family IPv4) from the network namespace at nsPath; a missing
// table or namespace is no error.
func DeleteTable(nsPath, name string) error {
	c, err := Open(nsPath)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	defer c.CloseLasting()
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: name}
	c.AddTable(t)
	c.DelTable(t)
	return c.Flush()
}

func nsPathOrHost(p string) string {
	if p == "" {
		return "the host's network namespace"
	}
	return p
}
