//go:build linux

package nft

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// Open returns a lasting nftables connection whose netlink socket is made inside the network namespace at
// nsPath (this process's own when empty). The socket is opened on a thread that enters the namespace and
// is then discarded (network.Do), so no thread is left behind in it; close it with CloseLasting.
func Open(nsPath string) (*nftables.Conn, error) {
	var c *nftables.Conn
	err := network.Do(nsPath, func() error {
		var err error
		c, err = nftables.New(nftables.AsLasting())
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
