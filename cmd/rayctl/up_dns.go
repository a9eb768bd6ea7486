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

// startDNS runs the cluster DNS server (identity rayctl:dns): on the pod bridge's gateway, port 53, where
// pods reach it, and on a free loopback port for the host. It returns the nameservers pods should use
// (none when pods share the host's network, e.g. the fake runtime: pods then use the host's resolver).
func startDNS(ctx context.Context, run func(func()), ca *pki.Authority, serverURL string, rt *selector.Choice, logger *zap.Logger) ([]string, string, error) {
	cfg, err := identityConfig(ca, serverURL, "dns", "rayctl:dns", nil)
	if err != nil {
		return nil, "", err
	}
	listen := []string{"127.0.0.1:0"}
	var nameservers []string
	if rt.Network != nil && rt.Network.Gateway() != nil {
		gw := rt.Network.Gateway().String()
		listen = append([]string{net.JoinHostPort(gw, "53")}, listen...)
		nameservers = []string{gw}
	}
	srv, err := dns.New(dns.Options{Listen: listen, FreeBind: true, RESTConfig: cfg})
	if err != nil {
		return nil, "", err
	}
	run(func() {
		if err := srv.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error("dns stopped", zap.Error(err))
		}
	})
	return nameservers, strings.Join(srv.Addrs(), ", "), nil
}
