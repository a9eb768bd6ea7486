package rayjob

import (
	"github.com/rayctl/rayctl/pkg/raydashboard"
)

// Resolver returns the base URL (http://host:port) at which the controller
// process reaches the dashboard of a RayCluster (see raydashboard.Resolver).
type Resolver = raydashboard.Resolver

// DefaultResolver reaches the dashboard through the cluster's head Service
// name when clusterDNS says that name resolves from this process, else through
// the head Pod's IP and the head container's dashboard port.
func DefaultResolver(clusterDNS bool, clusterDomain string) Resolver {
	return raydashboard.DefaultResolver(clusterDNS, clusterDomain)
}
