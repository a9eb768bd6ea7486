package rayjob

import (
	"context"
	"fmt"
	"net"
	"strconv"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// Resolver returns the base URL (http://host:port) at which the controller
// process reaches the dashboard of a RayCluster. It is separate from the
// status.dashboardURL shown to users (the head Service's DNS name), because the
// controller may run where cluster DNS does not resolve.
type Resolver func(ctx context.Context, cluster *rayv1.RayCluster) (string, error)

// DefaultResolver reaches the dashboard through the cluster's head Service
// name when clusterDNS says that name resolves from this process, else through
// the head Pod's IP (status.head.podIP) and the head container's dashboard port.
func DefaultResolver(clusterDNS bool, clusterDomain string) Resolver {
	if clusterDomain == "" {
		clusterDomain = DefaultClusterDomain
	}
	return func(_ context.Context, c *rayv1.RayCluster) (string, error) {
		port := strconv.Itoa(int(dashboardContainerPort(&c.Spec)))
		if clusterDNS {
			host := clusterHeadServiceName(c) + "." + c.Namespace + ".svc." + clusterDomain
			return "http://" + net.JoinHostPort(host, port), nil
		}
		if c.Status.Head.PodIP == "" {
			return "", fmt.Errorf("RayCluster %s/%s reports no head pod IP yet", c.Namespace, c.Name)
		}
		return "http://" + net.JoinHostPort(c.Status.Head.PodIP, port), nil
	}
}
