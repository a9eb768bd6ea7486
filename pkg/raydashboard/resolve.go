package raydashboard

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// Ports and names of a Ray head that KubeRay's controllers rely on.
const (
	// DashboardPortName is the head container port (and head Service port) of the dashboard.
	DashboardPortName = "dashboard"
	// DefaultDashboardPort is the dashboard's port when the head container names none.
	DefaultDashboardPort = 8265
	// DefaultClusterDomain is the DNS domain of Services.
	DefaultClusterDomain = "cluster.local"
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
		clusterDomain = DefaultClusterDomain
	}
	return func(_ context.Context, c *rayv1.RayCluster) (string, error) {
		if clusterDNS {
			host := HeadServiceName(c) + "." + c.Namespace + ".svc." + clusterDomain
			return "http://" + net.JoinHostPort(host, strconv.Itoa(int(DashboardPort(&c.Spec)))), nil
		}
		if c.Status.Head.PodIP == "" {
			return "", fmt.Errorf("RayCluster %s/%s reports no head pod IP yet", c.Namespace, c.Name)
		}
		return "http://" + net.JoinHostPort(c.Status.Head.PodIP, strconv.Itoa(int(HeadPodDashboardPort(c)))), nil
	}
}

// HeadServiceName is the RayCluster's head Service.
func HeadServiceName(c *rayv1.RayCluster) string {
	if c.Status.Head.ServiceName != "" {
		return c.Status.Head.ServiceName
	}
	if hs := c.Spec.HeadGroupSpec.HeadService; hs != nil && hs.Name != "" {
		return hs.Name
	}
	return c.Name + "-head-svc"
}

// HeadContainer returns the Ray container of the head template (the first), or nil.
func HeadContainer(spec *rayv1.RayClusterSpec) *corev1.Container {
	if spec == nil || len(spec.HeadGroupSpec.Template.Spec.Containers) == 0 {
		return nil
	}
	return &spec.HeadGroupSpec.Template.Spec.Containers[0]
}

// ContainerPort is the head container's port called name, or def when it names none.
func ContainerPort(spec *rayv1.RayClusterSpec, name string, def int32) int32 {
	if c := HeadContainer(spec); c != nil {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	return def
}

// HeadPodDashboardPort is the port the head Pod's dashboard listens on: the head Service's target port
// for it, which status.endpoints holds for a ClusterIP Service (it differs from the Service's port where
// pods share the host's network and each has ports of its own), else the head container's.
func HeadPodDashboardPort(c *rayv1.RayCluster) int32 {
	if t := c.Spec.HeadGroupSpec.ServiceType; t == "" || t == corev1.ServiceTypeClusterIP {
		if n, err := strconv.ParseInt(c.Status.Endpoints[DashboardPortName], 10, 32); err == nil && n > 0 {
			return int32(n)
		}
	}
	return DashboardPort(&c.Spec)
}

// DashboardPort is the head container's dashboard port.
func DashboardPort(spec *rayv1.RayClusterSpec) int32 {
	return ContainerPort(spec, DashboardPortName, DefaultDashboardPort)
}
