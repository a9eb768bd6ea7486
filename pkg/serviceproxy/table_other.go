//go:build !linux

package serviceproxy

import "errors"

// Table is the proxy's nftables table; nftables exists on Linux only.
type Table struct{}

// OpenTable fails: ClusterIPs carry traffic on Linux only.
func OpenTable(opts TableOptions) (*Table, error) {
	return nil, errors.New("service proxy: nftables needs Linux")
}

// Write does nothing here.
func (t *Table) Write(ports []Port) error { return nil }

// Close does nothing here.
func (t *Table) Close() error { return nil }
