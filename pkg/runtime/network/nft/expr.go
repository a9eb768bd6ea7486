//go:build linux

package nft

import (
	"encoding/binary"
	"net"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Expr is one nftables expression.
type Expr = expr.Any

// Cat joins matches and a verdict into one rule's expressions.
func Cat(parts ...[]Expr) []Expr {
	var out []Expr
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// The verdicts and actions rules end in.
var (
	// Accept lets the packet through this chain.
	Accept = []Expr{&expr.Verdict{Kind: expr.VerdictAccept}}
	// Drop discards the packet silently.
	Drop = []Expr{&expr.Verdict{Kind: expr.VerdictDrop}}
	// Masquerade rewrites the source to the outgoing interface's address.
	Masquerade = []Expr{&expr.Masq{}}
)

// Reject refuses a packet that is not TCP at once, with an ICMP administratively-prohibited; put RejectTCP
// before it, so that TCP gets a reset (the connection is refused).
func Reject() []Expr {
	return []Expr{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED},
	}
}

// RejectTCP answers a TCP packet with a reset; put it before Reject() in a chain of its own rules.
func RejectTCP() []Expr {
	return []Expr{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}
}

// Jump continues in chain name and comes back at its end.
func Jump(name string) []Expr {
	return []Expr{&expr.Verdict{Kind: expr.VerdictJump, Chain: name}}
}

// IfName matches the input (in) or output interface's name.
func IfName(in bool, op expr.CmpOp, name string) []Expr {
	key := expr.MetaKeyOIFNAME
	if in {
		key = expr.MetaKeyIIFNAME
	}
	b := make([]byte, 16)
	copy(b, name)
	return []Expr{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: b}}
}

// InIf matches packets that came in on interface name; OutIf those leaving by it.
func InIf(name string) []Expr  { return IfName(true, expr.CmpOpEq, name) }
func OutIf(name string) []Expr { return IfName(false, expr.CmpOpEq, name) }

// Established matches packets of connections already accepted (ct state established,related).
func Established() []Expr {
	return []Expr{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// The offsets of the IPv4 header's addresses.
const (
	offSaddr = 12
	offDaddr = 16
)

// SaddrIn matches IPv4 sources in n (op CmpOpEq) or outside it (CmpOpNeq); DaddrIn destinations.
func SaddrIn(op expr.CmpOp, n *net.IPNet) []Expr { return addrIn(offSaddr, op, n) }
func DaddrIn(op expr.CmpOp, n *net.IPNet) []Expr { return addrIn(offDaddr, op, n) }

func addrIn(off uint32, op expr.CmpOp, n *net.IPNet) []Expr {
	return []Expr{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(n.Mask), Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: n.IP.To4().Mask(n.Mask)},
	}
}

// ProtoNumber is the IP protocol number of a Kubernetes protocol name ("UDP", "SCTP"; anything else is TCP,
// the API's default).
func ProtoNumber(name string) byte {
	switch name {
	case "UDP":
		return unix.IPPROTO_UDP
	case "SCTP":
		return unix.IPPROTO_SCTP
	}
	return unix.IPPROTO_TCP
}

// Proto matches the transport protocol (unix.IPPROTO_TCP, _UDP, _SCTP).
func Proto(p byte) []Expr {
	return []Expr{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

// Dport matches the transport destination port (after Proto).
func Dport(port uint16) []Expr {
	b := make([]byte, 2)
	binary.BigEndian.PutUint16(b, port)
	return []Expr{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}
