//go:build linux

package netpolicy

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/rayctl/rayctl/pkg/runtime/network/nft"
)

// Table writes rulesets into the table in one network namespace.
type Table struct {
	conn *nftables.Conn
	ns   string
}

// OpenTable opens nftables in the network namespace at nsPath (this process's own when empty).
func OpenTable(nsPath string) (*Table, error) {
	// Rootless the buffers stay at the system's maximum, which tables of the measured scale fit.
	c, _, err := nft.OpenLarge(nsPath, socketBuffer)
	if err != nil {
		return nil, err
	}
	return &Table{conn: c, ns: nsPath}, nil
}

// socketBuffer is the netlink socket's send and receive buffer: a table of a few thousand rules is one
// transaction, sent in one message, with an acknowledgement per rule to read back.
const socketBuffer = 16 << 20

// Close closes the connection. The table stays: pods that outlive a clean stop stay isolated as their
// policies say until the next start replaces it (the node namespace, and the table with it, goes at
// `rayctl down`).
func (t *Table) Close() error {
	return t.conn.CloseLasting()
}

// Write replaces the table's contents with r, in one transaction. Two base chains hook the forward path
// (both must let a packet through): "egress" sends packets from egress-isolated pods to their pod's
// allow chain, "ingress" those to ingress-isolated pods; packets of connections already let through
// pass at once. An allow chain accepts what one of its pod's entries matches and refuses the rest (a
// TCP reset, an ICMP error otherwise), so a blocked connection fails at once. Pods with the same
// entries share one allow chain.
func (t *Table) Write(r *Ruleset) error {
	c := t.conn
	tb := nft.ReplaceTable(c, &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName})
	chains := map[string]string{} // an allow list's rendering → its chain
	n := 0
	for _, dir := range []struct {
		name string
		prio *nftables.ChainPriority
		pods []Isolated
		own  func(op expr.CmpOp, n *net.IPNet) []nft.Expr // the isolated pod's end
		peer func(op expr.CmpOp, n *net.IPNet) []nft.Expr // the other end
	}{
		{"egress", nftables.ChainPriorityFilter, r.Egress, nft.SaddrIn, nft.DaddrIn},
		{"ingress", nftables.ChainPriorityRef(*nftables.ChainPriorityFilter + 1), r.Ingress, nft.DaddrIn, nft.SaddrIn},
	} {
		base := nft.BaseChain(c, tb, dir.name, nftables.ChainTypeFilter, nftables.ChainHookForward, dir.prio, nil)
		nft.Add(c, base, nft.Established(), nft.Accept)
		if len(dir.pods) == 0 {
			continue
		}
		// One lookup sends each isolated pod's packets to its allow chain (ip daddr vmap { … : goto … }).
		var elems []nftables.SetElement
		for _, iso := range dir.pods {
			key := dir.name + "|" + allowKey(iso.Allow)
			name, ok := chains[key]
			if !ok {
				name = fmt.Sprintf("%s-%d", dir.name, n)
				n++
				chains[key] = name
				ch := c.AddChain(&nftables.Chain{Name: name, Table: tb})
				for _, a := range iso.Allow {
					addRows(c, ch, a, dir.peer)
				}
				nft.Add(c, ch, nft.RejectTCP())
				nft.Add(c, ch, nft.Reject())
				nft.Add(c, ch, nft.Drop)
			}
			elems = append(elems, nftables.SetElement{Key: iso.IP.To4(), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: name}})
		}
		vmap := &nftables.Set{Table: tb, Anonymous: true, Constant: true, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
		if err := c.AddSet(vmap, elems); err != nil {
			return err
		}
		nft.Add(c, base, []nft.Expr{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: peerOffset(dir.own), Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: vmap.Name, SetID: vmap.ID, IsDestRegSet: true, DestRegister: 0},
		})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("writing nftables table %s: %w", TableName, err)
	}
	return nil
}

func allowKey(l []Allow) string {
	k := ""
	for _, a := range l {
		k += a.String() + ";"
	}
	return k
}

// addRows adds the rules accepting entry a: one per port (one for any port).
func addRows(c *nftables.Conn, ch *nftables.Chain, a Allow, peer func(op expr.CmpOp, n *net.IPNet) []nft.Expr) {
	// addr is made anew for each rule: an anonymous set belongs to one rule.
	addr := func() []nft.Expr {
		var out []nft.Expr
		if len(a.IPs) > 0 {
			out = ipSet(c, ch.Table, a.IPs, peerOffset(peer))
		} else if a.Net != nil && a.Net.IP.To4() != nil {
			if ones, _ := a.Net.Mask.Size(); ones > 0 {
				out = peer(expr.CmpOpEq, a.Net)
			}
		}
		for _, e := range a.Except {
			out = append(out, peer(expr.CmpOpNeq, e)...)
		}
		return out
	}
	if len(a.Ports) == 0 {
		nft.Add(c, ch, addr(), nft.Accept)
		return
	}
	for _, p := range a.Ports {
		nft.Add(c, ch, addr(), nft.Proto(nft.ProtoNumber(string(p.Protocol))), dports(p), nft.Accept)
	}
}

// peerOffset is where in the IPv4 header the peer's address is: the source's (12) when peer matches
// sources, else the destination's (16).
func peerOffset(peer func(op expr.CmpOp, n *net.IPNet) []nft.Expr) uint32 {
	e := peer(expr.CmpOpEq, &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)})
	return e[0].(*expr.Payload).Offset
}

// ipSet matches the address at off against an anonymous set holding ips (a rule's own).
func ipSet(c *nftables.Conn, t *nftables.Table, ips []net.IP, off uint32) []nft.Expr {
	s := &nftables.Set{Table: t, Anonymous: true, Constant: true, KeyType: nftables.TypeIPAddr}
	elems := make([]nftables.SetElement, len(ips))
	for i, ip := range ips {
		elems[i] = nftables.SetElement{Key: ip.To4()}
	}
	if err := c.AddSet(s, elems); err != nil {
		panic(err) // only for a malformed set, which this one is not
	}
	return []nft.Expr{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
	}
}

// dports matches the destination port range of p (nothing for every port).
func dports(p Port) []nft.Expr {
	switch {
	case p.From == 0:
		return nil
	case p.From == p.To:
		return nft.Dport(p.From)
	}
	be := func(v uint16) []byte { b := make([]byte, 2); binary.BigEndian.PutUint16(b, v); return b }
	return []nft.Expr{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: be(p.From)},
		&expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: be(p.To)},
	}
}
