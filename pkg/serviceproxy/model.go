package serviceproxy

import (
	"net"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// DefaultAffinityTimeout is how long a client stays with its endpoint under sessionAffinity ClientIP when the
// Service gives no timeoutSeconds (three hours, the API's default).
const DefaultAffinityTimeout = 10800 * time.Second

// Port is one ClusterIP port of a Service and where its connections go.
type Port struct {
	// Service is the Service's "namespace/name"; Name the port's name ("" for a lone unnamed port).
	Service, Name string
	// IP is the ClusterIP (IPv4).
	IP net.IP
	// Protocol is TCP, UDP or SCTP.
	Protocol corev1.Protocol
	// Port is the Service's port.
	Port int32
	// Affinity, when not zero, keeps a client address on the endpoint it last reached for that long
	// (sessionAffinity ClientIP).
	Affinity time.Duration
	// Endpoints are the ready endpoints, ordered; none refuses connections.
	Endpoints []Endpoint
}

// Endpoint is one ready endpoint of a Port: an address and the port connections are sent to there.
type Endpoint struct {
	IP   net.IP
	Port int32
}

// Proxied reports whether the Service has a ClusterIP that carries traffic here: not headless, not
// ExternalName, an IPv4 ClusterIP.
func Proxied(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && clusterIPv4(svc) != nil
}

func clusterIPv4(svc *corev1.Service) net.IP {
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	return net.ParseIP(svc.Spec.ClusterIP).To4()
}

// Ports gives the ClusterIP ports of svc with their ready endpoints, from the Service's EndpointSlices
// (those labelled with its name; other Services' slices are ignored). A Service that is not Proxied has none.
func Ports(svc *corev1.Service, slices []*discoveryv1.EndpointSlice) []Port {
	ip := clusterIPv4(svc)
	if ip == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var affinity time.Duration
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		affinity = DefaultAffinityTimeout
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
			affinity = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
		}
	}
	out := make([]Port, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		p := Port{Service: svc.Namespace + "/" + svc.Name, Name: sp.Name, IP: ip, Protocol: proto, Port: sp.Port, Affinity: affinity}
		seen := map[string]bool{}
		for _, s := range slices {
			if s.Namespace != svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != svc.Name || s.AddressType != discoveryv1.AddressTypeIPv4 {
				continue
			}
			for _, slp := range s.Ports {
				if slp.Port == nil || ptrOr(slp.Name, "") != sp.Name || ptrOr(slp.Protocol, corev1.ProtocolTCP) != proto {
					continue
				}
				for _, ep := range s.Endpoints {
					if !ready(svc, ep) || len(ep.Addresses) == 0 {
						continue
					}
					eip := net.ParseIP(ep.Addresses[0]).To4()
					key := net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(*slp.Port)))
					if eip == nil || seen[key] {
						continue
					}
					seen[key] = true
					p.Endpoints = append(p.Endpoints, Endpoint{IP: eip, Port: *slp.Port})
				}
			}
		}
		sort.Slice(p.Endpoints, func(i, j int) bool {
			a, b := p.Endpoints[i], p.Endpoints[j]
			if c := compareIP(a.IP, b.IP); c != 0 {
				return c < 0
			}
			return a.Port < b.Port
		})
		out = append(out, p)
	}
	return out
}

// ready reports whether an endpoint takes new connections: its Ready condition (unset counts as ready, as
// the API says), or every endpoint when the Service publishes not-ready addresses.
func ready(svc *corev1.Service, ep discoveryv1.Endpoint) bool {
	return svc.Spec.PublishNotReadyAddresses || ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func compareIP(a, b net.IP) int {
	for i := range a {
		if i >= len(b) {
			return 1
		}
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return len(a) - len(b)
}
