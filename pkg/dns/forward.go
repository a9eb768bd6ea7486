package dns

import (
	"net"
	"strings"

	"github.com/miekg/dns"
)

// ReadUpstreams returns the nameservers of a resolv.conf file as host:port.
func ReadUpstreams(path string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range cc.Servers {
		out = append(out, net.JoinHostPort(s, cc.Port))
	}
	return out, nil
}

// filterUpstreams gives each upstream a port (53 by default) and drops the server's own addresses, which
// would forward in a loop.
func filterUpstreams(ups, own []string) []string {
	self := map[string]bool{}
	for _, a := range own {
		self[a] = true
	}
	var out []string
	for _, u := range ups {
		if _, _, err := net.SplitHostPort(u); err != nil {
			u = net.JoinHostPort(strings.Trim(u, "[]"), "53")
		}
		if !self[u] {
			out = append(out, u)
		}
	}
	return out
}

// forward asks the upstreams in turn, over the given transport ("udp" or "tcp"), and returns the first answer
// (nil when none answered). A truncated UDP answer is retried over TCP.
func (s *Server) forward(req *dns.Msg, network string) *dns.Msg {
	for _, up := range s.upstreams {
		c := &dns.Client{Net: network, Timeout: s.timeout}
		resp, _, err := c.Exchange(req, up)
		if err == nil && resp.Truncated && network == "udp" {
			c.Net = "tcp"
			if r, _, err := c.Exchange(req, up); err == nil {
				resp = r
			}
		}
		if err == nil && resp != nil {
			return resp
		}
	}
	return nil
}
