package gateway

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
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
