//go:build linux

package nft_test

import (
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/rayctl/rayctl/pkg/runtime/network/nft"
	"github.com/rayctl/rayctl/pkg/runtime/network/nodetest"
)

func tables(t *testing.T, c *nftables.Conn) map[string]int {
	t.Helper()
	ts, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, tb := range ts {
		rules := 0
		chains, err := c.ListChains()
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chains {
			if ch.Table.Name == tb.Name {
				rs, err := c.GetRules(tb, ch)
				if err != nil {
					t.Fatal(err)
				}
				rules += len(rs)
			}
		}
		out[tb.Name] = rules
	}
	return out
}

// A table replaced in the node namespace holds only its latest rules, the host's namespace never sees it,
// and DeleteTable removes it (twice is fine).
func TestReplaceTableInANamespace(t *testing.T) {
	ns := nodetest.New(t, "nt").NodeNSPath()
	c, err := nft.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	write := func(n int) {
		tb := nft.ReplaceTable(c, &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "rayctl-test"})
		fwd := nft.BaseChain(c, tb, "forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter, nil)
		for i := 0; i < n; i++ {
			nft.Add(c, fwd, nft.IfName(true, expr.CmpOpEq, "rayctl0"), nft.Proto(6), nft.Dport(uint16(8000+i)), nft.Accept)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	write(3)
	write(2)
	if got := tables(t, c)["rayctl-test"]; got != 2 {
		t.Fatalf("rules after the second write: %d, want 2", got)
	}
	host, err := nft.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer host.CloseLasting()
	if _, ok := tables(t, host)["rayctl-test"]; ok {
		t.Fatal("the node namespace's table shows in the host's")
	}
	for range 2 {
		if err := nft.DeleteTable(ns, "rayctl-test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := tables(t, c)["rayctl-test"]; ok {
		t.Fatal("the table is still there after DeleteTable")
	}
}
