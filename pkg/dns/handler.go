package dns

import (
	"fmt"
	"net"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// specVersion is the Kubernetes DNS specification version the zone follows, served at dns-version.<zone>.
const specVersion = "1.1.0"

// ServeDNS answers one query: from the cluster's objects for the zone and known endpoint addresses, from the
// upstream resolvers for everything else.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	network := "udp"
	if _, ok := w.LocalAddr().(*net.TCPAddr); ok {
		network = "tcp"
	}
	var resp *dns.Msg
	if !s.allowed(w.RemoteAddr()) {
		resp = new(dns.Msg)
		resp.SetRcode(req, dns.RcodeRefused)
	} else if len(req.Question) == 1 && req.Opcode == dns.OpcodeQuery {
		resp = s.answer(req, network)
	} else {
		resp = new(dns.Msg)
		resp.SetRcode(req, dns.RcodeNotImplemented)
	}
	if network == "udp" {
		size := dns.MinMsgSize
		if o := req.IsEdns0(); o != nil {
			size = max(int(o.UDPSize()), dns.MinMsgSize)
		}
		resp.Truncate(size)
	}
	_ = w.WriteMsg(resp)
}

// answer builds the response to a one-question query.
func (s *Server) answer(req *dns.Msg, network string) *dns.Msg {
	q := req.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	ours := dns.IsSubDomain(s.zone, name)
	var ptrTarget string
	if !ours && q.Qtype == dns.TypePTR && q.Qclass == dns.ClassINET {
		if ip := reverseIPv4(name); ip != "" && s.records.ready.Load() {
			if ptrTarget = s.records.endpointName(ip); ptrTarget != "" {
				ours = true
			}
		}
	}
	if !ours {
		resp := s.forward(req, network)
		if resp == nil {
			resp = new(dns.Msg)
			resp.SetRcode(req, dns.RcodeServerFailure)
			resp.RecursionAvailable = true
			return resp
		}
		resp.Id = req.Id
		return resp
	}
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Authoritative, resp.RecursionAvailable = true, true
	if !s.records.ready.Load() {
		resp.SetRcode(req, dns.RcodeServerFailure)
		return resp
	}
	if o := req.IsEdns0(); o != nil {
		resp.SetEdns0(max(o.UDPSize(), dns.MinMsgSize), false)
	}
	if ptrTarget != "" {
		resp.Answer = []dns.RR{&dns.PTR{Hdr: s.hdr(q.Name, dns.TypePTR), Ptr: ptrTarget + "." + s.zone}}
		return resp
	}
	rcode, answer, extra := s.lookup(q, name, 0)
	resp.Rcode = rcode
	resp.Answer, resp.Extra = answer, append(resp.Extra, extra...)
	if len(answer) == 0 {
		resp.Ns = []dns.RR{s.soa()}
	}
	return resp
}

// lookup resolves a name inside the zone. depth counts CNAME hops.
func (s *Server) lookup(q dns.Question, name string, depth int) (rcode int, answer, extra []dns.RR) {
	rel := strings.TrimSuffix(strings.TrimSuffix(name, s.zone), ".")
	var labels []string
	if rel != "" {
		labels = strings.Split(rel, ".")
	}
	n := len(labels)
	switch {
	case n == 0:
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			return dns.RcodeSuccess, []dns.RR{s.soa()}, nil
		}
		return dns.RcodeSuccess, nil, nil
	case n == 1 && labels[0] == "dns-version":
		if q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY {
			return dns.RcodeSuccess, []dns.RR{&dns.TXT{Hdr: s.hdr(q.Name, dns.TypeTXT), Txt: []string{specVersion}}}, nil
		}
		return dns.RcodeSuccess, nil, nil
	case labels[n-1] == "svc":
		return s.lookupService(q, labels[:n-1], depth)
	case labels[n-1] == "pod":
		return s.lookupPod(q, labels[:n-1])
	}
	return dns.RcodeNameError, nil, nil
}

// lookupService answers names under svc.<zone>; l are the labels before "svc".
func (s *Server) lookupService(q dns.Question, l []string, depth int) (int, []dns.RR, []dns.RR) {
	switch len(l) {
	case 0:
		return dns.RcodeSuccess, nil, nil
	case 1:
		if s.records.hasServices(l[0]) {
			return dns.RcodeSuccess, nil, nil
		}
		return dns.RcodeNameError, nil, nil
	}
	n := len(l)
	svc := s.records.service(l[n-1], l[n-2])
	if svc == nil || n > 5 {
		return dns.RcodeNameError, nil, nil
	}
	svcName := l[n-2] + "." + l[n-1] + ".svc." + s.zone
	if n == 2 && svc.Spec.ExternalName != "" {
		return s.externalName(q, strings.ToLower(dns.Fqdn(svc.Spec.ExternalName)), depth)
	}
	if ip := clusterIPv4(svc); s.vips && ip != "" {
		return s.lookupClusterIP(q, l, svc, ip, svcName)
	}
	eps, ports := s.records.serviceEndpoints(svc)
	switch n {
	case 2: // <svc>.<ns>.svc
		var ans, extra []dns.RR
		if wantA(q.Qtype) {
			for _, e := range eps {
				ans = append(ans, s.a(q.Name, e.ip))
			}
		}
		if q.Qtype == dns.TypeSRV {
			ans, extra = s.srv(q.Name, svcName, ports, "", "")
		}
		return dns.RcodeSuccess, ans, extra
	case 3: // <ep>.<svc>.<ns>.svc, or the empty non-terminal _<proto>.<svc>.<ns>.svc
		if strings.HasPrefix(l[0], "_") {
			for _, p := range ports {
				if "_"+p.proto == l[0] && p.name != "" {
					return dns.RcodeSuccess, nil, nil
				}
			}
			return dns.RcodeNameError, nil, nil
		}
		for _, e := range eps {
			if e.name == l[0] {
				if wantA(q.Qtype) {
					return dns.RcodeSuccess, []dns.RR{s.a(q.Name, e.ip)}, nil
				}
				return dns.RcodeSuccess, nil, nil
			}
		}
	case 4: // _<port>._<proto>.<svc>.<ns>.svc
		if !strings.HasPrefix(l[0], "_") || !strings.HasPrefix(l[1], "_") {
			return dns.RcodeNameError, nil, nil
		}
		ans, extra := s.srv(q.Name, svcName, ports, l[0][1:], l[1][1:])
		if len(ans) == 0 {
			for _, p := range ports {
				if p.name == l[0][1:] && p.proto == l[1][1:] {
					return dns.RcodeSuccess, nil, nil // the port exists, no endpoint is ready
				}
			}
			return dns.RcodeNameError, nil, nil
		}
		if q.Qtype != dns.TypeSRV && q.Qtype != dns.TypeANY {
			return dns.RcodeSuccess, nil, nil
		}
		return dns.RcodeSuccess, ans, extra
	}
	return dns.RcodeNameError, nil, nil
}

// clusterIPv4 returns the Service's IPv4 ClusterIP, or "" for a headless or ExternalName Service.
func clusterIPv4(svc *corev1.Service) string {
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if svc.Spec.Type == corev1.ServiceTypeExternalName || ip == nil || ip.To4() == nil {
		return ""
	}
	return svc.Spec.ClusterIP
}

// lookupClusterIP answers the names of a Service with a ClusterIP (Options.ClusterIPs): the Service's name
// has the ClusterIP, and _<port>._<proto> SRV records name the Service and its port; l are the labels before
// "svc", svcName the Service's full name.
func (s *Server) lookupClusterIP(q dns.Question, l []string, svc *corev1.Service, ip, svcName string) (int, []dns.RR, []dns.RR) {
	type port struct {
		name, proto string
		port        int32
	}
	var ports []port
	for _, p := range svc.Spec.Ports {
		if p.Name == "" {
			continue
		}
		proto := strings.ToLower(string(p.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		ports = append(ports, port{strings.ToLower(p.Name), proto, p.Port})
	}
	srv := func(name, proto string) (ans, extra []dns.RR) {
		for _, p := range ports {
			if (name == "" || p.name == name) && (proto == "" || p.proto == proto) {
				ans = append(ans, &dns.SRV{Hdr: s.hdr(q.Name, dns.TypeSRV), Priority: 0, Weight: 100, Port: uint16(p.port), Target: svcName})
			}
		}
		if len(ans) > 0 {
			extra = []dns.RR{s.a(svcName, ip)}
		}
		return ans, extra
	}
	switch len(l) {
	case 2: // <svc>.<ns>.svc
		switch {
		case wantA(q.Qtype):
			return dns.RcodeSuccess, []dns.RR{s.a(q.Name, ip)}, nil
		case q.Qtype == dns.TypeSRV:
			ans, extra := srv("", "")
			return dns.RcodeSuccess, ans, extra
		}
		return dns.RcodeSuccess, nil, nil
	case 3: // only the empty non-terminal _<proto>.<svc>.<ns>.svc: a ClusterIP Service has no endpoint names
		for _, p := range ports {
			if strings.HasPrefix(l[0], "_") && p.proto == l[0][1:] {
				return dns.RcodeSuccess, nil, nil
			}
		}
	case 4: // _<port>._<proto>.<svc>.<ns>.svc
		if !strings.HasPrefix(l[0], "_") || !strings.HasPrefix(l[1], "_") {
			break
		}
		ans, extra := srv(l[0][1:], l[1][1:])
		if len(ans) == 0 {
			break
		}
		if q.Qtype != dns.TypeSRV && q.Qtype != dns.TypeANY {
			return dns.RcodeSuccess, nil, nil
		}
		return dns.RcodeSuccess, ans, extra
	}
	return dns.RcodeNameError, nil, nil
}

// srv builds SRV records for the named ports matching portName and proto (any when empty), one per ready
// endpoint, with A records for their targets as extra.
func (s *Server) srv(qname, svcName string, ports []servicePort, portName, proto string) (ans, extra []dns.RR) {
	seen := map[string]bool{}
	for _, p := range ports {
		if p.name == "" || (portName != "" && p.name != portName) || (proto != "" && p.proto != proto) {
			continue
		}
		for _, e := range p.endpoints {
			target := e.name + "." + svcName
			weight := uint16(100 / len(p.endpoints))
			ans = append(ans, &dns.SRV{Hdr: s.hdr(qname, dns.TypeSRV), Priority: 0, Weight: weight, Port: uint16(p.port), Target: target})
			if !seen[target] {
				seen[target] = true
				extra = append(extra, s.a(target, e.ip))
			}
		}
	}
	return ans, extra
}

// externalName answers an ExternalName Service with a CNAME, followed (for address questions) by the
// target's own records, looked up in the zone or upstream.
func (s *Server) externalName(q dns.Question, target string, depth int) (int, []dns.RR, []dns.RR) {
	ans := []dns.RR{&dns.CNAME{Hdr: s.hdr(q.Name, dns.TypeCNAME), Target: target}}
	if q.Qtype == dns.TypeCNAME || depth >= 8 {
		return dns.RcodeSuccess, ans, nil
	}
	next := dns.Question{Name: target, Qtype: q.Qtype, Qclass: q.Qclass}
	if dns.IsSubDomain(s.zone, target) {
		_, more, _ := s.lookup(next, target, depth+1)
		return dns.RcodeSuccess, append(ans, more...), nil
	}
	m := new(dns.Msg)
	m.SetQuestion(target, q.Qtype)
	if r := s.forward(m, "udp"); r != nil {
		ans = append(ans, r.Answer...)
	}
	return dns.RcodeSuccess, ans, nil
}

// lookupPod answers names under pod.<zone>: <a-b-c-d>.<ns>.pod; l are the labels before "pod".
func (s *Server) lookupPod(q dns.Question, l []string) (int, []dns.RR, []dns.RR) {
	switch len(l) {
	case 0:
		return dns.RcodeSuccess, nil, nil
	case 1:
		if s.records.hasPods(l[0]) {
			return dns.RcodeSuccess, nil, nil
		}
		return dns.RcodeNameError, nil, nil
	case 2:
		ip := net.ParseIP(strings.ReplaceAll(l[0], "-", "."))
		if ip == nil || ip.To4() == nil || !s.records.podHasIP(l[1], ip.String()) {
			return dns.RcodeNameError, nil, nil
		}
		if wantA(q.Qtype) {
			return dns.RcodeSuccess, []dns.RR{s.a(q.Name, ip.String())}, nil
		}
		return dns.RcodeSuccess, nil, nil
	}
	return dns.RcodeNameError, nil, nil
}

func wantA(t uint16) bool { return t == dns.TypeA || t == dns.TypeANY }

func (s *Server) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: s.ttl}
}

func (s *Server) a(name, ip string) dns.RR {
	return &dns.A{Hdr: s.hdr(name, dns.TypeA), A: net.ParseIP(ip).To4()}
}

// soa is the zone's SOA record; its minimum (the negative-caching TTL) is the record TTL too.
func (s *Server) soa() dns.RR {
	return &dns.SOA{Hdr: s.hdr(s.zone, dns.TypeSOA), Ns: "ns.dns." + s.zone, Mbox: "hostmaster." + s.zone,
		Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: s.ttl}
}

// reverseIPv4 turns d.c.b.a.in-addr.arpa. into a.b.c.d, or "".
func reverseIPv4(name string) string {
	rest, ok := strings.CutSuffix(name, ".in-addr.arpa.")
	if !ok {
		return ""
	}
	p := strings.Split(rest, ".")
	if len(p) != 4 {
		return ""
	}
	ip := net.ParseIP(fmt.Sprintf("%s.%s.%s.%s", p[3], p[2], p[1], p[0]))
	if ip == nil || ip.To4() == nil {
		return ""
	}
	return ip.String()
}
