package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedServiceTypes = []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName}
	supportedSessionAffinity  = []corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}
	supportedTrafficPolicies  = []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}
	supportedInternalPolicies = []corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}
	supportedIPFamilyPolicies = []corev1.IPFamilyPolicy{corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack}
	supportedIPFamilies       = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
)

// maxClientIPServiceAffinitySeconds is the longest ClientIP affinity timeout (one day).
const maxClientIPServiceAffinitySeconds = 86400

// ValidateService checks a Service on create: metadata (name a DNS-1035
// label), type, ports (numbers, protocols, names, target ports, node ports),
// selector, session affinity, cluster IPs, external IPs and traffic policies.
func ValidateService(svc *corev1.Service) field.ErrorList {
	allErrs := namespacedMeta(&svc.ObjectMeta, NameIsDNS1035Label)
	specPath := field.NewPath("spec")
	spec := &svc.Spec
	headless := spec.ClusterIP == corev1.ClusterIPNone

	allErrs = append(allErrs, oneOf(spec.Type, specPath.Child("type"), supportedServiceTypes...)...)
	if len(spec.Ports) == 0 && !headless && spec.Type != corev1.ServiceTypeExternalName {
		allErrs = append(allErrs, field.Required(specPath.Child("ports"), ""))
	}
	if spec.Type == corev1.ServiceTypeExternalName {
		if spec.ClusterIP != "" {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("clusterIP"), "may not be set for ExternalName services"))
		}
		if len(spec.ClusterIPs) != 0 {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if spec.ExternalName == "" {
			allErrs = append(allErrs, field.Required(specPath.Child("externalName"), ""))
		} else {
			allErrs = append(allErrs, dnsSubdomain(strings.TrimSuffix(spec.ExternalName, "."), specPath.Child("externalName"))...)
		}
	}
	allErrs = append(allErrs, validateServicePorts(spec, specPath.Child("ports"))...)
	allErrs = append(allErrs, metav1validation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	allErrs = append(allErrs, validateSessionAffinity(spec, specPath)...)
	allErrs = append(allErrs, validateClusterIPs(spec, specPath)...)
	for i, ip := range spec.ExternalIPs {
		p := specPath.Child("externalIPs").Index(i)
		errs := validIP(ip, p)
		if len(errs) == 0 && (ip == "0.0.0.0" || ip == "::") {
			errs = append(errs, field.Invalid(p, ip, "may not be unspecified (0.0.0.0)"))
		}
		allErrs = append(allErrs, errs...)
	}
	allErrs = append(allErrs, validateTrafficPolicies(spec, specPath)...)

	if spec.Type != corev1.ServiceTypeLoadBalancer {
		if spec.AllocateLoadBalancerNodePorts != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
		}
		if spec.LoadBalancerClass != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("loadBalancerClass"), "may only be used when `type` is 'LoadBalancer'"))
		}
		if len(spec.LoadBalancerSourceRanges) > 0 {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("loadBalancerSourceRanges"), "may only be used when `type` is 'LoadBalancer'"))
		}
	} else {
		if spec.AllocateLoadBalancerNodePorts == nil {
			allErrs = append(allErrs, field.Required(specPath.Child("allocateLoadBalancerNodePorts"), ""))
		}
		if spec.LoadBalancerClass != nil {
			allErrs = append(allErrs, qualifiedName(*spec.LoadBalancerClass, specPath.Child("loadBalancerClass"))...)
		}
		for i, r := range spec.LoadBalancerSourceRanges {
			allErrs = append(allErrs, validCIDR(strings.TrimSpace(r), specPath.Child("loadBalancerSourceRanges").Index(i))...)
		}
	}
	return allErrs
}

func validateServicePorts(spec *corev1.ServiceSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	type key struct {
		port     int32
		protocol corev1.Protocol
	}
	ports, nodePorts := map[key]bool{}, map[key]bool{}
	nodePortAllowed := spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer
	for i, port := range spec.Ports {
		p := fldPath.Index(i)
		namePath := p.Child("name")
		if port.Name == "" {
			if len(spec.Ports) > 1 {
				allErrs = append(allErrs, field.Required(namePath, ""))
			}
		} else {
			allErrs = append(allErrs, dnsLabel(port.Name, namePath)...)
			if names.Has(port.Name) {
				allErrs = append(allErrs, field.Duplicate(namePath, port.Name))
			}
			names.Insert(port.Name)
		}
		allErrs = append(allErrs, portNum(port.Port, p.Child("port"))...)
		allErrs = append(allErrs, oneOf(port.Protocol, p.Child("protocol"), supportedPortProtocols...)...)
		allErrs = append(allErrs, portNumOrName(port.TargetPort, p.Child("targetPort"))...)
		if port.AppProtocol != nil {
			allErrs = append(allErrs, qualifiedName(*port.AppProtocol, p.Child("appProtocol"))...)
		}
		k := key{port.Port, port.Protocol}
		if ports[k] {
			allErrs = append(allErrs, field.Duplicate(p, corev1.ServicePort{Port: port.Port, Protocol: port.Protocol}))
		}
		ports[k] = true
		if port.NodePort != 0 {
			np := p.Child("nodePort")
			if !nodePortAllowed {
				allErrs = append(allErrs, field.Forbidden(np, "may not be used when `type` is '"+string(spec.Type)+"'"))
			}
			allErrs = append(allErrs, portNum(port.NodePort, np)...)
			nk := key{port.NodePort, port.Protocol}
			if nodePorts[nk] {
				allErrs = append(allErrs, field.Duplicate(np, port.NodePort))
			}
			nodePorts[nk] = true
		}
	}
	return allErrs
}

func validateSessionAffinity(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	allErrs := oneOf(spec.SessionAffinity, specPath.Child("sessionAffinity"), supportedSessionAffinity...)
	cfgPath := specPath.Child("sessionAffinityConfig")
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityClientIP:
		cfg := spec.SessionAffinityConfig
		if cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil {
			allErrs = append(allErrs, field.Required(cfgPath.Child("clientIP", "timeoutSeconds"), ""))
		} else if t := *cfg.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPServiceAffinitySeconds {
			allErrs = append(allErrs, field.Invalid(cfgPath.Child("clientIP", "timeoutSeconds"), t, validation.InclusiveRangeError(1, maxClientIPServiceAffinitySeconds)))
		}
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			allErrs = append(allErrs, field.Invalid(cfgPath, spec.SessionAffinityConfig, "must not be set when session affinity is None"))
		}
	}
	return allErrs
}

func validateClusterIPs(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	ipPath, ipsPath := specPath.Child("clusterIP"), specPath.Child("clusterIPs")
	if spec.ClusterIP != "" && spec.ClusterIP != corev1.ClusterIPNone {
		allErrs = append(allErrs, validIP(spec.ClusterIP, ipPath)...)
	}
	if len(spec.ClusterIPs) > 0 && spec.ClusterIPs[0] != spec.ClusterIP {
		allErrs = append(allErrs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
	}
	if len(spec.ClusterIPs) > 2 {
		allErrs = append(allErrs, field.TooMany(ipsPath, len(spec.ClusterIPs), 2))
	}
	for i, ip := range spec.ClusterIPs {
		p := ipsPath.Index(i)
		if ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				allErrs = append(allErrs, field.Invalid(p, ip, "'None' must be the first and only value"))
			}
			continue
		}
		if i > 0 {
			allErrs = append(allErrs, validIP(ip, p)...)
		}
	}
	if spec.ClusterIP == corev1.ClusterIPNone && (spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer) {
		allErrs = append(allErrs, field.Invalid(ipPath, spec.ClusterIP, "may not be set to 'None' for "+string(spec.Type)+" services"))
	}

	if spec.IPFamilyPolicy != nil {
		allErrs = append(allErrs, oneOf(*spec.IPFamilyPolicy, specPath.Child("ipFamilyPolicy"), supportedIPFamilyPolicies...)...)
		if spec.Type == corev1.ServiceTypeExternalName {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
	}
	famPath := specPath.Child("ipFamilies")
	if spec.Type == corev1.ServiceTypeExternalName && len(spec.IPFamilies) > 0 {
		allErrs = append(allErrs, field.Forbidden(famPath, "may not be set for ExternalName services"))
	}
	if len(spec.IPFamilies) > 2 {
		allErrs = append(allErrs, field.TooMany(famPath, len(spec.IPFamilies), 2))
	}
	seen := map[corev1.IPFamily]bool{}
	for i, f := range spec.IPFamilies {
		p := famPath.Index(i)
		allErrs = append(allErrs, oneOf(f, p, supportedIPFamilies...)...)
		if seen[f] {
			allErrs = append(allErrs, field.Duplicate(p, f))
		}
		seen[f] = true
	}
	if spec.IPFamilyPolicy != nil && *spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack && len(spec.IPFamilies) > 1 {
		allErrs = append(allErrs, field.Invalid(famPath, spec.IPFamilies, "must be one value when `ipFamilyPolicy` is 'SingleStack'"))
	}
	return allErrs
}

func validateTrafficPolicies(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	externallyAccessible := spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer ||
		(spec.Type == corev1.ServiceTypeClusterIP && len(spec.ExternalIPs) > 0)
	etp := specPath.Child("externalTrafficPolicy")
	if spec.ExternalTrafficPolicy != "" {
		if !externallyAccessible {
			allErrs = append(allErrs, field.Invalid(etp, spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		} else {
			allErrs = append(allErrs, oneOf(spec.ExternalTrafficPolicy, etp, supportedTrafficPolicies...)...)
		}
	} else if spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer {
		allErrs = append(allErrs, field.Required(etp, ""))
	}
	if spec.HealthCheckNodePort != 0 {
		p := specPath.Child("healthCheckNodePort")
		if spec.Type != corev1.ServiceTypeLoadBalancer || spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			allErrs = append(allErrs, field.Invalid(p, spec.HealthCheckNodePort, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
		allErrs = append(allErrs, portNum(spec.HealthCheckNodePort, p)...)
	}
	itp := specPath.Child("internalTrafficPolicy")
	if spec.Type == corev1.ServiceTypeExternalName {
		return allErrs
	}
	if spec.InternalTrafficPolicy == nil {
		allErrs = append(allErrs, field.Required(itp, ""))
	} else {
		allErrs = append(allErrs, oneOf(*spec.InternalTrafficPolicy, itp, supportedInternalPolicies...)...)
	}
	return allErrs
}

// ValidateServiceUpdate checks an update of a Service: metadata update rules,
// the new service as a whole, and that an assigned clusterIP does not change
// (switching to or from ExternalName, which has no cluster IP, is allowed;
// the primary of clusterIPs is held to the same rule).
func ValidateServiceUpdate(newSvc, oldSvc *corev1.Service) field.ErrorList {
	allErrs := metaUpdate(&newSvc.ObjectMeta, &oldSvc.ObjectMeta)
	specPath := field.NewPath("spec")
	if newSvc.Spec.Type != corev1.ServiceTypeExternalName && oldSvc.Spec.Type != corev1.ServiceTypeExternalName {
		if oldSvc.Spec.ClusterIP != "" {
			allErrs = append(allErrs, immutable(newSvc.Spec.ClusterIP, oldSvc.Spec.ClusterIP, specPath.Child("clusterIP"))...)
		}
		if len(oldSvc.Spec.ClusterIPs) > 0 && len(newSvc.Spec.ClusterIPs) > 0 && newSvc.Spec.ClusterIPs[0] != oldSvc.Spec.ClusterIPs[0] {
			allErrs = append(allErrs, field.Invalid(specPath.Child("clusterIPs").Index(0), newSvc.Spec.ClusterIPs[0], "may not change once set"))
		}
	}
	return append(allErrs, ValidateService(newSvc)...)
}

// ValidateServiceStatusUpdate checks an update of services/status: metadata
// update rules, load-balancer ingress addresses and conditions.
func ValidateServiceStatusUpdate(newSvc, oldSvc *corev1.Service) field.ErrorList {
	allErrs := metaUpdate(&newSvc.ObjectMeta, &oldSvc.ObjectMeta)
	ingPath := field.NewPath("status", "loadBalancer", "ingress")
	for i, ing := range newSvc.Status.LoadBalancer.Ingress {
		p := ingPath.Index(i)
		if ing.IP != "" {
			allErrs = append(allErrs, validIP(ing.IP, p.Child("ip"))...)
		}
		if ing.Hostname != "" {
			allErrs = append(allErrs, dnsSubdomain(ing.Hostname, p.Child("hostname"))...)
		}
		if ing.IPMode != nil {
			if ing.IP == "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("ipMode"), "may not be specified when `ip` is not set"))
			}
			allErrs = append(allErrs, oneOf(*ing.IPMode, p.Child("ipMode"), corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy)...)
		}
	}
	return append(allErrs, metav1validation.ValidateConditions(newSvc.Status.Conditions, field.NewPath("status", "conditions"))...)
}
