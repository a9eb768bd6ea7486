package raydashboard

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// Resolver returns the base URL (http://host:port) at which the controller
// process reaches the dashboard of a RayCluster. It is separate from the
// dashboard URL shown to users (the head Service's DNS name), because the
// controller may run where cluster DNS does not resolve.
type Resolver func(ctx context.Context, cluster *rayv1.RayCluster) (string, error)

// DefaultResolver reaches the dashboard through the cluster's head Service
// name when clusterDNS says that name resolves from this process, else through
// the head Pod's IP (status.head.podIP) and the head Pod's dashboard port
// (HeadPodDashboardPort).
func DefaultResolver(clusterDNS bool, clusterDomain string) Resolver {
	if clusterDomain == "" {
		clusterDomain = rayparams.DefaultClusterDomain
	}
	return func(_ context.Context, c *rayv1.RayCluster) (string, error) {
		if clusterDNS {
			host := rayparams.CurrentHeadServiceName(c) + "." + c.Namespace + ".svc." + clusterDomain
			return "http://" + net.JoinHostPort(host, strconv.Itoa(int(rayparams.DashboardPort(&c.Spec)))), nil
		}
		if c.Status.Head.PodIP == "" {
			return "", fmt.Errorf("RayCluster %s/%s reports no head pod IP yet", c.Namespace, c.Name)
		}
		return "http://" + net.JoinHostPort(c.Status.Head.PodIP, strconv.Itoa(int(HeadPodDashboardPort(c)))), nil
	}
}

// HeadPodDashboardPort is the port the head Pod's dashboard listens on: the head Service's target port
// for it, which status.endpoints holds for a ClusterIP Service (it differs from the Service's port where
// pods share the host's network and each has ports of its own), else the head container's.
func HeadPodDashboardPort(c *rayv1.RayCluster) int32 {
	if t := c.Spec.HeadGroupSpec.ServiceType; t == "" || t == corev1.ServiceTypeClusterIP {
		if n, err := strconv.ParseInt(c.Status.Endpoints[rayparams.DashboardPortName], 10, 32); err == nil && n > 0 {
			return int32(n)
		}
	}
	return rayparams.DashboardPort(&c.Spec)
}
