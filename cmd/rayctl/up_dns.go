package main

import (
	"context"
	"net"
	"strings"

	"go.uber.org/zap"

	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/dns"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// startDNS runs the cluster DNS server (identity rayctl:dns) on the pod bridge's gateway, port 53, where
// pods reach it, answering pods only. It returns the nameservers pods should use. Where pods share the
// host's network (the fake runtime, the process runtime without root) there is no pod network to serve:
// pods use the host's resolver and no DNS server runs.
func startDNS(ctx context.Context, run func(func()), ca *pki.Authority, serverURL string, rt *selector.Choice, logger *zap.Logger) ([]string, string, error) {
	if rt.Network == nil || rt.Network.Gateway() == nil {
		return nil, "off: pods share the host's network and resolver", nil
	}
	cfg, err := identityConfig(ca, serverURL, "dns", "rayctl:dns", nil)
	if err != nil {
		return nil, "", err
	}
	gw, subnet := rt.Network.Gateway(), rt.Network.Subnet()
	srv, err := dns.New(dns.Options{
		Listen: []string{net.JoinHostPort(gw.String(), "53")}, FreeBind: true, RESTConfig: cfg,
		// Pods have addresses in the subnet; a host process reaching the bridge comes from the gateway.
		AllowClient: func(ip net.IP) bool { return subnet.Contains(ip) && !ip.Equal(gw) },
	})
	if err != nil {
		return nil, "", err
	}
	run(func() {
		if err := srv.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error("dns stopped", zap.Error(err))
		}
	})
	return []string{gw.String()}, strings.Join(srv.Addrs(), ", "), nil
}
