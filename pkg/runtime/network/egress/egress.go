// Package egress gives pods a way out of rayctl's node network namespace, or makes sure they have none.
//
// On, a user-mode network stack (slirp4netns, as rootless Podman uses) owns a tap interface, egress0, in
// the node namespace: pods' connections leave the bridge, are masqueraded to the tap's address, and
// slirp4netns makes them again as ordinary sockets of its own in the host's namespace. The same path
// serves rayctl as root and as an ordinary user, changes nothing in the host's network (no forwarding,
// no NAT rules, nothing for a firewall such as Docker's to block), and reaches what the host reaches,
// except the host itself: the host's loopback is off (--disable-host-loopback) and the host's own
// addresses are refused in the node namespace, so a pod reaches no service the host runs.
//
// Off, a connection from a pod to anything beyond the node is refused at once (a TCP reset, an ICMP
// administratively-prohibited otherwise), never left to time out.
//
// Both keep one nftables table, rayctl-egress, in the node namespace (package nft).
package egress

import (
	"fmt"
	"net"
)

// What `rayctl up --pod-egress=…` asks for.
const (
	// Auto is egress where the host has a route out and slirp4netns can run, else off (and why).
	Auto = "auto"
	// On is egress or a refusal to start.
	On = "on"
	// Off keeps pods off everything beyond the node.
	Off = "off"
)

// Table is the nftables table egress keeps in the node namespace.
const Table = "rayctl-egress"

// Uplink is the name of the tap interface slirp4netns makes in the node namespace.
const Uplink = "egress0"

// Config says which node namespace egress serves and how.
type Config struct {
	// Mode is Auto (also when empty), On or Off.
	Mode string
	// NodeNSPath is the node network namespace's file; Bridge the pods' bridge in it, Subnet their range.
	NodeNSPath string
	Bridge     string
	Subnet     *net.IPNet
	// ServiceCIDR is the range ClusterIPs come from: never sent out (a ClusterIP nothing answers is refused).
	ServiceCIDR *net.IPNet
	// Slirp4netns is the program to run ("" looks for slirp4netns on PATH).
	Slirp4netns string
	// LogPath receives slirp4netns's output ("": discarded).
	LogPath string
	// Logf reports what happens to the uplink later (it died, it came back); nil discards.
	Logf func(format string, args ...any)
}

// CheckMode checks a --pod-egress value.
func CheckMode(mode string) error {
	switch mode {
	case "", Auto, On, Off:
		return nil
	}
	return fmt.Errorf("--pod-egress=%q: want %s, %s or %s", mode, Auto, On, Off)
}
