//go:build linux

package nft

import "github.com/google/nftables"

// ReplaceTable queues, on c, the deletion of table t with everything in it and its making anew, empty:
// the rules the caller queues next land with it in one transaction at c.Flush, so the table is never
// seen half-written and a missing table is no error.
func ReplaceTable(c *nftables.Conn, t *nftables.Table) *nftables.Table {
	c.AddTable(t)
	c.DelTable(t)
	return c.AddTable(t)
}

// BaseChain queues a base chain of table t on c, hooked at hook with priority prio and the given policy
// (nil: accept).
func BaseChain(c *nftables.Conn, t *nftables.Table, name string, typ nftables.ChainType, hook *nftables.ChainHook,
	prio *nftables.ChainPriority, policy *nftables.ChainPolicy) *nftables.Chain {
	return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio, Policy: policy})
}

// Add queues a rule of the given expressions at the end of chain ch.
func Add(c *nftables.Conn, ch *nftables.Chain, exprs ...[]Expr) {
	c.AddRule(&nftables.Rule{Table: ch.Table, Chain: ch, Exprs: Cat(exprs...)})
}
