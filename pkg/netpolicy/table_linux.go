//go:build linux

package netpolicy

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	corev1 "k8s.io/api/core/v1"
	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/runtime/network/nft"
)

// TableName is the nftables table (family ip) netpolicy owns in the node namespace.
const TableName = "rayctl-policy"

// Table writes rulesets into the table in one network namespace.
type Table struct {
	conn *nftables.Conn
	ns   string
}

// OpenTable opens nftables in the network namespace at nsPath (this process's own when empty).
func OpenTable(nsPath string) (*Table, error) {
	c, err := nft.Open(nsPath)
	if err != nil {
		return nil, err
	}
	return &Table{conn: c, ns: nsPath}, nil
}

// Close deletes the table and closes the connection.
func (t *Table) Close() error {
	t.conn.CloseLasting()
	return nft.DeleteTable(t.ns, TableName)
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
			nft.Add(c, base, dir.own(expr.CmpOpEq, &net.IPNet{IP: iso.IP, Mask: net.CIDRMask(32, 32)}), goTo(name))
		}
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
	var addr []nft.Expr
	if a.Net != nil && a.Net.IP.To4() != nil {
		ones, _ := a.Net.Mask.Size()
		if ones > 0 {
			addr = peer(expr.CmpOpEq, a.Net)
		}
	}
	for _, e := range a.Except {
		addr = append(addr, peer(expr.CmpOpNeq, e)...)
	}
	if len(a.Ports) == 0 {
		nft.Add(c, ch, addr, nft.Accept)
		return
	}
	for _, p := range a.Ports {
		nft.Add(c, ch, addr, nft.Proto(protoNumber(p.Protocol)), dports(p), nft.Accept)
	}
}

func protoNumber(p corev1.Protocol) byte {
	switch p {
	case corev1.ProtocolUDP:
		return unix.IPPROTO_UDP
	case corev1.ProtocolSCTP:
		return unix.IPPROTO_SCTP
	}
	return unix.IPPROTO_TCP
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

func goTo(chain string) []nft.Expr {
	return []nft.Expr{&expr.Verdict{Kind: expr.VerdictGoto, Chain: chain}}
}
