package gateway

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/rayctl/rayctl/pkg/gatewayproxy"
)

// compiledRoute is an HTTPRoute's rules made ready for the table (everything but their matches and
// hostnames), with what the route's status says of them.
type compiledRoute struct {
	// rules are the route's rules in order; nil for a rule dropped as invalid.
	rules []*gatewayproxy.Rule
	// resolved is false, with a reason and message, when a reference (a backend, a mirror, an
	// extension filter) did not resolve.
	resolved                  bool
	resolvedReason, resolvMsg string
	// dropped says which rules were dropped and why (an unsupported filter or value).
	dropped       []string
	droppedReason string
}

// valid reports whether some rule of the route is left to serve (a route of no rules has none to drop).
func (c compiledRoute) valid() bool { return len(c.dropped) == 0 || len(c.dropped) < len(c.rules) }

// compileRoute resolves rt's backends, filters and timeouts. A rule with a filter rayctl's Gateway does
// not implement (CORS, ExternalAuth, a type it does not know) or an unsupported value is dropped, as
// the Gateway API's PartiallyInvalid condition describes; an ExtensionRef filter, which names nothing
// this Gateway knows, makes its rule answer 500 (such a filter must not be skipped); a mirror whose
// backend does not resolve is left out.
func compileRoute(rt *gwv1.HTTPRoute, w world) compiledRoute {
	c := compiledRoute{resolved: true, resolvedReason: string(gwv1.RouteReasonResolvedRefs), droppedReason: string(gwv1.RouteReasonUnsupportedValue)}
	unresolved := func(reason, msg string) {
		if c.resolved {
			c.resolved, c.resolvedReason, c.resolvMsg = false, reason, msg
		}
	}
	for ri, rule := range rt.Spec.Rules {
		out := &gatewayproxy.Rule{}
		var problems []string
		filters := func(fs []gwv1.HTTPRouteFilter) []gatewayproxy.Filter {
			var res []gatewayproxy.Filter
			for _, f := range fs {
				pf, err := toFilter(f, rt, w, unresolved)
				switch {
				case err != nil:
					problems = append(problems, err.Error())
				case f.Type == gwv1.HTTPRouteFilterExtensionRef:
					out.Error = fmt.Sprintf("filter extensionRef %s/%s %s is not one rayctl's Gateway knows", f.ExtensionRef.Group, f.ExtensionRef.Kind, f.ExtensionRef.Name)
				case pf != nil:
					res = append(res, *pf)
				}
			}
			return res
		}
		out.Filters = filters(rule.Filters)
		for _, ref := range rule.BackendRefs {
			b := gatewayproxy.Backend{Name: backendName(rt, ref.BackendObjectReference), Weight: 1}
			if ref.Weight != nil {
				b.Weight = *ref.Weight
			}
			b.Addr = resolveRef(rt, ref.BackendObjectReference, w, unresolved)
			b.Filters = filters(ref.Filters)
			out.Backends = append(out.Backends, b)
		}
		if t := rule.Timeouts; t != nil {
			out.Timeouts = &gatewayproxy.Timeouts{}
			for _, d := range []struct {
				field string
				in    *gwv1.Duration
				out   *string
			}{{"request", t.Request, &out.Timeouts.Request}, {"backendRequest", t.BackendRequest, &out.Timeouts.BackendRequest}} {
				if d.in == nil {
					continue
				}
				if _, err := time.ParseDuration(string(*d.in)); err != nil {
					problems = append(problems, fmt.Sprintf("timeouts.%s %q is not a duration", d.field, *d.in))
				}
				*d.out = string(*d.in)
			}
		}
		if len(problems) > 0 {
			c.dropped = append(c.dropped, fmt.Sprintf("rule %d%s: %s", ri, ruleName(rule), strings.Join(problems, "; ")))
			out = nil
		}
		c.rules = append(c.rules, out)
	}
	return c
}

func ruleName(rule gwv1.HTTPRouteRule) string {
	if rule.Name == nil {
		return ""
	}
	return " (" + string(*rule.Name) + ")"
}

// toFilter turns a filter into the table's; nil for one left out (a mirror that does not resolve, an
// ExtensionRef, which the caller handles); an error for one rayctl's Gateway does not implement.
func toFilter(f gwv1.HTTPRouteFilter, rt *gwv1.HTTPRoute, w world, unresolved func(reason, msg string)) (*gatewayproxy.Filter, error) {
	out := &gatewayproxy.Filter{Type: string(f.Type)}
	switch {
	case f.Type == gwv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
		out.Headers = toHeaderModifier(f.RequestHeaderModifier)
	case f.Type == gwv1.HTTPRouteFilterResponseHeaderModifier && f.ResponseHeaderModifier != nil:
		out.Headers = toHeaderModifier(f.ResponseHeaderModifier)
	case f.Type == gwv1.HTTPRouteFilterRequestRedirect && f.RequestRedirect != nil:
		r := f.RequestRedirect
		path, err := toPathModifier(r.Path)
		if err != nil {
			return nil, err
		}
		out.Redirect = &gatewayproxy.Redirect{Path: path}
		if r.Scheme != nil {
			out.Redirect.Scheme = *r.Scheme
		}
		if r.Hostname != nil {
			out.Redirect.Hostname = string(*r.Hostname)
		}
		if r.Port != nil {
			out.Redirect.Port = *r.Port
		}
		if r.StatusCode != nil {
			out.Redirect.StatusCode = *r.StatusCode
		}
		if s := out.Redirect.Scheme; s != "" && s != "http" && s != "https" {
			return nil, fmt.Errorf("requestRedirect.scheme %q is not supported", s)
		}
		if c := out.Redirect.StatusCode; c != 0 && (c < 301 || c > 308 || c == 304 || c == 305 || c == 306) {
			return nil, fmt.Errorf("requestRedirect.statusCode %d is not supported", c)
		}
	case f.Type == gwv1.HTTPRouteFilterURLRewrite && f.URLRewrite != nil:
		path, err := toPathModifier(f.URLRewrite.Path)
		if err != nil {
			return nil, err
		}
		out.Rewrite = &gatewayproxy.Rewrite{Path: path}
		if f.URLRewrite.Hostname != nil {
			out.Rewrite.Hostname = string(*f.URLRewrite.Hostname)
		}
	case f.Type == gwv1.HTTPRouteFilterRequestMirror && f.RequestMirror != nil:
		m := f.RequestMirror
		addr := resolveRef(rt, m.BackendRef, w, unresolved)
		if addr == "" {
			return nil, nil
		}
		out.Mirror = &gatewayproxy.Mirror{Name: backendName(rt, m.BackendRef), Addr: addr, Fraction: 1}
		switch {
		case m.Percent != nil:
			out.Mirror.Fraction = float64(*m.Percent) / 100
		case m.Fraction != nil:
			den := int32(100)
			if m.Fraction.Denominator != nil {
				den = *m.Fraction.Denominator
			}
			if den <= 0 {
				return nil, fmt.Errorf("requestMirror.fraction.denominator %d is not supported", den)
			}
			out.Mirror.Fraction = float64(m.Fraction.Numerator) / float64(den)
		}
	case f.Type == gwv1.HTTPRouteFilterExtensionRef && f.ExtensionRef != nil:
		unresolved(string(gwv1.RouteReasonInvalidKind), fmt.Sprintf("filter extensionRef %s/%s %s: rayctl's Gateway has no extension filters", f.ExtensionRef.Group, f.ExtensionRef.Kind, f.ExtensionRef.Name))
		return nil, nil
	default:
		return nil, fmt.Errorf("filter type %s is not supported by rayctl's Gateway", f.Type)
	}
	return out, nil
}

func toHeaderModifier(f *gwv1.HTTPHeaderFilter) *gatewayproxy.HeaderModifier {
	out := &gatewayproxy.HeaderModifier{Remove: f.Remove}
	for _, h := range f.Set {
		out.Set = append(out.Set, gatewayproxy.Header{Name: string(h.Name), Value: h.Value})
	}
	for _, h := range f.Add {
		out.Add = append(out.Add, gatewayproxy.Header{Name: string(h.Name), Value: h.Value})
	}
	return out
}

func toPathModifier(p *gwv1.HTTPPathModifier) (*gatewayproxy.PathModifier, error) {
	switch {
	case p == nil:
		return nil, nil
	case p.Type == gwv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
		return &gatewayproxy.PathModifier{Type: gatewayproxy.ReplaceFullPath, Value: *p.ReplaceFullPath}, nil
	case p.Type == gwv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
		return &gatewayproxy.PathModifier{Type: gatewayproxy.ReplacePrefixMatch, Value: *p.ReplacePrefixMatch}, nil
	}
	return nil, fmt.Errorf("path modifier type %s is not supported", p.Type)
}

// backendName is how the table names a backend: namespace/service:port.
func backendName(rt *gwv1.HTTPRoute, ref gwv1.BackendObjectReference) string {
	port := int32(0)
	if ref.Port != nil {
		port = *ref.Port
	}
	return fmt.Sprintf("%s/%s:%d", refNamespace(rt, ref), ref.Name, port)
}

func refNamespace(rt *gwv1.HTTPRoute, ref gwv1.BackendObjectReference) string {
	if ref.Namespace != nil {
		return string(*ref.Namespace)
	}
	return rt.Namespace
}

// serviceRefs are the Services rt's rules refer to: backends, backends' and rules' mirrors.
func serviceRefs(rt *gwv1.HTTPRoute) []types.NamespacedName {
	var out []types.NamespacedName
	add := func(ref gwv1.BackendObjectReference) {
		out = append(out, types.NamespacedName{Namespace: refNamespace(rt, ref), Name: string(ref.Name)})
	}
	mirrors := func(fs []gwv1.HTTPRouteFilter) {
		for _, f := range fs {
			if f.RequestMirror != nil {
				add(f.RequestMirror.BackendRef)
			}
		}
	}
	for _, rule := range rt.Spec.Rules {
		mirrors(rule.Filters)
		for _, ref := range rule.BackendRefs {
			add(ref.BackendObjectReference)
			mirrors(ref.Filters)
		}
	}
	return out
}

// resolveRef is the address (host:port) of the Service ref names, or "" after telling unresolved why
// it does not resolve.
func resolveRef(rt *gwv1.HTTPRoute, ref gwv1.BackendObjectReference, w world, unresolved func(reason, msg string)) string {
	ns := refNamespace(rt, ref)
	port := int32(0)
	if ref.Port != nil {
		port = *ref.Port
	}
	switch {
	case ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Service":
		unresolved(string(gwv1.RouteReasonInvalidKind), fmt.Sprintf("backend %s: only Services are supported", ref.Name))
	case ns != rt.Namespace && !granted(w.grants, rt.Namespace, ns, string(ref.Name)):
		unresolved(string(gwv1.RouteReasonRefNotPermitted), fmt.Sprintf("backend %s/%s: no ReferenceGrant in %s allows HTTPRoutes from %s", ns, ref.Name, ns, rt.Namespace))
	default:
		svc := w.services[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}]
		switch {
		case svc == nil:
			unresolved(string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s/%s not found", ns, ref.Name))
		case !hasPort(svc, port):
			unresolved(string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s/%s has no port %d", ns, ref.Name, port))
		case svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone:
			return net.JoinHostPort(fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, svc.Namespace), strconv.Itoa(int(port)))
		default:
			return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port)))
		}
	}
	return ""
}
