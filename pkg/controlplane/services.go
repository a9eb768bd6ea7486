package controlplane

import (
	"net"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/serviceproxy"
)

// proxiesServices reports whether Services' ClusterIPs carry traffic here: wherever pods have a network of
// their own (a node namespace with a bridge), where the Service proxy runs.
func (cp *ControlPlane) proxiesServices() bool {
	return cp.rt.Network != nil && cp.rt.Network.Gateway() != nil
}

// startServices is the "services" step: the Service proxy (identity rayctl:service-proxy, reading Services
// and EndpointSlices) keeps the nftables table rayctl-services in the node namespace, so that a
// connection to a ClusterIP and port from a pod or from the node namespace reaches a ready endpoint. The
// table (and the route to the service range) is removed when the proxy stops; with the node namespace,
// it goes at `rayctl down`. Where pods share the host's network, ClusterIPs carry nothing and names
// resolve to pods (the DNS server's headless answers, or the host's resolver).
func (cp *ControlPlane) startServices() (string, error) {
	if !cp.proxiesServices() {
		return "off: pods share the host's network; a Service's ClusterIP carries no traffic", nil
	}
	cfg, err := cp.identityConfig("service-proxy", "rayctl:service-proxy", nil)
	if err != nil {
		return "", err
	}
	_, cidr, err := net.ParseCIDR(apiserver.DefaultServiceCIDR)
	if err != nil {
		return "", err
	}
	nw := cp.rt.Network
	filtered := nw.BridgeFiltered()
	p, err := serviceproxy.New(serviceproxy.Options{RESTConfig: cfg, Table: serviceproxy.TableOptions{
		NetNS: nw.NodeNSPath(), Bridge: nw.Config().Bridge, Gateway: nw.Gateway(), ServiceCIDR: cidr, MasqueradePods: !filtered}})
	if err != nil {
		return "", err
	}
	cp.runLogged("services", p.Run)
	line := "ClusterIPs " + cidr.String() + " carry traffic to ready endpoints (nftables table " + serviceproxy.TableName +
		" in the node namespace); Service names resolve to them"
	if !filtered {
		line += "; without the kernel's br_netfilter, pods' connections to them are masqueraded (endpoints see the gateway's address)"
	}
	return line, nil
}
