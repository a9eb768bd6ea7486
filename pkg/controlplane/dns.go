package controlplane

import (
	"net"
	"strings"

	"github.com/rayctl/rayctl/pkg/dns"
)

// startDNS is the "dns" step: the cluster DNS server (identity rayctl:dns) on the pod bridge's gateway,
// port 53, in the node namespace where pods reach it (nothing on the host does), answering pods only;
// the kubelet gives pods its address. Where pods
// share the host's network (the fake runtime, the process runtime without root) there is no pod network
// to serve: pods use the host's resolver and no DNS server runs.
func (cp *ControlPlane) startDNS() (string, error) {
	rt := cp.rt
	if rt.Network == nil || rt.Network.Gateway() == nil {
		return "off: pods share the host's network and resolver", nil
	}
	cfg, err := cp.identityConfig("dns", "rayctl:dns", nil)
	if err != nil {
		return "", err
	}
	gw, subnet := rt.Network.Gateway(), rt.Network.Subnet()
	var upstreams []string // nil: the host's resolvers
	if cp.podsOffline() {
		upstreams = []string{} // names outside the cluster do not resolve
	}
	srv, err := dns.New(dns.Options{Upstreams: upstreams,
		Listen: []string{net.JoinHostPort(gw.String(), "53")}, NetNS: rt.Network.NodeNSPath(), RESTConfig: cfg,
		// Pods have addresses in the subnet; anything else in the node namespace comes from the gateway.
		AllowClient: func(ip net.IP) bool { return subnet.Contains(ip) && !ip.Equal(gw) },
		// The Service proxy (the "services" step) makes ClusterIPs carry traffic: names resolve to them.
		ClusterIPs: cp.proxiesServices(),
	})
	if err != nil {
		return "", err
	}
	cp.runLogged("dns", srv.Run)
	cp.clusterDNS = []string{gw.String()}
	return strings.Join(srv.Addrs(), ", "), nil
}
