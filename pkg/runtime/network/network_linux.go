package network

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Setup gives the pod a namespace, a veth on the bridge and an IP. For a pod
// already set up it returns the same attachment; a half-made one (after a
// crash) is rebuilt with the same IP.
func (m *Manager) Setup(podUID string) (*Attachment, error) {
	if m.cfg.HostOnly {
		return nil, errors.New("network: this manager is host-network only")
	}
	if podUID == "" {
		return nil, errors.New("network: empty pod UID")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	node, br, err := m.ensureNode()
	if err != nil {
		return nil, err
	}
	ip, err := m.ipam.allocate(podUID)
	if err != nil {
		return nil, err
	}
	att := m.attachment(podUID, ip)
	if m.complete(node, att) {
		return att, nil
	}
	// Start from nothing: whatever a crash left half-made goes first.
	m.removeLinkAndNS(podUID)
	if err := m.plumb(node, att, br); err != nil {
		m.removeLinkAndNS(podUID)
		_ = m.ipam.release(podUID)
		return nil, fmt.Errorf("network: pod %s: %w", podUID, err)
	}
	return att, nil
}

// complete reports whether the pod's namespace is mounted, its veth's node
// end exists, and eth0 inside carries its IP.
func (m *Manager) complete(node *netlink.Handle, att *Attachment) bool {
	if !isNetNS(att.NetNSPath) {
		return false
	}
	if _, err := node.LinkByName(att.HostVeth); err != nil {
		return false
	}
	h, err := handleIn(att.NetNSPath)
	if err != nil {
		return false
	}
	defer h.Close()
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		return false
	}
	addrs, err := h.AddrList(eth0, netlink.FAMILY_V4)
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if a.IP.Equal(att.IP) {
			return true
		}
	}
	return false
}

// ensureBridge makes the bridge in the node namespace (node) with the gateway address and brings it up.
func (m *Manager) ensureBridge(node *netlink.Handle) (netlink.Link, error) {
	link, err := node.LinkByName(m.cfg.Bridge)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return nil, fmt.Errorf("network: looking up bridge %s: %w", m.cfg.Bridge, err)
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: m.cfg.Bridge, MTU: m.cfg.MTU}}
		if err := node.LinkAdd(br); err != nil && !os.IsExist(err) {
			return nil, fmt.Errorf("network: creating bridge %s: %w", m.cfg.Bridge, err)
		}
		if link, err = node.LinkByName(m.cfg.Bridge); err != nil {
			return nil, err
		}
		// A Linux bridge whose address was never set takes the lowest of its ports' addresses, so a
		// pod's veth joining or leaving can change the gateway's MAC under the other pods, whose ARP
		// entries then point nowhere until they expire (~30 s without the API server or DNS). Setting
		// the address pins it, once, when the bridge is made: only this code makes bridges in the node
		// namespace.
		if err := node.LinkSetHardwareAddr(link, link.Attrs().HardwareAddr); err != nil {
			return nil, fmt.Errorf("network: pinning bridge %s's MAC address: %w", m.cfg.Bridge, err)
		}
	}
	if _, ok := link.(*netlink.Bridge); !ok {
		return nil, fmt.Errorf("network: %s exists and is a %s, not a bridge", m.cfg.Bridge, link.Type())
	}
	ones, bits := m.subnet.Mask.Size()
	want := &net.IPNet{IP: m.gateway, Mask: net.CIDRMask(ones, bits)}
	addrs, err := node.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	has := false
	for _, a := range addrs {
		if a.IP.Equal(m.gateway) {
			has = true
		}
	}
	if !has {
		if err := node.AddrAdd(link, &netlink.Addr{IPNet: want}); err != nil && !os.IsExist(err) {
			return nil, fmt.Errorf("network: giving bridge %s the address %s: %w", m.cfg.Bridge, want, err)
		}
	}
	if err := node.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("network: bringing bridge %s up: %w", m.cfg.Bridge, err)
	}
	return link, nil
}

// plumb makes the namespace and veth and configures both ends: the node end on the bridge in the node
// namespace, eth0 in the pod's.
func (m *Manager) plumb(node *netlink.Handle, att *Attachment, br netlink.Link) error {
	if err := createNetNS(att.NetNSPath); err != nil {
		return err
	}
	ns, err := netns.GetFromPath(att.NetNSPath)
	if err != nil {
		return err
	}
	defer ns.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: att.HostVeth, MTU: m.cfg.MTU, MasterIndex: br.Attrs().Index},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := node.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s: %w", att.HostVeth, err)
	}
	h, err := handleIn(att.NetNSPath)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: att.IP, Mask: net.CIDRMask(att.PrefixLen, 32)}}
	if err := h.AddrAdd(eth0, addr); err != nil {
		return fmt.Errorf("adding %s to eth0: %w", addr, err)
	}
	if err := h.LinkSetUp(eth0); err != nil {
		return fmt.Errorf("bringing eth0 up: %w", err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: att.Gateway}); err != nil {
		return fmt.Errorf("adding the default route via %s: %w", att.Gateway, err)
	}
	host, err := node.LinkByName(att.HostVeth)
	if err != nil {
		return err
	}
	// Hairpin: a pod that reaches itself through a Service's ClusterIP has its packet translated back to its
	// own address on the bridge, which must then send it out of the port it came in by.
	if err := node.LinkSetHairpin(host, true); err != nil {
		return fmt.Errorf("turning hairpin mode on for %s: %w", att.HostVeth, err)
	}
	if err := node.LinkSetUp(host); err != nil {
		return fmt.Errorf("bringing %s up: %w", att.HostVeth, err)
	}
	return nil
}

// removeLinkAndNS deletes the pod's veth (both ends go together) and its
// namespace, ignoring what is already gone.
func (m *Manager) removeLinkAndNS(podUID string) error {
	var errs []error
	// Without a node namespace there is no veth left: it went with the namespace.
	if node := m.openNode(); node != nil {
		if link, err := node.LinkByName(m.HostVethName(podUID)); err == nil {
			if err := node.LinkDel(link); err != nil {
				errs = append(errs, fmt.Errorf("deleting veth: %w", err))
			}
		}
	}
	if err := removeNetNS(m.NetNSPath(podUID)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RemoveBridge deletes the node namespace, and with it the bridge and every veth (for `rayctl down
// --purge` and tests); a missing one is not an error.
func (m *Manager) RemoveBridge() error {
	if m.cfg.HostOnly {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeNode()
	return removeNetNS(m.NodeNSPath())
}
