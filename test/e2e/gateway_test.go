package e2e

// rayctl's own Gateway (pkg/controllers/gateway, `rayctl up --gateway-api`): a GatewayClass naming
// rayctl.dev/gateway-controller is accepted, a Gateway of it is programmed (its proxy pod running
// `rayctl gateway-proxy`), HTTPRoutes attach with the status a conformant implementation writes, and
// requests through `kubectl port-forward` to the Gateway's Service follow the routes' matches and weights.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// gatewayRoutes is a GatewayClass of rayctl's controller, a Gateway with one HTTP listener, and two
// HTTPRoutes: one that sends requests with X-Canary: yes to web-b, and one that splits the rest 3:1
// between web-a and web-b; plus a route to a Service that does not exist.
const gatewayRoutes = `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: CLASS
spec:
  controllerName: rayctl.dev/gateway-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: web
spec:
  gatewayClassName: CLASS
  listeners:
  - name: http
    protocol: HTTP
    port: 80
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: split
spec:
  parentRefs:
  - name: web
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /
    backendRefs:
    - name: web-a
      port: 8000
      weight: 3
    - name: web-b
      port: 8000
      weight: 1
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: canary
spec:
  parentRefs:
  - name: web
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /
      headers:
      - name: X-Canary
        value: "yes"
    backendRefs:
    - name: web-b
      port: 8000
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: missing
spec:
  parentRefs:
  - name: web
  rules:
  - matches:
    - path:
        type: Exact
        value: /missing
    backendRefs:
    - name: no-such-service
      port: 8000
`

// gatewayInstance starts an instance serving the Gateway API, with a pod network of its own.
func gatewayInstance(t *testing.T) *framework.Instance {
	if os.Geteuid() != 0 {
		t.Skip("the Gateway's proxy and its backends need a pod network of rayctl's own: run as root")
	}
	return framework.StartTest(t, "--gateway-api")
}

// webBackend runs busybox httpd answering name on port 8000, behind a Service of that name.
func webBackend(t *testing.T, ctx context.Context, in *framework.Instance, ns, name string) {
	t.Helper()
	script := fmt.Sprintf("mkdir -p /tmp/www && echo %s > /tmp/www/index.html && exec httpd -f -p 8000 -h /tmp/www", name)
	pod := nodePod(name, corev1.RestartPolicyAlways, 1, nodeSh("web", script))
	pod.Labels = map[string]string{"app": name}
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}}, PeriodSeconds: 1}
	nodeCreatePod(t, ctx, in, ns, pod)
	_, err := in.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Selector: pod.Labels, Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromInt32(8000)}}},
	}, metav1.CreateOptions{})
	must(t, "creating Service "+name, err)
	waitPod(t, ctx, in, ns, name, "ready", runningReady)
}

// jsonpath runs kubectl get with a jsonpath output.
func jsonpath(t *testing.T, ctx context.Context, in *framework.Instance, ns, what, path string) string {
	t.Helper()
	out, stderr, err := in.Kubectl(ctx, "", "get", "-n", ns, what, "-o", "jsonpath="+path)
	must(t, "kubectl get "+what+": "+stderr, err)
	return out
}

// TestGatewayRoutes: `kubectl get gateway` shows PROGRAMMED True with the Service's address; the
// GatewayClass is Accepted; each HTTPRoute's parent entry says Accepted and ResolvedRefs (False,
// BackendNotFound, for the route to a missing Service); through the port-forward, the header match wins
// over the split, the split is exactly 3:1 over 40 requests, the missing backend answers 500 and an
// unrouted path 404.
func TestGatewayRoutes(t *testing.T) {
	in := gatewayInstance(t)
	ctx := testContext(t)
	ns := newNamespace(t, ctx, in)
	class := "rayctl-" + ns
	t.Cleanup(func() { _, _, _ = in.Kubectl(context.Background(), "", "delete", "gatewayclass", class, "--ignore-not-found") })
	webBackend(t, ctx, in, ns, "web-a")
	webBackend(t, ctx, in, ns, "web-b")
	out, stderr, err := in.Kubectl(ctx, strings.ReplaceAll(gatewayRoutes, "CLASS", class), "apply", "-n", ns, "-f", "-")
	must(t, "applying the Gateway and its routes: "+out+stderr, err)

	eventually(t, ctx, nodeTimeout, "the GatewayClass Accepted", func(ctx context.Context) (bool, error) {
		return jsonpath(t, ctx, in, "", "gatewayclass/"+class, `{.status.conditions[?(@.type=="Accepted")].status}`) == "True", nil
	})
	eventually(t, ctx, nodeTimeout, "kubectl get gateway showing PROGRAMMED True", func(ctx context.Context) (bool, error) {
		out, _, err := in.Kubectl(ctx, "", "get", "-n", ns, "gateway", "web")
		return err == nil && len(strings.Fields(out)) >= 9 && strings.Fields(out)[8] == "True", err
	})
	out, _, err = in.Kubectl(ctx, "", "get", "-n", ns, "gateway", "web")
	must(t, "kubectl get gateway", err)
	t.Logf("kubectl get gateway:\n%s", out)
	svc, err := in.Client.CoreV1().Services(ns).Get(ctx, "web-"+class, metav1.GetOptions{})
	must(t, "reading the Gateway's Service", err)
	if got := jsonpath(t, ctx, in, ns, "gateway/web", "{.status.addresses[0].value}"); got != svc.Spec.ClusterIP || !strings.Contains(out, got) {
		t.Errorf("the Gateway's address is %q; want its Service's ClusterIP %s shown by kubectl get", got, svc.Spec.ClusterIP)
	}
	listener := jsonpath(t, ctx, in, ns, "gateway/web", `{.status.listeners[0].attachedRoutes} {range .status.listeners[0].conditions[*]}{.type}={.status};{end}`)
	for _, want := range []string{"3 ", "Accepted=True", "Programmed=True", "ResolvedRefs=True", "Conflicted=False"} {
		if !strings.Contains(listener, want) {
			t.Errorf("the listener's status %q lacks %q", listener, want)
		}
	}
	parents := func(route string) string {
		return jsonpath(t, ctx, in, ns, "httproute/"+route, `{range .status.parents[*]}{.controllerName} {.parentRef.name}:{range .conditions[*]}{.type}={.status}/{.reason};{end}{end}`)
	}
	for route, want := range map[string]string{
		"split":   "rayctl.dev/gateway-controller web:Accepted=True/Accepted;ResolvedRefs=True/ResolvedRefs;",
		"canary":  "rayctl.dev/gateway-controller web:Accepted=True/Accepted;ResolvedRefs=True/ResolvedRefs;",
		"missing": "rayctl.dev/gateway-controller web:Accepted=True/Accepted;ResolvedRefs=False/BackendNotFound;",
	} {
		eventually(t, ctx, nodeTimeout, "HTTPRoute "+route+"'s parent status", func(ctx context.Context) (bool, error) { return parents(route) == want, nil })
	}
	// Objects rayctl's controller claims get no NoGatewayController Warning.
	events, err := in.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing events", err)
	for _, e := range events.Items {
		if e.Reason == "NoGatewayController" {
			t.Errorf("%s %s got the NoGatewayController Warning: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}

	_, local := portForward(t, ctx, in, ns, nil, "svc/web-"+class, 80)
	base := fmt.Sprintf("http://127.0.0.1:%d", local)
	counts := map[string]int{}
	for range 40 {
		code, body, err := httpGet(ctx, base+"/")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET / through the Gateway: %d %q: %v", code, body, err)
		}
		counts[strings.TrimSpace(body)]++
	}
	if counts["web-a"] != 30 || counts["web-b"] != 10 {
		t.Errorf("weights 3:1 over 40 requests through the Gateway gave %v", counts)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	req.Header.Set("X-Canary", "yes")
	for range 4 {
		resp, err := hostHTTP.Do(req)
		must(t, "GET with X-Canary", err)
		var b strings.Builder
		_, _ = fmt.Fprint(&b, resp.Header.Get("X-Rayctl-Gateway-Backend"))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || b.String() != ns+"/web-b:8000" {
			t.Fatalf("GET with X-Canary: yes went to %q (%d); want web-b", b.String(), resp.StatusCode)
		}
	}
	if code, _, err := httpGet(ctx, base+"/missing"); err != nil || code != http.StatusInternalServerError {
		t.Errorf("GET /missing (a backend that does not resolve): %d %v; want 500", code, err)
	}
}
