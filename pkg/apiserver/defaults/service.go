package defaults

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultClientIPServiceAffinitySeconds is the ClientIP session affinity
// timeout (3 hours) a service gets when it sets none.
const DefaultClientIPServiceAffinitySeconds int32 = corev1.DefaultClientIPServiceAffinitySeconds

// SetServiceDefaults defaults a Service the way a single-stack IPv4 cluster
// does: type ClusterIP, sessionAffinity None (ClientIP gets a 10800s
// timeout), port protocol TCP, targetPort equal to port when unset,
// clusterIPs mirroring clusterIP, internalTrafficPolicy Cluster,
// externalTrafficPolicy Cluster for NodePort and LoadBalancer,
// allocateLoadBalancerNodePorts true for LoadBalancer, and the IP families:
// ipFamilyPolicy SingleStack (RequireDualStack for headless services without
// a selector) and ipFamilies [IPv4]. ExternalName services get no IP
// families. Allocating the cluster IP itself is the registry's job.
func SetServiceDefaults(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if spec.SessionAffinityConfig == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP == nil {
			spec.SessionAffinityConfig.ClientIP = &corev1.ClientIPConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			t := DefaultClientIPServiceAffinitySeconds
			spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = &t
		}
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if zeroIntOrString(p.TargetPort) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if len(spec.ClusterIPs) == 0 && spec.ClusterIP != "" {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
	if spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.ExternalTrafficPolicy == "" {
			spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}
	}
	if spec.Type != corev1.ServiceTypeExternalName && spec.InternalTrafficPolicy == nil {
		p := corev1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &p
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		t := true
		spec.AllocateLoadBalancerNodePorts = &t
	}
	if spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if spec.IPFamilyPolicy == nil {
		policy := corev1.IPFamilyPolicySingleStack
		if spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0 {
			policy = corev1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &policy
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
}

// SetEndpointsDefaults gives every port of an Endpoints object protocol TCP
// when it has none.
func SetEndpointsDefaults(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if ep.Subsets[i].Ports[j].Protocol == "" {
				ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}
