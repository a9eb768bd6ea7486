package validation

import (
	"net"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	maxEndpointSliceEndpoints = 1000
	maxEndpointSlicePorts     = 100
	maxEndpointAddresses      = 100
)

var supportedAddressTypes = []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}

// ValidateEndpointSlice checks an EndpointSlice: metadata, address type,
// endpoints (1-100 addresses of the slice's type, hostname, node name) and
// ports (names unique DNS-1123 labels, protocol, number).
func ValidateEndpointSlice(es *discoveryv1.EndpointSlice) field.ErrorList {
	allErrs := namespacedMeta(&es.ObjectMeta, NameIsDNSSubdomain)
	allErrs = append(allErrs, oneOf(es.AddressType, field.NewPath("addressType"), supportedAddressTypes...)...)
	epPath := field.NewPath("endpoints")
	if len(es.Endpoints) > maxEndpointSliceEndpoints {
		allErrs = append(allErrs, field.TooMany(epPath, len(es.Endpoints), maxEndpointSliceEndpoints))
	}
	for i, ep := range es.Endpoints {
		p := epPath.Index(i)
		addrPath := p.Child("addresses")
		switch {
		case len(ep.Addresses) == 0:
			allErrs = append(allErrs, field.Required(addrPath, "must contain at least 1 address"))
		case len(ep.Addresses) > maxEndpointAddresses:
			allErrs = append(allErrs, field.TooMany(addrPath, len(ep.Addresses), maxEndpointAddresses))
		}
		for j, a := range ep.Addresses {
			allErrs = append(allErrs, validateSliceAddress(a, es.AddressType, addrPath.Index(j))...)
		}
		if ep.Hostname != nil {
			allErrs = append(allErrs, dnsLabel(*ep.Hostname, p.Child("hostname"))...)
		}
		if ep.NodeName != nil {
			allErrs = append(allErrs, dnsSubdomain(*ep.NodeName, p.Child("nodeName"))...)
		}
	}
	portsPath := field.NewPath("ports")
	if len(es.Ports) > maxEndpointSlicePorts {
		allErrs = append(allErrs, field.TooMany(portsPath, len(es.Ports), maxEndpointSlicePorts))
	}
	names := sets.New[string]()
	for i, port := range es.Ports {
		p := portsPath.Index(i)
		if port.Name != nil && *port.Name != "" {
			allErrs = append(allErrs, dnsLabel(*port.Name, p.Child("name"))...)
		}
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if names.Has(name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), name))
		}
		names.Insert(name)
		if port.Protocol == nil {
			allErrs = append(allErrs, field.Required(p.Child("protocol"), ""))
		} else {
			allErrs = append(allErrs, oneOf(*port.Protocol, p.Child("protocol"), supportedPortProtocols...)...)
		}
		if port.Port != nil {
			allErrs = append(allErrs, portNum(*port.Port, p.Child("port"))...)
		}
		if port.AppProtocol != nil {
			allErrs = append(allErrs, qualifiedName(*port.AppProtocol, p.Child("appProtocol"))...)
		}
	}
	return allErrs
}

func validateSliceAddress(addr string, t discoveryv1.AddressType, p *field.Path) field.ErrorList {
	switch t {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		if errs := validIP(addr, p); len(errs) > 0 {
			return errs
		}
		is4 := net.ParseIP(addr).To4() != nil
		if t == discoveryv1.AddressTypeIPv4 && !is4 {
			return field.ErrorList{field.Invalid(p, addr, "must be an IPv4 address")}
		}
		if t == discoveryv1.AddressTypeIPv6 && is4 {
			return field.ErrorList{field.Invalid(p, addr, "must be an IPv6 address")}
		}
	case discoveryv1.AddressTypeFQDN:
		return dnsSubdomain(addr, p)
	}
	return nil
}

// ValidateEndpointSliceUpdate checks an update of an EndpointSlice: the
// address type cannot change.
func ValidateEndpointSliceUpdate(newES, oldES *discoveryv1.EndpointSlice) field.ErrorList {
	allErrs := metaUpdate(&newES.ObjectMeta, &oldES.ObjectMeta)
	allErrs = append(allErrs, immutable(newES.AddressType, oldES.AddressType, field.NewPath("addressType"))...)
	return append(allErrs, ValidateEndpointSlice(newES)...)
}
