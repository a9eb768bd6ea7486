package e2e

// rayctl's own Gateway (pkg/controllers/ray/gateway, `rayctl up --gateway-api`): a GatewayClass naming
// rayctl.dev/gateway-controller is accepted, a Gateway of it is programmed (its proxy pod running
// `rayctl gateway-proxy`), HTTPRoutes attach with the status a conformant implementation writes, and
// requests through `kubectl port-forward` to the Gateway's Service follow the routes' matches and weights.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/chain"
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

// gatewayFilters are HTTPRoutes of the Gateway web with filters and timeouts: /rewrite/… has its
// request headers changed and its prefix rewritten to the echo backend's CGI script, and a response
// header set; /old/… is redirected (301) to /new/…; /cgi-bin/slow has a 1 s request timeout; and a
// route whose only rule has a CORS filter, which rayctl's Gateway does not implement.
const gatewayFilters = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: filters
spec:
  parentRefs:
  - name: web
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /rewrite
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set:
        - name: X-Set
          value: set-by-gateway
        add:
        - name: X-Added
          value: added
        remove:
        - X-Remove
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        set:
        - name: X-Backend
          value: changed-by-gateway
    - type: URLRewrite
      urlRewrite:
        path:
          type: ReplacePrefixMatch
          replacePrefixMatch: /cgi-bin/echo
    backendRefs:
    - name: echo
      port: 8000
  - matches:
    - path:
        type: PathPrefix
        value: /old
    filters:
    - type: RequestRedirect
      requestRedirect:
        path:
          type: ReplacePrefixMatch
          replacePrefixMatch: /new
        statusCode: 301
  - matches:
    - path:
        type: Exact
        value: /cgi-bin/slow
    timeouts:
      request: 1s
    backendRefs:
    - name: echo
      port: 8000
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: cors
spec:
  parentRefs:
  - name: web
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /cors
    filters:
    - type: CORS
      cors:
        allowOrigins:
        - https://example.com
    backendRefs:
    - name: web-a
      port: 8000
`

// echoScripts are the echo backend's CGI scripts: echo answers the URI it got and its request headers
// (HTTP_* variables) with the response header X-Backend: echo; slow answers after 30 s.
const echoScripts = `mkdir -p /tmp/www/cgi-bin && cat > /tmp/www/cgi-bin/echo <<'EOF'
#!/bin/sh
echo "Content-Type: text/plain"
echo "X-Backend: echo"
echo
echo "uri=$REQUEST_URI"
env | grep ^HTTP_ | sort
EOF
cat > /tmp/www/cgi-bin/slow <<'EOF'
#!/bin/sh
sleep 30
echo "Content-Type: text/plain"
echo
echo late
EOF
chmod +x /tmp/www/cgi-bin/echo /tmp/www/cgi-bin/slow && exec httpd -f -p 8000 -h /tmp/www`

// gatewayInstance starts an instance serving the Gateway API, with a pod network of its own.
func gatewayInstance(t *testing.T) *framework.Instance {
	needPodNetwork(t)
	return framework.StartTest(t, "--gateway-api")
}

// needPodNetwork skips a test where rayctl's Gateway cannot run: its proxy and its backends need a pod
// network of rayctl's own.
func needPodNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the Gateway's proxy and its backends need a pod network of rayctl's own: run as root")
	}
}

// webBackend runs busybox httpd answering name on port 8000, behind a Service of that name.
func webBackend(t *testing.T, ctx context.Context, in *framework.Instance, ns, name string) {
	t.Helper()
	httpdBackend(t, ctx, in, ns, name, fmt.Sprintf("mkdir -p /tmp/www && echo %s > /tmp/www/index.html && exec httpd -f -p 8000 -h /tmp/www", name))
}

// httpdBackend runs script (which serves port 8000) in a pod behind a Service, both named name.
func httpdBackend(t *testing.T, ctx context.Context, in *framework.Instance, ns, name, script string) {
	t.Helper()
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
// unrouted path 404; then filters and timeouts (checkGatewayFilters).
func TestGatewayRoutes(t *testing.T) {
	in := gatewayInstance(t)
	ctx := testContext(t)
	ns := newNamespace(t, ctx, in)
	class := "rayctl-" + ns
	t.Cleanup(func() {
		_, _, _ = in.Kubectl(context.Background(), "", "delete", "gatewayclass", class, "--ignore-not-found")
	})
	webBackend(t, ctx, in, ns, "web-a")
	webBackend(t, ctx, in, ns, "web-b")
	httpdBackend(t, ctx, in, ns, "echo", echoScripts)
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
	checkGatewayFilters(t, ctx, in, ns, base)
}

// checkGatewayFilters applies gatewayFilters and checks, through the port-forward at base, the header
// changes and the rewrite the echo backend sees, the response header change, the redirect, and the
// request timeout's 504; and the CORS route's status: Accepted False, UnsupportedValue.
func checkGatewayFilters(t *testing.T, ctx context.Context, in *framework.Instance, ns, base string) {
	t.Helper()
	out, stderr, err := in.Kubectl(ctx, gatewayFilters, "apply", "-n", ns, "-f", "-")
	must(t, "applying the routes with filters: "+out+stderr, err)
	parents := func(route string) string {
		return jsonpath(t, ctx, in, ns, "httproute/"+route, `{range .status.parents[*]}{range .conditions[*]}{.type}={.status}/{.reason};{end}{end}`)
	}
	for route, want := range map[string]string{
		"filters": "Accepted=True/Accepted;ResolvedRefs=True/ResolvedRefs;",
		"cors":    "Accepted=False/UnsupportedValue;ResolvedRefs=True/ResolvedRefs;",
	} {
		eventually(t, ctx, nodeTimeout, "HTTPRoute "+route+"'s parent status", func(ctx context.Context) (bool, error) { return parents(route) == want, nil })
	}
	t.Logf("the CORS route: %s", jsonpath(t, ctx, in, ns, "httproute/cors", `{.status.parents[0].conditions[?(@.type=="Accepted")].message}`))

	noRedirect := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(path string, header map[string]string) (*http.Response, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		must(t, "GET "+path+" through the Gateway", err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// The proxy follows the table in its ConfigMap: wait for the new routes to be served.
	var resp *http.Response
	var body string
	eventually(t, ctx, nodeTimeout, "the rewritten route answering", func(context.Context) (bool, error) {
		resp, body = send("/rewrite/x?y=1", map[string]string{"X-Set": "from-client", "X-Added": "first", "X-Remove": "gone"})
		return resp.StatusCode == http.StatusOK && strings.Contains(body, "uri="), nil
	})
	for _, want := range []string{"uri=/cgi-bin/echo/x?y=1\n", "HTTP_X_SET=set-by-gateway\n", "HTTP_X_ADDED=first,added\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("the echo backend saw %q; want %q in it", body, want)
		}
	}
	if strings.Contains(body, "HTTP_X_REMOVE") {
		t.Errorf("the echo backend saw the removed header X-Remove: %q", body)
	}
	if got := resp.Header.Get("X-Backend"); got != "changed-by-gateway" {
		t.Errorf("the response's X-Backend is %q; want the ResponseHeaderModifier's changed-by-gateway", got)
	}
	resp, _ = send("/old/page?q=1", nil)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "http://127.0.0.1/new/page?q=1" {
		t.Errorf("GET /old/page?q=1: %d Location %q; want 301 to http://127.0.0.1/new/page?q=1 (the listener's port 80 left out)", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = send("/cgi-bin/slow", nil)
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("GET /cgi-bin/slow (a 30 s answer, a 1 s request timeout): %d %q; want 504", resp.StatusCode, body)
	}
	// The CORS rule is dropped: /cors falls to the split route's catch-all (whose httpd has no such file).
	if resp, _ = send("/cors", nil); !strings.HasPrefix(resp.Header.Get("X-Rayctl-Gateway-Backend"), ns+"/web-") {
		t.Errorf("GET /cors: %d from %q; want the split route's backends", resp.StatusCode, resp.Header.Get("X-Rayctl-Gateway-Backend"))
	}
}

// TestRayServiceIncrementalUpgrade: a RayService with upgradeStrategy NewClusterWithIncrementalUpgrade
// (raysim Serve, rayctl's GatewayClass) gets its Gateway and HTTPRoute; under a steady load of requests
// through `kubectl port-forward` to the Gateway, a change of rayClusterConfig moves traffic to the new
// cluster in stepSizePercent steps (the status's trafficRoutedPercent passes through values between 0
// and 100), no request fails, and the upgrade ends with the new cluster active and answering every
// request; `rayctl trace` shows the HTTPRoute write and the Gateway's hops it caused. Then a second
// upgrade, reverted mid-way, rolls back (testIncrementalRollback), still with no failed request.
func TestRayServiceIncrementalUpgrade(t *testing.T) {
	in := gatewayInstance(t)
	e := newRayEnv(t, in)
	class := "rayctl-" + e.ns
	t.Cleanup(func() {
		_, _, _ = in.Kubectl(context.Background(), "", "delete", "gatewayclass", class, "--ignore-not-found")
	})
	out, stderr, err := in.Kubectl(e.ctx, "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: "+class+"\nspec:\n  controllerName: rayctl.dev/gateway-controller\n", "apply", "-f", "-")
	must(t, "creating the GatewayClass: "+out+stderr, err)

	const name = "inc"
	rs := sampleService(t, name)
	rs.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](10)
	rs.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true)
	rs.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: ptr.To(rayv1.RayServiceNewClusterWithIncrementalUpgrade),
		ClusterUpgradeOptions: &rayv1.ClusterUpgradeOptions{GatewayClassName: class, StepSizePercent: ptr.To[int32](25), IntervalSeconds: ptr.To[int32](2), MaxSurgePercent: ptr.To[int32](50)}}
	_, err = e.ray.RayV1().RayServices(e.ns).Create(e.ctx, rs, metav1.CreateOptions{})
	must(t, "creating the RayService", err)
	rs = e.waitService(t, name, "Ready with all traffic on its cluster", 3*time.Minute, func(rs *rayv1.RayService) bool {
		return serviceReady(rs) && ptr.Deref(rs.Status.ActiveServiceStatus.TrafficRoutedPercent, 0) == 100
	})
	old := rs.Status.ActiveServiceStatus.RayClusterName
	eventually(t, e.ctx, nodeTimeout, "Gateway "+name+"-gateway PROGRAMMED True", func(ctx context.Context) (bool, error) {
		return jsonpath(t, ctx, in, e.ns, "gateway/"+name+"-gateway", `{.status.conditions[?(@.type=="Programmed")].status}`) == "True", nil
	})

	load := e.fruitLoadThroughGateway(t, "svc/"+name+"-gateway-"+class)

	patch := []byte(`{"spec":{"rayClusterConfig":{"rayVersion":"2.46.1"}}}`)
	_, err = e.ray.RayV1().RayServices(e.ns).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, "patching rayClusterConfig", err)
	steps := map[int32]bool{}
	var newName string
	rs = e.waitService(t, name, "the new cluster active with all traffic", 5*time.Minute, func(rs *rayv1.RayService) bool {
		if p := rs.Status.PendingServiceStatus; p.RayClusterName != "" {
			newName = p.RayClusterName
			if w := ptr.Deref(p.TrafficRoutedPercent, -1); w > 0 && w < 100 {
				steps[w] = true
			}
		}
		a := rs.Status.ActiveServiceStatus
		return newName != "" && a.RayClusterName == newName && rs.Status.PendingServiceStatus.RayClusterName == "" &&
			ptr.Deref(a.TrafficRoutedPercent, 0) == 100 && serviceReady(rs)
	})
	t.Logf("traffic on the new cluster %s passed through %v%%", newName, slices.Sorted(maps.Keys(steps)))
	if len(steps) < 2 {
		t.Errorf("trafficRoutedPercent of the new cluster passed through %v; want steps of 25 between 0 and 100", slices.Sorted(maps.Keys(steps)))
	}
	// Once the old cluster is gone, every request is the new cluster's.
	e.waitFor(t, 2*time.Minute, "the old cluster "+old+" deleted", func(ctx context.Context) (bool, string, error) {
		_, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, old, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there", client404(err)
	})
	before := load.counts()[newName]
	e.waitFor(t, 30*time.Second, "more requests answered by the new cluster", func(context.Context) (bool, string, error) {
		return load.counts()[newName] > before+10, fmt.Sprint(load.counts()), nil
	})
	byCluster := load.counts()
	if byCluster[old] == 0 || byCluster[newName] == 0 {
		t.Errorf("answers by cluster %v; want both %s and %s", byCluster, old, newName)
	}
	checkRouteTrace(t, e, name)
	testIncrementalRollback(t, e, name, newName, load)
	failures := load.stop()
	t.Logf("requests through the Gateway: %d answered, by cluster %v; %d failed", load.ok.Load(), load.counts(), load.failed.Load())
	if len(failures) > 0 {
		t.Errorf("%d requests through the Gateway failed during the upgrade and the rollback:\n%s", len(failures), strings.Join(failures, "\n"))
	}
}

// checkRouteTrace checks that `rayctl trace rayservice/NAME` shows, in order, the RayService's latest
// HTTPRoute write, the API server accepting it, and rayctl's Gateway controller reconciling the Gateway
// and writing its proxy's routing table.
func checkRouteTrace(t *testing.T, e *rayEnv, name string) {
	t.Helper()
	steps := e.traceSteps(t, "rayservice/"+name)
	want := []hopPattern{
		{"rayservice", chain.ObjectWrite, "HTTPRoute", "updated"},
		{"gateway", chain.InformerEvent, "HTTPRoute", ""},
		{"gateway", chain.ReconcileStart, "Gateway", name + "-gateway"},
		{"gateway", chain.ObjectWrite, "ConfigMap", "updated"},
	}
	if i, lines := matchInOrder(steps, want); i < len(want) {
		t.Errorf("rayctl trace rayservice/%s lacks, in order, %s (matched %d of %d hops); trace:\n%s", name, want[i], i, len(want), lines)
	}
	if !slices.ContainsFunc(steps, func(s chain.Step) bool { return s.Hop == chain.APIWrite && s.Object.Kind == chain.KindHTTPRoute }) {
		t.Errorf("rayctl trace rayservice/%s has no API write of its HTTPRoute", name)
	}
}

// testIncrementalRollback: a second upgrade of the RayService (whose active cluster is active), reverted
// by the user once the new cluster carries some traffic, rolls back as KubeRay v1.7 does: the RayService
// gets RollbackInProgress (DesiredClusterSpecChanged), traffic returns to the active cluster in
// stepSizePercent steps, the rollback completes (RollbackInProgress gone, UpgradeInProgress False with
// NoPendingCluster, the active cluster unchanged at 100% capacity and traffic) and the pending cluster is
// deleted, while load keeps every request answered.
func testIncrementalRollback(t *testing.T, e *rayEnv, name, active string, load *steadyLoad) {
	t.Helper()
	// A slower interval than the first upgrade's, so that the revert lands while traffic is split.
	patch := []byte(`{"spec":{"rayClusterConfig":{"rayVersion":"2.46.2"},"upgradeStrategy":{"clusterUpgradeOptions":{"intervalSeconds":4}}}}`)
	_, err := e.ray.RayV1().RayServices(e.ns).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, "patching rayClusterConfig for a second upgrade", err)
	rs := e.waitService(t, name, "the second upgrade's new cluster carrying half the traffic", 3*time.Minute, func(rs *rayv1.RayService) bool {
		w := ptr.Deref(rs.Status.PendingServiceStatus.TrafficRoutedPercent, 0)
		return w >= 50 && w < 100
	})
	pending := rs.Status.PendingServiceStatus.RayClusterName
	if rs.Status.ActiveServiceStatus.RayClusterName != active {
		t.Fatalf("during the second upgrade the active cluster is %s; want %s", rs.Status.ActiveServiceStatus.RayClusterName, active)
	}
	atRevert := ptr.Deref(rs.Status.ActiveServiceStatus.TrafficRoutedPercent, 0)
	servedByPending := load.counts()[pending]
	_, err = e.ray.RayV1().RayServices(e.ns).Patch(e.ctx, name, types.MergePatchType, []byte(`{"spec":{"rayClusterConfig":{"rayVersion":"2.46.1"}}}`), metav1.PatchOptions{})
	must(t, "reverting rayClusterConfig", err)
	t.Logf("reverted with %d%% of traffic on the active cluster %s, the pending %s having answered %d requests", atRevert, active, pending, servedByPending)
	if servedByPending == 0 {
		t.Errorf("the pending cluster %s answered no request before the revert", pending)
	}

	rollback := e.waitService(t, name, "RollbackInProgress True", 30*time.Second, func(rs *rayv1.RayService) bool {
		return meta.IsStatusConditionTrue(rs.Status.Conditions, string(rayv1.RollbackInProgress))
	})
	c := meta.FindStatusCondition(rollback.Status.Conditions, string(rayv1.RollbackInProgress))
	if c.Reason != "DesiredClusterSpecChanged" || c.Message != "Goal state reverted to original cluster, rolling back." {
		t.Errorf("RollbackInProgress: %s %q; want KubeRay's DesiredClusterSpecChanged, \"Goal state reverted to original cluster, rolling back.\"", c.Reason, c.Message)
	}
	back := map[int32]bool{}
	rs = e.waitService(t, name, "the rollback complete", 2*time.Minute, func(rs *rayv1.RayService) bool {
		if w := ptr.Deref(rs.Status.ActiveServiceStatus.TrafficRoutedPercent, 0); w > atRevert && w < 100 && rs.Status.PendingServiceStatus.RayClusterName != "" {
			back[w] = true
		}
		return meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.RollbackInProgress)) == nil &&
			rs.Status.PendingServiceStatus.RayClusterName == "" && serviceReady(rs)
	})
	t.Logf("traffic back on %s passed through %v%%", active, slices.Sorted(maps.Keys(back)))
	if atRevert < 75 && len(back) == 0 {
		t.Errorf("traffic went back from %d%% to 100%% with no step between", atRevert)
	}
	a := rs.Status.ActiveServiceStatus
	if a.RayClusterName != active || ptr.Deref(a.TrafficRoutedPercent, 0) != 100 || ptr.Deref(a.TargetCapacity, 0) != 100 {
		t.Errorf("after the rollback the active cluster is %s at %d%% traffic, %d%% capacity; want %s at 100%% and 100%%",
			a.RayClusterName, ptr.Deref(a.TrafficRoutedPercent, 0), ptr.Deref(a.TargetCapacity, 0), active)
	}
	if u := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.UpgradeInProgress)); u == nil || u.Status != metav1.ConditionFalse || u.Reason != string(rayv1.NoPendingCluster) {
		t.Errorf("after the rollback UpgradeInProgress is %+v; want False, NoPendingCluster", u)
	}
	e.waitFor(t, 2*time.Minute, "the pending cluster "+pending+" deleted", func(ctx context.Context) (bool, string, error) {
		_, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, pending, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there", client404(err)
	})
	// From here on every request is the active cluster's.
	before := load.counts()
	e.waitFor(t, 30*time.Second, "more requests answered by "+active, func(context.Context) (bool, string, error) {
		return load.counts()[active] > before[active]+10, fmt.Sprint(load.counts()), nil
	})
	if after := load.counts(); after[pending] != before[pending] {
		t.Errorf("the deleted pending cluster %s answered %d requests after the rollback", pending, after[pending]-before[pending])
	}
}

// fruitLoadThroughGateway starts a steady load of GET /fruit/mango (raysim Serve's fruit_app) through
// `kubectl port-forward` to a RayService's Gateway Service svc, labelling each answer with the cluster
// that gave it, once the first requests are answered.
func (e *rayEnv) fruitLoadThroughGateway(t *testing.T, svc string) *steadyLoad {
	t.Helper()
	_, local := portForward(t, e.ctx, e.in, e.ns, nil, svc, 80)
	url := fmt.Sprintf("http://127.0.0.1:%d/fruit/mango", local)
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	load := startSteadyLoad(e.ctx, func(ctx context.Context) (string, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return "", err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "raysim serve: app=fruit_app") {
			return "", fmt.Sprintf("%d %q", resp.StatusCode, body)
		}
		// The proxy names the backend: <namespace>/<cluster>-serve-svc:8000.
		return strings.TrimSuffix(strings.TrimPrefix(resp.Header.Get("X-Rayctl-Gateway-Backend"), e.ns+"/"), "-serve-svc:8000"), ""
	})
	e.waitFor(t, 30*time.Second, "requests answering through the Gateway", func(context.Context) (bool, string, error) {
		return load.ok.Load() > 5, fmt.Sprintf("%d answered, %d failed", load.ok.Load(), load.failed.Load()), nil
	})
	return load
}

// steadyLoad sends one request after another (20 ms apart) until stopped, counting answers by the label
// each gets and keeping every failure with its time.
type steadyLoad struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	byLabel    map[string]int
	failures   []string
	done       chan struct{}
	cancel     context.CancelFunc
}

// startSteadyLoad runs get in a loop: it returns the answer's label, or "" and why the request failed.
// A failure after ctx ended is not counted.
func startSteadyLoad(ctx context.Context, get func(ctx context.Context) (label, failure string)) *steadyLoad {
	ctx, cancel := context.WithCancel(ctx)
	l := &steadyLoad{byLabel: map[string]int{}, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			label, failure := get(ctx)
			l.mu.Lock()
			switch {
			case failure == "":
				l.ok.Add(1)
				l.byLabel[label]++
			case ctx.Err() == nil:
				l.failed.Add(1)
				l.failures = append(l.failures, time.Now().Format("15:04:05.000")+": "+failure)
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return l
}

// counts is a copy of the answers by label.
func (l *steadyLoad) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.byLabel)
}

// stop ends the load and returns its failures.
func (l *steadyLoad) stop() []string {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures
}
