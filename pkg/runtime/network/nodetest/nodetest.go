//go:build linux

// Package nodetest gives the tests of what runs in rayctl's node network namespace (egress, Services,
// NetworkPolicy, nftables) a node of their own: a network.Manager with its own bridge and /24, the node
// namespace made, everything removed at the test's end; and programs in pods that answer a word. It is
// imported by tests only, and needs root (the caller's test is skipped without it).
package nodetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// New makes a node for t: a manager whose bridge is prefix plus random hex (prefix at most 5 bytes) and
// whose pods get addresses in a random 10.251.X.0/24, with its node namespace made. Pods, bridge and
// namespace go at the test's end. Without root the test is skipped.
func New(t testing.TB, prefix string) *network.Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces and nftables need root")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	m, err := network.New(network.Config{StateDir: t.TempDir(), Bridge: prefix + hex.EncodeToString(b),
		CIDR: fmt.Sprintf("10.251.%d.0/24", b[0])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = m.Cleanup(nil)
		if err := m.RemoveBridge(); err != nil {
			t.Error(err)
		}
		if err := m.RemoveNodeIfUnused(); err != nil {
			t.Error(err)
		}
	})
	if err := m.EnsureNode(); err != nil {
		t.Fatal(err)
	}
	return m
}

// Serve listens on the TCP address addr inside the network namespace at nsPath (this process's own when
// empty) and answers each connection with word and a line end, until the test's end.
func Serve(t testing.TB, nsPath, addr, word string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := network.Do(nsPath, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, word)
			c.Close()
		}
	}()
	return ln
}
