package controlplane

import (
	"fmt"
	"net"
	"strconv"

	"github.com/rayctl/rayctl/pkg/apiserver"
)

// servePods is the "pod-api" step: it makes the API server reachable from pods and publishes where, in
// default/kubernetes (its Endpoints and EndpointSlice, which the cluster DNS answers
// kubernetes.default.svc with). Pods with a network of their own reach it on the bridge's gateway, port
// 443 (the Service's port, so the endpoint works whether or not the Service proxy translates the ClusterIP), through a
// second listener of the same server, TLS and authentication, bound in the node namespace (which holds
// the bridge; the host's namespace has no route into it) on the gateway only, never a wildcard. Pods on the host's network reach the loopback
// listener. The address pods are given (KUBERNETES_SERVICE_HOST and _PORT) is kept for the kubelet.
func (cp *ControlPlane) servePods() (string, error) {
	ctx, server, rt := cp.compCtx, cp.server, cp.rt
	if rt.Network == nil || rt.Network.Gateway() == nil {
		_, p, err := net.SplitHostPort(server.Addr)
		if err != nil {
			return "", err
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			return "", err
		}
		cp.podAPI = podAPIAddress{host: net.IPv4(127, 0, 0, 1), port: port}
	} else {
		gw := rt.Network.Gateway()
		ln, err := rt.Network.Listen(ctx, "tcp", net.JoinHostPort(gw.String(), strconv.Itoa(apiserver.KubernetesServicePort)))
		if err != nil {
			return "", fmt.Errorf("listening for pods on the bridge: %w", err)
		}
		server.ServePods(ln)
		cp.podAPI = podAPIAddress{host: gw, port: apiserver.KubernetesServicePort}
	}
	server.PublishEndpoint(ctx, cp.podAPI.host, cp.podAPI.port)
	return "pods reach the API server at https://" + cp.podAPI.String() + " (default/kubernetes)", nil
}

// podAPIAddress is where pods reach the API server.
type podAPIAddress struct {
	host net.IP
	port int
}

func (a podAPIAddress) String() string {
	return net.JoinHostPort(a.host.String(), strconv.Itoa(a.port))
}
