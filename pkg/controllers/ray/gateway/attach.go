package gateway

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/rayctl/rayctl/pkg/gatewayproxy"
)

// world is what a Gateway's routing depends on besides the Gateway: read once per reconcile.
type world struct {
	routes     []gwv1.HTTPRoute
	services   map[types.NamespacedName]*corev1.Service
	namespaces map[string]*corev1.Namespace
	grants     []gwv1.ReferenceGrant
}

// listenerState is the verdict on one listener.
type listenerState struct {
	l                        gwv1.Listener
	accepted                 bool
	reason, message          string
	conflicted               bool
	resolvedRefs             bool
	resolvedReason, resolved string
	attached                 int32
}

// parentResult is the verdict on one parentRef of one route that names the Gateway.
type parentResult struct {
	ref                       gwv1.ParentReference
	accepted                  bool
	acceptedReason, acceptMsg string
	resolved                  bool
	resolvedReason, resolvMsg string
	// partial, when set, is the PartiallyInvalid condition's message: some rules were dropped.
	partial string
}

// routeResult is what one route gets from the Gateway: its parent results, and its rules for the table.
type routeResult struct {
	route   *gwv1.HTTPRoute
	parents []parentResult
}

// plan is the outcome of attaching routes to a Gateway.
type plan struct {
	gwNS      string
	listeners []*listenerState
	routes    []routeResult
	table     gatewayproxy.Table
}

var httpRouteKind = gwv1.RouteGroupKind{Group: ptrTo(gwv1.Group(gwv1.GroupName)), Kind: "HTTPRoute"}

func ptrTo[T any](v T) *T { return &v }

// checkListeners judges each listener: HTTP only, not on the proxy's status port, HTTPRoute among the
// kinds it allows, no two HTTP listeners with one port and hostname.
func checkListeners(gw *gwv1.Gateway) []*listenerState {
	var out []*listenerState
	seen := map[string]int{}
	for _, l := range gw.Spec.Listeners {
		s := &listenerState{l: l, accepted: true, reason: string(gwv1.ListenerReasonAccepted), resolvedRefs: true, resolvedReason: string(gwv1.ListenerReasonResolvedRefs)}
		switch {
		case l.Protocol != gwv1.HTTPProtocolType:
			s.accepted, s.reason, s.message = false, string(gwv1.ListenerReasonUnsupportedProtocol), fmt.Sprintf("rayctl's Gateway serves HTTP listeners only, not %s", l.Protocol)
		case l.Port == gatewayproxy.StatusPort:
			s.accepted, s.reason, s.message = false, string(gwv1.ListenerReasonPortUnavailable), fmt.Sprintf("port %d is the proxy's status port", gatewayproxy.StatusPort)
		}
		if l.AllowedRoutes != nil && len(l.AllowedRoutes.Kinds) > 0 && !slices.ContainsFunc(l.AllowedRoutes.Kinds, isHTTPRouteKind) {
			s.resolvedRefs, s.resolvedReason, s.resolved = false, string(gwv1.ListenerReasonInvalidRouteKinds), "rayctl's Gateway supports HTTPRoute only"
		}
		key := strconv.Itoa(int(l.Port)) + "/" + hostnameOf(l.Hostname)
		if i, ok := seen[key]; ok && s.accepted {
			s.conflicted = true
			out[i].conflicted = true
		} else {
			seen[key] = len(out)
		}
		out = append(out, s)
	}
	for _, s := range out {
		if s.conflicted {
			s.accepted, s.reason, s.message = false, string(gwv1.ListenerReasonHostnameConflict), "another listener has the same port and hostname"
		}
	}
	return out
}

func isHTTPRouteKind(k gwv1.RouteGroupKind) bool {
	return k.Kind == "HTTPRoute" && (k.Group == nil || *k.Group == gwv1.GroupName)
}

func hostnameOf(h *gwv1.Hostname) string {
	if h == nil {
		return ""
	}
	return string(*h)
}

// refersTo reports whether ref names gw, with the route in routeNS.
func refersTo(ref gwv1.ParentReference, routeNS string, gw *gwv1.Gateway) bool {
	if ref.Group != nil && *ref.Group != gwv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" {
		return false
	}
	ns := routeNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return ns == gw.Namespace && string(ref.Name) == gw.Name
}

// attach decides which routes attach to which listeners, resolves their backends and builds the table.
func attach(gw *gwv1.Gateway, w world) plan {
	p := plan{gwNS: gw.Namespace, listeners: checkListeners(gw)}
	type entry struct {
		rule  gatewayproxy.Rule
		route *gwv1.HTTPRoute
		order int
	}
	byPort := map[int32][]entry{}
	var ports []int32
	for _, ls := range p.listeners {
		if ls.accepted && ls.resolvedRefs && !slices.Contains(ports, ls.l.Port) {
			ports = append(ports, ls.l.Port)
		}
	}
	for i := range w.routes {
		rt := &w.routes[i]
		rr := routeResult{route: rt}
		c := compileRoute(rt, w)
		for _, ref := range rt.Spec.ParentRefs {
			if !refersTo(ref, rt.Namespace, gw) {
				continue
			}
			pr := parentResult{ref: ref, resolved: c.resolved, resolvedReason: c.resolvedReason, resolvMsg: c.resolvMsg}
			listeners, why, whyMsg := p.listenersFor(ref, rt, w)
			switch {
			case len(listeners) == 0:
				pr.acceptedReason, pr.acceptMsg = why, whyMsg
			case !c.valid():
				pr.acceptedReason, pr.acceptMsg = c.droppedReason, "every rule is invalid: "+strings.Join(c.dropped, "; ")
			default:
				if len(c.dropped) > 0 {
					pr.partial = "Dropped Rule(s): " + strings.Join(c.dropped, "; ")
				}
				pr.accepted, pr.acceptedReason = true, string(gwv1.RouteReasonAccepted)
				for _, ls := range listeners {
					ls.attached++
					hosts := effectiveHostnames(ls.l.Hostname, rt.Spec.Hostnames)
					for ri, rule := range rt.Spec.Rules {
						compiled := c.rules[ri]
						if compiled == nil {
							continue
						}
						matches := rule.Matches
						if len(matches) == 0 {
							matches = []gwv1.HTTPRouteMatch{{}}
						}
						for mi, m := range matches {
							r := *compiled
							r.Route, r.Hostnames, r.Match = rt.Namespace+"/"+rt.Name, hosts, toMatch(m)
							byPort[ls.l.Port] = append(byPort[ls.l.Port], entry{rule: r, route: rt, order: ri*1000 + mi})
						}
					}
				}
			}
			rr.parents = append(rr.parents, pr)
		}
		if len(rr.parents) > 0 {
			p.routes = append(p.routes, rr)
		}
	}
	slices.Sort(ports)
	for _, port := range ports {
		entries := byPort[port]
		slices.SortStableFunc(entries, func(a, b entry) int {
			if c := comparePrecedence(a.rule, b.rule); c != 0 {
				return c
			}
			if c := a.route.CreationTimestamp.Compare(b.route.CreationTimestamp.Time); c != 0 {
				return c
			}
			if c := strings.Compare(a.rule.Route, b.rule.Route); c != 0 {
				return c
			}
			return a.order - b.order
		})
		pt := gatewayproxy.Port{Port: port}
		for _, e := range entries {
			pt.Rules = append(pt.Rules, e.rule)
		}
		p.table.Ports = append(p.table.Ports, pt)
	}
	return p
}

// listenersFor returns the listeners ref lets rt attach to, or why none.
func (p plan) listenersFor(ref gwv1.ParentReference, rt *gwv1.HTTPRoute, w world) ([]*listenerState, string, string) {
	var named []*listenerState
	for _, ls := range p.listeners {
		if ref.SectionName != nil && *ref.SectionName != ls.l.Name || ref.Port != nil && *ref.Port != ls.l.Port {
			continue
		}
		named = append(named, ls)
	}
	if len(named) == 0 {
		return nil, string(gwv1.RouteReasonNoMatchingParent), "no listener of the Gateway has that sectionName or port"
	}
	var out []*listenerState
	reason, msg := string(gwv1.RouteReasonNotAllowedByListeners), "no listener allows routes from namespace "+rt.Namespace
	for _, ls := range named {
		if !ls.accepted || !ls.resolvedRefs {
			reason, msg = string(gwv1.RouteReasonNotAllowedByListeners), "listener "+string(ls.l.Name)+" is not valid"
			continue
		}
		if !allowsNamespace(ls.l.AllowedRoutes, rt.Namespace, p.gwNS, w) {
			continue
		}
		if ls.l.Hostname != nil && len(rt.Spec.Hostnames) > 0 && len(effectiveHostnames(ls.l.Hostname, rt.Spec.Hostnames)) == 0 {
			reason, msg = string(gwv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches listener "+string(ls.l.Name)+"'s"
			continue
		}
		out = append(out, ls)
	}
	return out, reason, msg
}

// allowsNamespace applies a listener's allowedRoutes.namespaces (Same by default).
func allowsNamespace(ar *gwv1.AllowedRoutes, routeNS, gwNS string, w world) bool {
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSelector:
		s, err := metav1.LabelSelectorAsSelector(sel)
		ns := w.namespaces[routeNS]
		return err == nil && sel != nil && ns != nil && s.Matches(labels.Set(ns.Labels))
	case gwv1.NamespacesFromNone:
		return false
	default:
		return routeNS == gwNS
	}
}

// effectiveHostnames intersects a listener's hostname with a route's: nil means any host.
func effectiveHostnames(listener *gwv1.Hostname, route []gwv1.Hostname) []string {
	if listener == nil {
		var out []string
		for _, h := range route {
			out = append(out, string(h))
		}
		return out
	}
	l := string(*listener)
	if len(route) == 0 {
		return []string{l}
	}
	var out []string
	for _, h := range route {
		r := string(h)
		switch {
		case r == l, wildcardCovers(l, r):
			out = append(out, r)
		case wildcardCovers(r, l):
			out = append(out, l)
		}
	}
	return out
}

// wildcardCovers reports whether pattern ("*.example.com") covers host (a name or a narrower wildcard).
func wildcardCovers(pattern, host string) bool {
	suffix, ok := strings.CutPrefix(pattern, "*")
	return ok && strings.HasSuffix(host, suffix) && len(strings.TrimPrefix(host, "*")) > len(suffix)
}

// toMatch turns an HTTPRouteMatch into the table's Match (the defaults the API's schema gives made explicit).
func toMatch(m gwv1.HTTPRouteMatch) gatewayproxy.Match {
	out := gatewayproxy.Match{PathType: gatewayproxy.PathPrefix, Path: "/"}
	if m.Path != nil {
		if m.Path.Type != nil {
			out.PathType = string(*m.Path.Type)
		}
		if m.Path.Value != nil {
			out.Path = *m.Path.Value
		}
	}
	if m.Method != nil {
		out.Method = string(*m.Method)
	}
	for _, h := range m.Headers {
		t := gatewayproxy.HeaderExact
		if h.Type != nil {
			t = string(*h.Type)
		}
		out.Headers = append(out.Headers, gatewayproxy.HeaderMatch{Type: t, Name: string(h.Name), Value: h.Value})
	}
	for _, q := range m.QueryParams {
		t := gatewayproxy.HeaderExact
		if q.Type != nil {
			t = string(*q.Type)
		}
		out.QueryParams = append(out.QueryParams, gatewayproxy.HeaderMatch{Type: t, Name: string(q.Name), Value: q.Value})
	}
	return out
}

// comparePrecedence orders two rules as the Gateway API's precedence does: the most specific hostname,
// an Exact path, then the longest prefix (regular expressions after prefixes), a method, more headers,
// more query parameters. Ties go to the older route, then the name, then rule order (the caller's).
func comparePrecedence(a, b gatewayproxy.Rule) int {
	if c := hostRank(b.Hostnames) - hostRank(a.Hostnames); c != 0 {
		return c
	}
	if c := pathRank(b.Match) - pathRank(a.Match); c != 0 {
		return c
	}
	if (a.Match.Method != "") != (b.Match.Method != "") {
		if a.Match.Method != "" {
			return -1
		}
		return 1
	}
	if c := len(b.Match.Headers) - len(a.Match.Headers); c != 0 {
		return c
	}
	return len(b.Match.QueryParams) - len(a.Match.QueryParams)
}

// hostRank: exact hostnames above wildcards (longer first), above any host.
func hostRank(hosts []string) int {
	best := 0
	for _, h := range hosts {
		r := 1 + len(h)
		if !strings.HasPrefix(h, "*") {
			r += 1 << 16
		}
		best = max(best, r)
	}
	return best
}

// pathRank: Exact above every prefix, longer prefixes above shorter, regular expressions last.
func pathRank(m gatewayproxy.Match) int {
	switch m.PathType {
	case gatewayproxy.PathExact:
		return 1 << 20
	case gatewayproxy.MatchRegularExpression:
		return 0
	default:
		return 1 + len(strings.TrimSuffix(m.Path, "/"))
	}
}

func hasPort(svc *corev1.Service, port int32) bool {
	return slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
}

// granted reports whether a ReferenceGrant in toNS lets HTTPRoutes of fromNS refer to Service name.
func granted(grants []gwv1.ReferenceGrant, fromNS, toNS, name string) bool {
	for _, g := range grants {
		if g.Namespace != toNS {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gwv1.ReferenceGrantFrom) bool {
			return f.Group == gwv1.GroupName && f.Kind == "HTTPRoute" && string(f.Namespace) == fromNS
		})
		to := slices.ContainsFunc(g.Spec.To, func(t gwv1.ReferenceGrantTo) bool {
			return t.Group == "" && t.Kind == "Service" && (t.Name == nil || string(*t.Name) == name)
		})
		if from && to {
			return true
		}
	}
	return false
}

// condition builds a condition for a generation.
func condition(t string, ok bool, reason, msg string, gen int64) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
}

// setConditions sets each of conds on list, keeping transition times of those that did not change.
func setConditions(list *[]metav1.Condition, conds ...metav1.Condition) {
	for _, c := range conds {
		meta.SetStatusCondition(list, c)
	}
}
