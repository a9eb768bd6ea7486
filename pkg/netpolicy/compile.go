// Package netpolicy enforces networking.k8s.io/v1 NetworkPolicies in rayctl's pod network. It watches
// NetworkPolicies, Pods and Namespaces through the API server and keeps one nftables table,
// rayctl-policy (IPv4), in the node network namespace: a pod a policy selects for a direction is
// isolated in it, and only traffic some rule allows passes; pod-to-pod traffic needs the source's
// egress and the destination's ingress to allow it; replies of allowed connections pass.
//
// What it filters is traffic the node namespace forwards: pod to pod across the bridge and pod to the
// world through the egress interface. Traffic the node itself sends to pods (probes, port-forward,
// exec, the API server's proxy) and traffic from pods to the node's own listeners on the gateway
// (cluster DNS, the API server's pod listener) is never forwarded, and stays allowed: Kubernetes
// leaves traffic to and from the node to the implementation.
//
// This file turns the API objects into a Ruleset (any platform); the table is written on Linux.
package netpolicy

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Ruleset is what the table enforces: the pods isolated for ingress and for egress, each with what it
// allows.
type Ruleset struct {
	// Ingress are the pods isolated for ingress, by IP; Egress those isolated for egress.
	Ingress, Egress []Isolated
}

// Isolated is one pod isolated in one direction, and the traffic allowed to it (ingress) or from it (egress).
type Isolated struct {
	// Pod is the pod's namespace/name; IP its address.
	Pod string
	IP  net.IP
	// Allow lists what passes: the traffic matching any one entry (none: nothing passes).
	Allow []Allow
}

// Allow is traffic some rule allows: the peer's address (the source for ingress, the destination for
// egress) one of IPs (pods), or else inside Net (nil: any address) and outside each of Except, to one
// of Ports (none: any protocol and port).
type Allow struct {
	IPs    []net.IP
	Net    *net.IPNet
	Except []*net.IPNet
	Ports  []Port
}

// Port is a protocol's destination ports From..To (From 0: every port of the protocol).
type Port struct {
	Protocol corev1.Protocol
	From, To uint16
}

func (p Port) String() string {
	switch {
	case p.From == 0:
		return string(p.Protocol)
	case p.From == p.To:
		return fmt.Sprintf("%s/%d", p.Protocol, p.From)
	}
	return fmt.Sprintf("%s/%d-%d", p.Protocol, p.From, p.To)
}

// String renders the entry compactly; entries with the same rendering are the same.
func (a Allow) String() string {
	var b strings.Builder
	if len(a.IPs) > 0 {
		for i, ip := range a.IPs {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(ip.String())
		}
	} else if a.Net == nil {
		b.WriteString("any")
	} else {
		b.WriteString(a.Net.String())
	}
	for _, e := range a.Except {
		b.WriteString(" !" + e.String())
	}
	for _, p := range a.Ports {
		b.WriteString(" " + p.String())
	}
	return b.String()
}

// Rules counts the ruleset's allow entries.
func (r *Ruleset) Rules() int {
	n := 0
	for _, l := range [][]Isolated{r.Ingress, r.Egress} {
		for _, i := range l {
			n += len(i.Allow)
		}
	}
	return n
}

// Equal says whether two rulesets enforce the same.
func (r *Ruleset) Equal(o *Ruleset) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.key() == o.key()
}

func (r *Ruleset) key() string {
	var b strings.Builder
	for d, l := range [][]Isolated{r.Ingress, r.Egress} {
		for _, i := range l {
			fmt.Fprintf(&b, "%d %s %s:", d, i.Pod, i.IP)
			for _, a := range i.Allow {
				b.WriteString(a.String() + ";")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// podInfo is a pod on the pod network, as the compiler needs it.
type podInfo struct {
	pod *corev1.Pod
	ip  net.IP
	net *net.IPNet
}

// Compile works out the ruleset the policies make for the pods: pods with an IPv4 address on the pod
// network (not the host's network, not finished) count; namespaces give namespaceSelectors their labels.
func Compile(policies []*networkingv1.NetworkPolicy, pods []*corev1.Pod, namespaces []*corev1.Namespace) *Ruleset {
	nsLabels := map[string]labels.Set{}
	for _, ns := range namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	// One pod per address: where two claim one (a stale object beside the pod that has the address now),
	// the newer counts.
	byIP := map[string]podInfo{}
	for _, p := range pods {
		ip := net.ParseIP(p.Status.PodIP).To4()
		if ip == nil || p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if old, ok := byIP[ip.String()]; ok && !old.pod.CreationTimestamp.Before(&p.CreationTimestamp) {
			continue
		}
		byIP[ip.String()] = podInfo{p, ip, &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}
	}
	live := make([]podInfo, 0, len(byIP))
	for _, p := range byIP {
		live = append(live, p)
	}
	sort.Slice(live, func(i, j int) bool { return ipLess(live[i].ip, live[j].ip) })
	pols := slices.Clone(policies)
	sort.Slice(pols, func(i, j int) bool {
		return pols[i].Namespace+"/"+pols[i].Name < pols[j].Namespace+"/"+pols[j].Name
	})
	c := compiler{nsLabels: nsLabels, pods: live, memo: map[*networkingv1.NetworkPolicyPeer][]peer{}, sel: selectors{}}
	out := &Ruleset{}
	for _, p := range live {
		var in, eg []Allow
		var isIn, isEg bool
		for _, pol := range pols {
			if pol.Namespace != p.pod.Namespace || !c.sel.matches(&pol.Spec.PodSelector, p.pod.Labels) {
				continue
			}
			ingress, egress := policyTypes(pol)
			if ingress {
				isIn = true
				for _, r := range pol.Spec.Ingress {
					in = append(in, c.ingress(pol.Namespace, r, p)...)
				}
			}
			if egress {
				isEg = true
				for _, r := range pol.Spec.Egress {
					eg = append(eg, c.egress(pol.Namespace, r)...)
				}
			}
		}
		if isIn {
			out.Ingress = append(out.Ingress, Isolated{Pod: p.pod.Namespace + "/" + p.pod.Name, IP: p.ip, Allow: dedup(in)})
		}
		if isEg {
			out.Egress = append(out.Egress, Isolated{Pod: p.pod.Namespace + "/" + p.pod.Name, IP: p.ip, Allow: dedup(eg)})
		}
	}
	return out
}

// policyTypes are the directions a policy isolates in: as the API defaults them when unset, ingress
// always and egress when the policy has egress rules.
func policyTypes(pol *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(pol.Spec.PolicyTypes) == 0 {
		return true, len(pol.Spec.Egress) > 0
	}
	for _, t := range pol.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

type compiler struct {
	nsLabels map[string]labels.Set
	pods     []podInfo
	// memo keeps each rule's peers, by the rule's first peer, once worked out.
	memo map[*networkingv1.NetworkPolicyPeer][]peer
	sel  selectors
}

// ingress is what one ingress rule of a policy in namespace ns allows to pod dst: named ports are
// looked up in dst's containers.
func (c *compiler) ingress(ns string, r networkingv1.NetworkPolicyIngressRule, dst podInfo) []Allow {
	ports, ok := resolve(r.Ports, dst.pod)
	if !ok {
		return nil
	}
	return allows(c.peers(ns, r.From), ports)
}

// allows makes the entries allowing peers on ports: the pods' addresses in one entry, each other
// range in one of its own.
func allows(peers []peer, ports []Port) []Allow {
	var out []Allow
	var ips []net.IP
	seen := map[string]bool{}
	for _, p := range peers {
		if p.pod {
			if k := p.net.IP.String(); !seen[k] {
				seen[k] = true
				ips = append(ips, p.net.IP)
			}
			continue
		}
		out = append(out, Allow{Net: p.net, Except: p.except, Ports: ports})
	}
	if len(ips) > 0 {
		sort.Slice(ips, func(i, j int) bool { return ipLess(ips[i], ips[j]) })
		out = append(out, Allow{IPs: ips, Ports: ports})
	}
	return out
}

// egress is what one egress rule of a policy in namespace ns allows from the pods it selects. Named
// ports are looked up in each destination pod, so a rule with one reaches pods only, each by its own number.
func (c *compiler) egress(ns string, r networkingv1.NetworkPolicyEgressRule) []Allow {
	peers := c.peers(ns, r.To)
	if !hasNamed(r.Ports) {
		ports, _ := resolve(r.Ports, nil)
		return allows(peers, ports)
	}
	// The destination pods, grouped by what the ports come to in each.
	byPorts := map[string][]peer{}
	portsOf := map[string][]Port{}
	var keys []string
	for _, p := range c.pods {
		in := false
		for _, peer := range peers {
			if peer.contains(p.ip) {
				in = true
				break
			}
		}
		if !in {
			continue
		}
		ports, ok := resolve(r.Ports, p.pod)
		if !ok {
			continue
		}
		k := fmt.Sprint(ports)
		if _, ok := byPorts[k]; !ok {
			keys = append(keys, k)
			portsOf[k] = ports
		}
		byPorts[k] = append(byPorts[k], peer{net: p.net, pod: true})
	}
	var out []Allow
	for _, k := range keys {
		out = append(out, allows(byPorts[k], portsOf[k])...)
	}
	return out
}

// peer is an address range a rule names: a pod's /32, an ipBlock, or nil Net for any address.
type peer struct {
	net    *net.IPNet
	except []*net.IPNet
	pod    bool
}

func (p peer) contains(ip net.IP) bool {
	if p.net != nil && !p.net.Contains(ip) {
		return false
	}
	for _, e := range p.except {
		if e.Contains(ip) {
			return false
		}
	}
	return true
}

// peers turns a rule's from/to list into address ranges; an empty list is every address.
func (c *compiler) peers(ns string, list []networkingv1.NetworkPolicyPeer) []peer {
	if len(list) == 0 {
		return []peer{{}}
	}
	if out, ok := c.memo[&list[0]]; ok {
		return out
	}
	out := c.peersOf(ns, list)
	c.memo[&list[0]] = out
	return out
}

func (c *compiler) peersOf(ns string, list []networkingv1.NetworkPolicyPeer) []peer {
	var out []peer
	for _, p := range list {
		if p.IPBlock != nil {
			_, n, err := net.ParseCIDR(p.IPBlock.CIDR)
			if err != nil || n.IP.To4() == nil {
				continue // IPv6 blocks match nothing on this IPv4 network
			}
			b := peer{net: n}
			for _, e := range p.IPBlock.Except {
				if _, en, err := net.ParseCIDR(e); err == nil && en.IP.To4() != nil {
					b.except = append(b.except, en)
				}
			}
			out = append(out, b)
			continue
		}
		if p.PodSelector == nil && p.NamespaceSelector == nil {
			continue
		}
		for _, pod := range c.pods {
			if p.NamespaceSelector == nil {
				if pod.pod.Namespace != ns {
					continue
				}
			} else if !c.sel.matches(p.NamespaceSelector, c.nsLabels[pod.pod.Namespace]) {
				continue
			}
			if p.PodSelector != nil && !c.sel.matches(p.PodSelector, pod.pod.Labels) {
				continue
			}
			out = append(out, peer{net: pod.net, pod: true})
		}
	}
	return out
}

func hasNamed(ports []networkingv1.NetworkPolicyPort) bool {
	for _, p := range ports {
		if p.Port != nil && p.Port.StrVal != "" && p.Port.IntVal == 0 {
			return true
		}
	}
	return false
}

// resolve turns a rule's ports into Ports, named ones looked up in pod's containers (nil pod: none are
// named). ok is false when the rule lists ports and none applies to pod: the rule allows nothing there.
func resolve(ports []networkingv1.NetworkPolicyPort, pod *corev1.Pod) (out []Port, ok bool) {
	if len(ports) == 0 {
		return nil, true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		switch {
		case p.Port == nil:
			out = append(out, Port{Protocol: proto})
		case p.Port.StrVal != "" && p.Port.IntVal == 0:
			if n := namedPort(pod, p.Port.StrVal, proto); n != 0 {
				out = append(out, Port{Protocol: proto, From: n, To: n})
			}
		default:
			from, to := uint16(p.Port.IntValue()), uint16(p.Port.IntValue())
			if p.EndPort != nil && *p.EndPort > int32(from) {
				to = uint16(*p.EndPort)
			}
			out = append(out, Port{Protocol: proto, From: from, To: to})
		}
	}
	return out, len(out) > 0
}

// namedPort is the number of pod's container port called name with protocol proto (0 if none).
func namedPort(pod *corev1.Pod, name string, proto corev1.Protocol) uint16 {
	if pod == nil {
		return 0
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				pp := p.Protocol
				if pp == "" {
					pp = corev1.ProtocolTCP
				}
				if p.Name == name && pp == proto {
					return uint16(p.ContainerPort)
				}
			}
		}
	}
	return 0
}

// selectors keeps each selector of one compilation converted once.
type selectors map[*metav1.LabelSelector]labels.Selector

func (c selectors) matches(sel *metav1.LabelSelector, set labels.Set) bool {
	s, ok := c[sel]
	if !ok {
		var err error
		if s, err = metav1.LabelSelectorAsSelector(sel); err != nil {
			s = labels.Nothing() // the API server validates selectors; an invalid one selects nothing
		}
		c[sel] = s
	}
	return s.Matches(set)
}

func dedup(in []Allow) []Allow {
	seen := map[string]bool{}
	var out []Allow
	for _, a := range in {
		if k := a.String(); !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	return out
}

func ipLess(a, b net.IP) bool { return string(a.To16()) < string(b.To16()) }
