package gateway

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/rayctl/rayctl/pkg/gatewayproxy"
)

func route(ns, name string, parent gwv1.ParentReference, rules ...gwv1.HTTPRouteRule) gwv1.HTTPRoute {
	return gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}}, Rules: rules}}
}

func prefix(p string, backends ...gwv1.HTTPBackendRef) gwv1.HTTPRouteRule {
	return gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptrTo(gwv1.PathMatchPathPrefix), Value: ptrTo(p)}}}, BackendRefs: backends}
}

func backendRef(ns, name string, port int32) gwv1.HTTPBackendRef {
	ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptrTo(port)}}}
	if ns != "" {
		ref.Namespace = ptrTo(gwv1.Namespace(ns))
	}
	return ref
}

// TestAttach: listeners are judged, routes attach only where allowed, references resolve only to
// existing Services (another namespace's only with a ReferenceGrant), and the table orders rules by
// the Gateway API's precedence.
func TestAttach(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gw"}, Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{
		{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80},
		{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443},
	}}}
	svc := func(ns, name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []corev1.ServicePort{{Port: 8000}}}}
	}
	parent := gwv1.ParentReference{Name: "gw"}
	w := world{
		routes: []gwv1.HTTPRoute{
			route("a", "short", parent, prefix("/api", backendRef("", "web", 8000))),
			route("a", "long", parent, prefix("/api/v2", backendRef("", "web", 8000))),
			route("a", "missing", parent, prefix("/m", backendRef("", "nope", 8000))),
			route("a", "foreign", parent, prefix("/f", backendRef("b", "web", 8000))),
			route("b", "other-ns", gwv1.ParentReference{Name: "gw", Namespace: ptrTo(gwv1.Namespace("a"))}, prefix("/", backendRef("", "web", 8000))),
			route("a", "tls", gwv1.ParentReference{Name: "gw", SectionName: ptrTo(gwv1.SectionName("https"))}, prefix("/", backendRef("", "web", 8000))),
			route("a", "no-section", gwv1.ParentReference{Name: "gw", SectionName: ptrTo(gwv1.SectionName("nope"))}, prefix("/", backendRef("", "web", 8000))),
		},
		services: map[types.NamespacedName]*corev1.Service{{Namespace: "a", Name: "web"}: svc("a", "web"), {Namespace: "b", Name: "web"}: svc("b", "web")},
	}
	p := attach(gw, w)
	if l := p.listeners[1]; l.accepted || l.reason != string(gwv1.ListenerReasonUnsupportedProtocol) {
		t.Errorf("the HTTPS listener: accepted %v reason %s", l.accepted, l.reason)
	}
	got := map[string]string{}
	for _, rr := range p.routes {
		pr := rr.parents[0]
		got[rr.route.Name] = pr.acceptedReason + "/" + pr.resolvedReason
	}
	want := map[string]string{
		"short": "Accepted/ResolvedRefs", "long": "Accepted/ResolvedRefs",
		"missing":    "Accepted/BackendNotFound",
		"foreign":    "Accepted/RefNotPermitted",
		"other-ns":   "NotAllowedByListeners/ResolvedRefs",
		"tls":        "NotAllowedByListeners/ResolvedRefs",
		"no-section": "NoMatchingParent/ResolvedRefs",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("route %s: %s, want %s", k, got[k], v)
		}
	}
	if n := p.listeners[0].attached; n != 4 {
		t.Errorf("the HTTP listener has %d attached routes, want 4", n)
	}
	if len(p.table.Ports) != 1 || p.table.Ports[0].Port != 80 {
		t.Fatalf("table ports: %+v", p.table.Ports)
	}
	var order []string
	for _, r := range p.table.Ports[0].Rules {
		order = append(order, r.Route)
	}
	if order[0] != "a/long" || order[1] != "a/short" {
		t.Errorf("rules in order %v: the longer prefix first", order)
	}

	// A ReferenceGrant in b for HTTPRoutes of a lets the foreign backend resolve.
	w.grants = []gwv1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "g"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "a"}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
	}}}
	for _, rr := range attach(gw, w).routes {
		if rr.route.Name == "foreign" && !rr.parents[0].resolved {
			t.Errorf("with a ReferenceGrant the foreign backend does not resolve: %s", rr.parents[0].resolvedReason)
		}
	}
}

// TestFiltersAndTimeouts: supported filters and timeouts reach the table; a rule with a filter rayctl's
// Gateway does not implement is dropped (the route Accepted with PartiallyInvalid, or Accepted False,
// UnsupportedValue, when no rule is left); an ExtensionRef filter makes its rule answer 500 and the
// route's ResolvedRefs False (InvalidKind); a mirror to a missing Service is left out (BackendNotFound).
func TestFiltersAndTimeouts(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gw"}, Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{
		{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80}}}}
	parent := gwv1.ParentReference{Name: "gw"}
	with := func(r gwv1.HTTPRouteRule, fs ...gwv1.HTTPRouteFilter) gwv1.HTTPRouteRule {
		r.Filters = fs
		return r
	}
	headers := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
		Set: []gwv1.HTTPHeader{{Name: "X-A", Value: "1"}}, Remove: []string{"X-B"}}}
	cors := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterCORS, CORS: &gwv1.HTTPCORSFilter{}}
	ext := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwv1.LocalObjectReference{Group: "example.com", Kind: "Thing", Name: "t"}}
	mirror := func(name string) gwv1.HTTPRouteFilter {
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
			BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptrTo(int32(8000))}, Percent: ptrTo(int32(50))}}
	}
	timed := prefix("/timed", backendRef("", "web", 8000))
	timed.Timeouts = &gwv1.HTTPRouteTimeouts{Request: ptrTo(gwv1.Duration("10s")), BackendRequest: ptrTo(gwv1.Duration("2s"))}
	w := world{
		routes: []gwv1.HTTPRoute{
			route("a", "partial", parent, with(prefix("/ok", backendRef("", "web", 8000)), headers, mirror("web")), with(prefix("/cors", backendRef("", "web", 8000)), cors)),
			route("a", "all-bad", parent, with(prefix("/bad", backendRef("", "web", 8000)), cors)),
			route("a", "ext", parent, with(prefix("/ext", backendRef("", "web", 8000)), ext)),
			route("a", "mirror-missing", parent, with(prefix("/mm", backendRef("", "web", 8000)), mirror("nope"))),
			route("a", "timed", parent, timed),
		},
		services: map[types.NamespacedName]*corev1.Service{{Namespace: "a", Name: "web"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []corev1.ServicePort{{Port: 8000}}}}},
	}
	p := attach(gw, w)
	got := map[string]parentResult{}
	for _, rr := range p.routes {
		got[rr.route.Name] = rr.parents[0]
	}
	for name, want := range map[string]string{
		"partial":        "true Accepted true ResolvedRefs partial",
		"all-bad":        "false UnsupportedValue true ResolvedRefs",
		"ext":            "true Accepted false InvalidKind",
		"mirror-missing": "true Accepted false BackendNotFound",
		"timed":          "true Accepted true ResolvedRefs",
	} {
		pr := got[name]
		s := fmt.Sprintf("%v %s %v %s", pr.accepted, pr.acceptedReason, pr.resolved, pr.resolvedReason)
		if pr.partial != "" {
			s += " partial"
		}
		if s != want {
			t.Errorf("route %s: %s (%s; %s); want %s", name, s, pr.acceptMsg, pr.partial, want)
		}
	}
	if m := got["partial"].partial; !strings.HasPrefix(m, "Dropped Rule") || !strings.Contains(m, "rule 1") || !strings.Contains(m, "CORS") {
		t.Errorf("PartiallyInvalid message %q: want it to start with Dropped Rule and name rule 1 and CORS", m)
	}
	rules := map[string]gatewayproxy.Rule{}
	for _, r := range p.table.Ports[0].Rules {
		rules[r.Match.Path] = r
	}
	if _, ok := rules["/cors"]; ok {
		t.Error("the rule with a CORS filter is in the table")
	}
	if _, ok := rules["/bad"]; ok {
		t.Error("the route with no valid rule is in the table")
	}
	ok := rules["/ok"]
	if len(ok.Filters) != 2 || ok.Filters[0].Headers.Set[0].Name != "X-A" || ok.Filters[1].Mirror == nil || ok.Filters[1].Mirror.Fraction != 0.5 || ok.Filters[1].Mirror.Addr != "10.96.0.9:8000" {
		t.Errorf("the /ok rule's filters: %+v", ok.Filters)
	}
	if r := rules["/ext"]; r.Error == "" {
		t.Error("the rule with an ExtensionRef filter does not answer 500")
	}
	if r := rules["/mm"]; len(r.Filters) != 0 {
		t.Errorf("a mirror to a missing Service is in the table: %+v", r.Filters)
	}
	if r := rules["/timed"]; r.Timeouts == nil || r.Timeouts.Request != "10s" || r.Timeouts.BackendRequest != "2s" {
		t.Errorf("the /timed rule's timeouts: %+v", r.Timeouts)
	}
	if n := p.listeners[0].attached; n != 4 {
		t.Errorf("%d routes attached; want 4 (not the one whose every rule is invalid)", n)
	}
}
