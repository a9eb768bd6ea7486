//go:build linux

package serviceproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	vnetlink "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/network/nft"
)

// hairpinMark is the packet mark bit a connection from an endpoint to its own Service gets, so that it is
// masqueraded on the way back out to the same pod.
const hairpinMark = 0x4000

// What the table holds (read it with `nft list table ip rayctl-services` in the node namespace):
//
//	map service-ports      ClusterIP . protocol . port : goto the port's chain
//	chain nat-prerouting   (nat, prerouting, dstnat) what arrives (from pods): jump services
//	chain nat-output       (nat, output, dstnat) from the node namespace: jump services
//	chain services         lookup in service-ports
//	chain nat-postrouting  (nat, postrouting, srcnat) masquerade what hairpinMark marks
//	chain filter-forward, filter-output  (filter) refuse what is still addressed to the service range after
//	                       dstnat: no ready endpoint, a port the Service does not have, no such Service
//	chain svc/NS/NAME/PROTO/PORT   affinity lookups, then a random choice among the endpoints' chains
//	chain ep/NS/NAME/PROTO/PORT/IP:PORT  mark a hairpin, remember the client (affinity), DNAT
//	set aff/NS/NAME/PROTO/PORT/IP:PORT   (affinity only) clients sent to that endpoint, with timeouts
var (
	keyType = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
)

// The 32-bit registers a concatenated key is loaded into, one field each (NFT_REG32_00 on).
const (
	reg32x0 = 8
	reg32x1 = 9
	reg32x2 = 10
)

// Table is the proxy's nftables table in a network namespace, with the route that brings the node
// namespace's own connections to ClusterIPs through it.
type Table struct {
	opts  TableOptions
	conn  *nftables.Conn
	table *nftables.Table
	route *vnetlink.Route
	// affinity sets written last time, by name: their clients are carried over to the next write.
	affinity map[string]bool
	// chunk, when not 0, is how many ports go in one transaction: the socket's buffers could not be made
	// large enough for a whole table (rootless).
	chunk int
	// udp holds, by ClusterIP and port, the endpoints of the UDP ports written last time.
	udp map[udpPort][]Endpoint
}

// OpenTable connects to nftables in opts.NetNS, routes the service range onto the bridge there and writes an
// empty table (replacing whatever a previous run left).
func OpenTable(opts TableOptions) (*Table, error) {
	c, big, err := nft.OpenLarge(opts.NetNS, socketBuffer)
	if err != nil {
		return nil, err
	}
	t := &Table{opts: opts, conn: c, table: &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}}
	if !big {
		t.chunk = rootlessChunk
	}
	if err := network.Do(opts.NetNS, noRedirects(opts.Bridge)); err != nil {
		c.CloseLasting()
		return nil, err
	}
	if err := t.addRoute(); err != nil {
		c.CloseLasting()
		return nil, err
	}
	if err := t.Write(nil); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// socketBuffer is the netlink socket's send and receive buffer: a table of 1,000 Services is a transaction
// of some 10,000 messages (a few MB, and an acknowledgement for each), past the default of ~200 KB.
const socketBuffer = 32 << 20

// rootlessChunk is how many ports go in one transaction when the socket's buffers stay small: each port of
// 2 endpoints is some 10 messages, and 25 such ports fit a default 200 KB buffer with their acknowledgements.
const rootlessChunk = 20

// addRoute routes the service range onto the bridge, from the gateway's address: without a route a
// connection from the node namespace to a ClusterIP fails before nftables sees it.
func (t *Table) addRoute() error {
	return network.Do(t.opts.NetNS, func() error {
		br, err := vnetlink.LinkByName(t.opts.Bridge)
		if err != nil {
			return fmt.Errorf("service proxy: the bridge %s: %w", t.opts.Bridge, err)
		}
		r := &vnetlink.Route{LinkIndex: br.Attrs().Index, Dst: t.opts.ServiceCIDR, Src: t.opts.Gateway.To4(), Scope: vnetlink.SCOPE_LINK}
		if err := vnetlink.RouteReplace(r); err != nil {
			return fmt.Errorf("service proxy: routing %s onto %s: %w", t.opts.ServiceCIDR, t.opts.Bridge, err)
		}
		t.route = r
		return nil
	})
}

// noRedirects stops the node namespace sending ICMP redirects on the bridge. A pod's packet to a ClusterIP
// that no rule translates goes back out of the bridge it came in by, so the kernel would tell the pod to
// reach the ClusterIP directly (the pod would then look for it on the bridge, where nothing answers) and,
// having spent the pod's ICMP allowance on that, drop the refusal the filter chains send.
func noRedirects(bridge string) func() error {
	return func() error {
		for _, dev := range []string{"all", "default", bridge} {
			f := "/proc/sys/net/ipv4/conf/" + dev + "/send_redirects"
			if err := os.WriteFile(f, []byte("0\n"), 0o644); err != nil {
				return fmt.Errorf("service proxy: turning ICMP redirects off: %w", err)
			}
		}
		return nil
	}
}

// Close removes the table and the route (a namespace already gone is no error) and closes the connection.
func (t *Table) Close() error {
	var errs []error
	if t.conn != nil {
		t.conn.DelTable(t.table)
		if err := t.conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
		t.conn.CloseLasting()
		t.conn = nil
	}
	if t.route != nil {
		err := network.Do(t.opts.NetNS, func() error { return vnetlink.RouteDel(t.route) })
		if err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing the route to %s: %w", t.opts.ServiceCIDR, err))
		}
		t.route = nil
	}
	return errors.Join(errs...)
}

// Write replaces the table's rules with ports' in one transaction. Clients remembered by affinity sets of
// endpoints that stay are carried over with the time they have left.
func (t *Table) Write(ports []Port) error {
	kept := t.affinityClients()
	c := t.conn
	dispatch := t.queueBase()
	affinity := map[string]bool{}
	if t.chunk == 0 {
		if err := t.queuePorts(dispatch, ports, kept, affinity); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return err
		}
	} else {
		// Small socket buffers (rootless): the table goes in in several transactions, the empty table
		// first, then chunk ports at a time; until the last one, ClusterIPs not yet written refuse.
		if err := c.Flush(); err != nil {
			return err
		}
		for start := 0; start < len(ports); start += t.chunk {
			if err := t.queuePorts(dispatch, ports[start:min(start+t.chunk, len(ports))], kept, affinity); err != nil {
				return err
			}
			if err := c.Flush(); err != nil {
				return err
			}
		}
	}
	t.affinity = affinity
	t.forgetGoneUDPEndpoints(ports)
	return nil
}

// queueBase queues the table's replacement with its base chains, the services chain, the refusals and an
// empty service-ports map, which it returns.
func (t *Table) queueBase() *nftables.Set {
	c := t.conn
	tb := nft.ReplaceTable(c, t.table)
	dstnat, srcnat := nftables.ChainPriorityNATDest, nftables.ChainPriorityNATSource
	pre := nft.BaseChain(c, tb, "nat-prerouting", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, dstnat, nil)
	out := nft.BaseChain(c, tb, "nat-output", nftables.ChainTypeNAT, nftables.ChainHookOutput, dstnat, nil)
	post := nft.BaseChain(c, tb, "nat-postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, srcnat, nil)
	fwd := nft.BaseChain(c, tb, "filter-forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter, nil)
	lout := nft.BaseChain(c, tb, "filter-output", nftables.ChainTypeFilter, nftables.ChainHookOutput, nftables.ChainPriorityFilter, nil)
	services := c.AddChain(&nftables.Chain{Name: "services", Table: tb})
	dispatch := &nftables.Set{Table: tb, Name: "service-ports", KeyType: keyType, Concatenation: true, IsMap: true, DataType: nftables.TypeVerdict}
	if err := c.AddSet(dispatch, nil); err != nil {
		panic(err) // only for an anonymous set that is not constant
	}
	nft.Add(c, pre, nft.Jump("services"))
	nft.Add(c, out, nft.Jump("services"))
	nft.Add(c, services, dispatchLookup(dispatch))
	nft.Add(c, post, markSet(hairpinMark), nft.Masquerade)
	for _, ch := range []*nftables.Chain{fwd, lout} {
		nft.Add(c, ch, nft.DaddrIn(expr.CmpOpEq, t.opts.ServiceCIDR), nft.RejectTCP())
		// Anything else: ICMP port unreachable, which a UDP socket reads as connection refused.
		nft.Add(c, ch, nft.DaddrIn(expr.CmpOpEq, t.opts.ServiceCIDR), []nft.Expr{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3}})
	}
	return dispatch
}

// queuePorts queues the chains of ports and their entries in the service-ports map dispatch; the affinity
// sets it makes are added to affinity, each with the clients kept for it.
func (t *Table) queuePorts(dispatch *nftables.Set, ports []Port, kept map[string][]nftables.SetElement, affinity map[string]bool) error {
	c, tb := t.conn, dispatch.Table
	var portElems []nftables.SetElement
	for _, p := range ports {
		ip := p.IP.To4()
		if ip == nil {
			continue
		}
		if len(p.Endpoints) == 0 {
			continue // refused by the filter chains
		}
		name := portChainName(p)
		svc := c.AddChain(&nftables.Chain{Name: name, Table: tb})
		var epChains []string
		for _, ep := range p.Endpoints {
			epName := "ep/" + strings.TrimPrefix(name, "svc/") + "/" + net.JoinHostPort(ep.IP.String(), fmt.Sprint(ep.Port))
			epChain := c.AddChain(&nftables.Chain{Name: epName, Table: tb})
			epChains = append(epChains, epName)
			var remember []nft.Expr
			if p.Affinity > 0 {
				setName := "aff/" + strings.TrimPrefix(epName, "ep/")
				set := &nftables.Set{Table: tb, Name: setName, KeyType: nftables.TypeIPAddr, HasTimeout: true, Dynamic: true, Timeout: p.Affinity}
				if err := c.AddSet(set, kept[setName]); err != nil {
					return err
				}
				affinity[setName] = true
				// A client this endpoint had within the timeout comes back to it.
				nft.Add(c, svc, saddrLookup(set), []nft.Expr{&expr.Verdict{Kind: expr.VerdictGoto, Chain: epName}})
				remember = []nft.Expr{
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
					&expr.Dynset{SrcRegKey: 1, SetName: set.Name, SetID: set.ID, Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: p.Affinity},
				}
			}
			// An endpoint reaching itself through its Service: masqueraded on the way out (nat-postrouting).
			if t.opts.MasqueradePods {
				nft.Add(c, epChain, setMark(hairpinMark))
			} else {
				nft.Add(c, epChain, saddrIs(ep.IP), setMark(hairpinMark))
			}
			nft.Add(c, epChain, remember, nft.Proto(nft.ProtoNumber(string(p.Protocol))), dnat(ep.IP, ep.Port))
		}
		nft.Add(c, svc, pick(c, tb, epChains))
		portElems = append(portElems, nftables.SetElement{Key: portKey(ip, p.Protocol, p.Port),
			VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: name}})
	}
	if len(portElems) == 0 {
		return nil
	}
	return c.SetAddElements(dispatch, portElems)
}

// udpPort is a UDP ClusterIP port.
type udpPort struct {
	ip   string
	port uint16
}

// forgetGoneUDPEndpoints deletes the conntrack entries of UDP flows translated to an endpoint that a port no
// longer has: UDP has no connection to end, so a client that keeps sending (a DNS client, say) would stay on
// its translation to the endpoint that went away for as long as it sends. Its next datagram is translated
// afresh. Failures are logged: the entries expire by themselves.
func (t *Table) forgetGoneUDPEndpoints(ports []Port) {
	now := map[udpPort][]Endpoint{}
	for _, p := range ports {
		if p.Protocol == corev1.ProtocolUDP && p.IP.To4() != nil {
			key := udpPort{ip: p.IP.String(), port: uint16(p.Port)}
			now[key] = append(now[key], p.Endpoints...)
		}
	}
	var filters []vnetlink.CustomConntrackFilter
	for key, old := range t.udp {
		for _, ep := range old {
			if slices.ContainsFunc(now[key], func(e Endpoint) bool { return e.IP.Equal(ep.IP) && e.Port == ep.Port }) {
				continue
			}
			f := &vnetlink.ConntrackFilter{}
			_ = f.AddProtocol(unix.IPPROTO_UDP)
			_ = f.AddIP(vnetlink.ConntrackOrigDstIP, net.ParseIP(key.ip))
			_ = f.AddPort(vnetlink.ConntrackOrigDstPort, key.port)
			_ = f.AddIP(vnetlink.ConntrackReplySrcIP, ep.IP)
			filters = append(filters, f)
		}
	}
	t.udp = now
	if len(filters) == 0 {
		return
	}
	err := network.Do(t.opts.NetNS, func() error {
		_, err := vnetlink.ConntrackDeleteFilters(vnetlink.ConntrackTable, unix.AF_INET, filters...)
		return err
	})
	if err != nil {
		klog.ErrorS(err, "service proxy: forgetting UDP flows to endpoints that went away")
	}
}

// affinityClients reads the clients of the affinity sets written last time, each with the time it has left.
func (t *Table) affinityClients() map[string][]nftables.SetElement {
	out := map[string][]nftables.SetElement{}
	for name := range t.affinity {
		set := &nftables.Set{Table: t.table, Name: name, KeyType: nftables.TypeIPAddr}
		elems, err := t.conn.GetSetElements(set)
		if err != nil {
			continue
		}
		for _, e := range elems {
			if e.Expires > 0 {
				out[name] = append(out[name], nftables.SetElement{Key: e.Key, Timeout: e.Expires})
			}
		}
	}
	return out
}

// portChainName names the chain of one ClusterIP port: svc/NS/NAME/PROTO/PORT.
func portChainName(p Port) string {
	return fmt.Sprintf("svc/%s/%s/%d", p.Service, strings.ToLower(string(p.Protocol)), p.Port)
}

// portKey is a service-ports key: the address, the protocol and the port, each padded to 4 bytes.
func portKey(ip net.IP, proto corev1.Protocol, port int32) []byte {
	k := make([]byte, 12)
	copy(k, ip.To4())
	k[4] = nft.ProtoNumber(string(proto))
	binary.BigEndian.PutUint16(k[8:], uint16(port))
	return k
}

// dispatchLookup looks the packet's destination, protocol and port up in the verdict map m.
func dispatchLookup(m *nftables.Set) []nft.Expr {
	return []nft.Expr{
		&expr.Payload{DestRegister: reg32x0, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg32x1},
		&expr.Payload{DestRegister: reg32x2, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: reg32x0, SetName: m.Name, SetID: m.ID, IsDestRegSet: true, DestRegister: 0},
	}
}

func saddrLookup(s *nftables.Set) []nft.Expr {
	return []nft.Expr{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
	}
}

func saddrIs(ip net.IP) []nft.Expr {
	return []nft.Expr{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip.To4()},
	}
}

// setMark ORs bit into the packet's mark.
func setMark(bit uint32) []nft.Expr {
	return []nft.Expr{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^bit), Xor: binaryutil.NativeEndian.PutUint32(bit)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

// markSet matches packets whose mark has bit set.
func markSet(bit uint32) []nft.Expr {
	return []nft.Expr{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bit), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// dnat sends the connection to ip:port.
func dnat(ip net.IP, port int32) []nft.Expr {
	p := make([]byte, 2)
	binary.BigEndian.PutUint16(p, uint16(port))
	return []nft.Expr{
		&expr.Immediate{Register: 1, Data: ip.To4()},
		&expr.Immediate{Register: 2, Data: p},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2},
	}
}

// pick goes to one of chains at random (numgen random into an anonymous verdict map), or to the only one.
func pick(c *nftables.Conn, tb *nftables.Table, chains []string) []nft.Expr {
	if len(chains) == 1 {
		return []nft.Expr{&expr.Verdict{Kind: expr.VerdictGoto, Chain: chains[0]}}
	}
	m := &nftables.Set{Table: tb, Anonymous: true, Constant: true, IsMap: true, KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict}
	elems := make([]nftables.SetElement, len(chains))
	for i, ch := range chains {
		elems[i] = nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: ch}}
	}
	if err := c.AddSet(m, elems); err != nil {
		panic(err) // only for an anonymous set that is not constant
	}
	return []nft.Expr{
		&expr.Numgen{Register: 1, Modulus: uint32(len(chains)), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: 1, SetName: m.Name, SetID: m.ID, IsDestRegSet: true, DestRegister: 0},
	}
}
