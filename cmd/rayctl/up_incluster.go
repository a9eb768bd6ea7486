package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// apiServerSANs are the names and addresses the API server's serving certificate holds: loopback, where
// rayctl's components and kubectl reach it; the pod bridge's gateway (known from --pod-cidr before the
// bridge exists) and the kubernetes Service's ClusterIP and names, where in-cluster clients reach it.
func apiServerSANs(podCIDR string) ([]string, []net.IP, error) {
	gw, err := network.GatewayOf(podCIDR)
	if err != nil {
		return nil, nil, fmt.Errorf("--pod-cidr: %w", err)
	}
	hosts := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + network.ClusterDomain}
	return hosts, []net.IP{net.IPv4(127, 0, 0, 1), gw, apiserver.KubernetesServiceIP(nil)}, nil
}

// servePods makes the API server reachable from pods and publishes where, in default/kubernetes (its
// Endpoints and EndpointSlice, which the cluster DNS answers kubernetes.default.svc with). Pods with a
// network of their own reach it on the bridge's gateway, port 443 (the Service's port: rayctl routes no
// ClusterIPs, so clients dial the endpoint itself), through a second listener of the same server, TLS
// and authentication; it binds the gateway only, never a wildcard, so nothing beyond the machine reaches
// it. Pods on the host's network reach the loopback listener. It returns the address pods are given
// (KUBERNETES_SERVICE_HOST and _PORT).
func servePods(ctx context.Context, server *apiserver.Server, rt *selector.Choice) (net.IP, int, error) {
	if rt.Network == nil || rt.Network.Gateway() == nil {
		_, p, err := net.SplitHostPort(server.Addr)
		if err != nil {
			return nil, 0, err
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, 0, err
		}
		host := net.IPv4(127, 0, 0, 1)
		server.PublishEndpoint(ctx, host, port)
		return host, port, nil
	}
	gw := rt.Network.Gateway()
	// IP_FREEBIND: the bridge, and its address, come with the first pod.
	ln, err := network.ListenConfig(true).Listen(ctx, "tcp", net.JoinHostPort(gw.String(), strconv.Itoa(apiserver.KubernetesServicePort)))
	if err != nil {
		return nil, 0, fmt.Errorf("listening for pods on the bridge: %w", err)
	}
	server.ServePods(ln)
	server.PublishEndpoint(ctx, gw, apiserver.KubernetesServicePort)
	return gw, apiserver.KubernetesServicePort, nil
}

// podAPIAddress is where pods reach the API server.
type podAPIAddress struct {
	host net.IP
	port int
}

func (a podAPIAddress) String() string {
	return net.JoinHostPort(a.host.String(), strconv.Itoa(a.port))
}
