package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

var (
	pathTypes    = []networkingv1.PathType{networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific}
	policyTypes  = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	l4Protocols  = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	noSelectorOf = metav1validation.LabelSelectorValidationOptions{}
)

// ValidateIngress checks an Ingress: metadata, a default backend or at least one rule, hosts (a wildcard
// only as the first label), paths (absolute for Exact and Prefix, a known pathType) and backends (a service
// with a name and one of port name or number, or a resource), TLS hosts and the class name.
func ValidateIngress(ing *networkingv1.Ingress) field.ErrorList {
	allErrs := namespacedMeta(&ing.ObjectMeta, NameIsDNSSubdomain)
	spec, p := &ing.Spec, field.NewPath("spec")
	if spec.DefaultBackend == nil && len(spec.Rules) == 0 {
		allErrs = append(allErrs, field.Invalid(p, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		allErrs = append(allErrs, validateIngressBackend(spec.DefaultBackend, p.Child("defaultBackend"))...)
	}
	if spec.IngressClassName != nil {
		allErrs = append(allErrs, dnsSubdomain(*spec.IngressClassName, p.Child("ingressClassName"))...)
	}
	for i, rule := range spec.Rules {
		rp := p.Child("rules").Index(i)
		if rule.Host != "" {
			allErrs = append(allErrs, ingressHost(rule.Host, rp.Child("host"))...)
		}
		if rule.HTTP == nil {
			continue
		}
		hp := rp.Child("http", "paths")
		if len(rule.HTTP.Paths) == 0 {
			allErrs = append(allErrs, field.Required(hp, ""))
		}
		for j, path := range rule.HTTP.Paths {
			pp := hp.Index(j)
			if path.PathType == nil {
				allErrs = append(allErrs, field.Required(pp.Child("pathType"), "pathType must be specified"))
			} else {
				allErrs = append(allErrs, oneOf(*path.PathType, pp.Child("pathType"), pathTypes...)...)
				if *path.PathType != networkingv1.PathTypeImplementationSpecific && !strings.HasPrefix(path.Path, "/") {
					allErrs = append(allErrs, field.Invalid(pp.Child("path"), path.Path, "must be an absolute path"))
				}
			}
			allErrs = append(allErrs, validateIngressBackend(&path.Backend, pp.Child("backend"))...)
		}
	}
	for i, tls := range spec.TLS {
		for j, host := range tls.Hosts {
			allErrs = append(allErrs, ingressHost(host, p.Child("tls").Index(i).Child("hosts").Index(j))...)
		}
		if tls.SecretName != "" {
			allErrs = append(allErrs, dnsSubdomain(tls.SecretName, p.Child("tls").Index(i).Child("secretName"))...)
		}
	}
	return allErrs
}

// ValidateIngressUpdate checks an update of an Ingress as a new one.
func ValidateIngressUpdate(newIng, oldIng *networkingv1.Ingress) field.ErrorList {
	return append(metaUpdate(&newIng.ObjectMeta, &oldIng.ObjectMeta), ValidateIngress(newIng)...)
}

// ValidateIngressStatusUpdate checks an update of ingresses/status: load-balancer addresses are IPs or
// DNS names.
func ValidateIngressStatusUpdate(newIng, oldIng *networkingv1.Ingress) field.ErrorList {
	allErrs := metaUpdate(&newIng.ObjectMeta, &oldIng.ObjectMeta)
	p := field.NewPath("status", "loadBalancer", "ingress")
	for i, lb := range newIng.Status.LoadBalancer.Ingress {
		if lb.IP != "" {
			allErrs = append(allErrs, validIP(lb.IP, p.Index(i).Child("ip"))...)
		}
		if lb.Hostname != "" {
			allErrs = append(allErrs, dnsSubdomain(lb.Hostname, p.Index(i).Child("hostname"))...)
		}
	}
	return allErrs
}

func validateIngressBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	switch {
	case b.Service != nil && b.Resource != nil:
		return field.ErrorList{field.Invalid(p, "resource", "cannot set both resource and service backends")}
	case b.Resource != nil:
		var errs field.ErrorList
		if b.Resource.Kind == "" {
			errs = append(errs, field.Required(p.Child("resource", "kind"), ""))
		}
		if b.Resource.Name == "" {
			errs = append(errs, field.Required(p.Child("resource", "name"), ""))
		}
		return errs
	case b.Service == nil:
		return field.ErrorList{field.Invalid(p, "", "resource or service backend is required")}
	}
	sp := p.Child("service")
	errs := dnsLabel(b.Service.Name, sp.Child("name"))
	port := b.Service.Port
	switch {
	case port.Name != "" && port.Number != 0:
		errs = append(errs, field.Invalid(sp.Child("port"), port, "cannot set both port name & port number"))
	case port.Name != "":
		errs = append(errs, portName(port.Name, sp.Child("port", "name"))...)
	case port.Number != 0:
		errs = append(errs, portNum(port.Number, sp.Child("port", "number"))...)
	default:
		errs = append(errs, field.Required(sp.Child("port"), "port name or number is required"))
	}
	return errs
}

// ingressHost checks a host: not an IP, a DNS subdomain whose first label may be "*".
func ingressHost(host string, p *field.Path) field.ErrorList {
	if validation.IsValidIP(p, host) == nil {
		return field.ErrorList{field.Invalid(p, host, "must be a DNS name, not an IP address")}
	}
	if strings.HasPrefix(host, "*.") {
		return dnsSubdomain(host[2:], p)
	}
	return dnsSubdomain(host, p)
}

// ValidateIngressClass checks an IngressClass: metadata, a controller of the form domain/path, and
// parameters with a kind, a name and a scope that matches the namespace.
func ValidateIngressClass(ic *networkingv1.IngressClass) field.ErrorList {
	allErrs := clusterMeta(&ic.ObjectMeta, NameIsDNSSubdomain)
	p := field.NewPath("spec")
	switch c := ic.Spec.Controller; {
	case c == "":
		allErrs = append(allErrs, field.Required(p.Child("controller"), ""))
	case len(c) > 250:
		allErrs = append(allErrs, field.TooLong(p.Child("controller"), "", 250))
	default:
		domain, _, ok := strings.Cut(c, "/")
		if !ok {
			allErrs = append(allErrs, field.Invalid(p.Child("controller"), c, "must be a domain-prefixed path (such as \"acme.io/foo\")"))
		} else {
			allErrs = append(allErrs, dnsSubdomain(domain, p.Child("controller"))...)
		}
	}
	if params := ic.Spec.Parameters; params != nil {
		pp := p.Child("parameters")
		if params.Kind == "" {
			allErrs = append(allErrs, field.Required(pp.Child("kind"), ""))
		}
		if params.Name == "" {
			allErrs = append(allErrs, field.Required(pp.Child("name"), ""))
		}
		if params.Scope != nil {
			allErrs = append(allErrs, oneOf(*params.Scope, pp.Child("scope"), networkingv1.IngressClassParametersReferenceScopeNamespace, networkingv1.IngressClassParametersReferenceScopeCluster)...)
			if *params.Scope == networkingv1.IngressClassParametersReferenceScopeNamespace && params.Namespace == nil {
				allErrs = append(allErrs, field.Required(pp.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
			}
		}
		if (params.Scope == nil || *params.Scope == networkingv1.IngressClassParametersReferenceScopeCluster) && params.Namespace != nil {
			allErrs = append(allErrs, field.Forbidden(pp.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	}
	return allErrs
}

// ValidateIngressClassUpdate checks an update of an IngressClass: the controller is immutable.
func ValidateIngressClassUpdate(newIC, oldIC *networkingv1.IngressClass) field.ErrorList {
	allErrs := append(metaUpdate(&newIC.ObjectMeta, &oldIC.ObjectMeta), ValidateIngressClass(newIC)...)
	return append(allErrs, immutable(newIC.Spec.Controller, oldIC.Spec.Controller, field.NewPath("spec", "controller"))...)
}

// ValidateNetworkPolicy checks a NetworkPolicy: metadata, the pod selector, policy types, ports (a known
// protocol, a port number or name, endPort only after a numbered port and not below it) and peers (an
// ipBlock alone, with a valid CIDR and exceptions inside it, or label selectors).
func ValidateNetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	allErrs := namespacedMeta(&np.ObjectMeta, NameIsDNSSubdomain)
	spec, p := &np.Spec, field.NewPath("spec")
	allErrs = append(allErrs, metav1validation.ValidateLabelSelector(&spec.PodSelector, noSelectorOf, p.Child("podSelector"))...)
	for i, rule := range spec.Ingress {
		rp := p.Child("ingress").Index(i)
		allErrs = append(allErrs, validatePolicyPorts(rule.Ports, rp.Child("ports"))...)
		allErrs = append(allErrs, validatePolicyPeers(rule.From, rp.Child("from"))...)
	}
	for i, rule := range spec.Egress {
		rp := p.Child("egress").Index(i)
		allErrs = append(allErrs, validatePolicyPorts(rule.Ports, rp.Child("ports"))...)
		allErrs = append(allErrs, validatePolicyPeers(rule.To, rp.Child("to"))...)
	}
	if len(spec.PolicyTypes) > len(policyTypes) {
		allErrs = append(allErrs, field.Invalid(p.Child("policyTypes"), spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		allErrs = append(allErrs, oneOf(t, p.Child("policyTypes").Index(i), policyTypes...)...)
	}
	return allErrs
}

// ValidateNetworkPolicyUpdate checks an update of a NetworkPolicy as a new one.
func ValidateNetworkPolicyUpdate(newNP, oldNP *networkingv1.NetworkPolicy) field.ErrorList {
	return append(metaUpdate(&newNP.ObjectMeta, &oldNP.ObjectMeta), ValidateNetworkPolicy(newNP)...)
}

func validatePolicyPorts(ports []networkingv1.NetworkPolicyPort, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, port := range ports {
		pp := p.Index(i)
		if port.Protocol != nil {
			allErrs = append(allErrs, oneOf(*port.Protocol, pp.Child("protocol"), l4Protocols...)...)
		}
		if port.Port != nil {
			allErrs = append(allErrs, portNumOrName(*port.Port, pp.Child("port"))...)
		}
		if port.EndPort == nil {
			continue
		}
		switch {
		case port.Port == nil:
			allErrs = append(allErrs, field.Required(pp.Child("port"), "must be specified when endPort is specified"))
		case port.Port.IntValue() == 0:
			allErrs = append(allErrs, field.Invalid(pp.Child("endPort"), *port.EndPort, "may not be specified when port is non-numeric"))
		case *port.EndPort < int32(port.Port.IntValue()):
			allErrs = append(allErrs, field.Invalid(pp.Child("endPort"), *port.EndPort, "must be greater than or equal to `port`"))
		}
		allErrs = append(allErrs, portNum(*port.EndPort, pp.Child("endPort"))...)
	}
	return allErrs
}

func validatePolicyPeers(peers []networkingv1.NetworkPolicyPeer, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, peer := range peers {
		pp := p.Index(i)
		if peer.PodSelector == nil && peer.NamespaceSelector == nil && peer.IPBlock == nil {
			allErrs = append(allErrs, field.Required(pp, "must specify a peer"))
			continue
		}
		if peer.IPBlock != nil && (peer.PodSelector != nil || peer.NamespaceSelector != nil) {
			allErrs = append(allErrs, field.Forbidden(pp, "may not specify more than 1 peer type"))
		}
		if peer.PodSelector != nil {
			allErrs = append(allErrs, metav1validation.ValidateLabelSelector(peer.PodSelector, noSelectorOf, pp.Child("podSelector"))...)
		}
		if peer.NamespaceSelector != nil {
			allErrs = append(allErrs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, noSelectorOf, pp.Child("namespaceSelector"))...)
		}
		if b := peer.IPBlock; b != nil {
			allErrs = append(allErrs, validateIPBlock(b, pp.Child("ipBlock"))...)
		}
	}
	return allErrs
}

func validateIPBlock(b *networkingv1.IPBlock, p *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(p.Child("cidr"), "")}
	}
	allErrs := validCIDR(b.CIDR, p.Child("cidr"))
	if len(allErrs) > 0 {
		return allErrs
	}
	_, outer, _ := netutils.ParseCIDRSloppy(b.CIDR)
	for i, except := range b.Except {
		ep := p.Child("except").Index(i)
		if errs := validCIDR(except, ep); len(errs) > 0 {
			allErrs = append(allErrs, errs...)
			continue
		}
		_, inner, _ := netutils.ParseCIDRSloppy(except)
		outerBits, _ := outer.Mask.Size()
		innerBits, _ := inner.Mask.Size()
		if !outer.Contains(inner.IP) || innerBits <= outerBits {
			allErrs = append(allErrs, field.Invalid(ep, except, "must be a strict subset of `cidr`"))
		}
	}
	return allErrs
}
