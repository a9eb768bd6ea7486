package e2e

// KubeRay v1.7's Gateway API samples (the three files are the same in v1.6.2's module, which the tests
// read, as in v1.7.0) under rayctl's own Gateway, on raysim. The samples name GatewayClasses of other
// implementations (istio, azure-alb-external); a GatewayClass is the cluster's infrastructure, so each
// test makes one of that name whose controllerName is rayctl's, and applies the samples' Gateway,
// HTTPRoute and RayService unchanged.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestKubeRayGatewaySamples runs its cases on one instance serving the Gateway API, where raysim runs
// Ray's images, with a node that advertises room for KubeRay's 1-CPU samples.
func TestKubeRayGatewaySamples(t *testing.T) {
	needPodNetwork(t)
	in := framework.StartTest(t, "--gateway-api", "--ray", "sim", "--node-capacity", "cpu=8,memory=16Gi")
	cases := map[string]func(t *testing.T, e *rayEnv){
		"ClusterDashboardThroughGateway": testAGCGatewaySample,
		"IncrementalUpgradeSample":       testIncrementalUpgradeSample,
	}
	for name, test := range cases {
		t.Run(name, func(t *testing.T) { test(t, raySetup(t, in)) })
	}
}

// rayctlClassNamed makes a GatewayClass of the name a sample gives, claimed by rayctl's controller, and
// deletes it when the test ends.
func rayctlClassNamed(t *testing.T, e *rayEnv, name string) {
	t.Helper()
	out, stderr, err := e.in.Kubectl(e.ctx, "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: "+name+"\nspec:\n  controllerName: rayctl.dev/gateway-controller\n", "apply", "-f", "-")
	must(t, "creating the GatewayClass "+name+": "+out+stderr, err)
	t.Cleanup(func() {
		_, _, _ = e.in.Kubectl(context.Background(), "", "delete", "gatewayclass", name, "--ignore-not-found")
	})
}

// waitProgrammed waits for `kubectl get gateway` to show the Gateway PROGRAMMED True.
func (e *rayEnv) waitProgrammed(t *testing.T, gateway string) {
	t.Helper()
	e.waitFor(t, 2*time.Minute, "Gateway "+gateway+" PROGRAMMED True", func(ctx context.Context) (bool, string, error) {
		out, _, err := e.in.Kubectl(ctx, "", "get", "-n", e.ns, "gateway", gateway)
		f := strings.Fields(out)
		return err == nil && len(f) >= 9 && f[8] == "True", out, err
	})
}

// (ClusterDashboardThroughGateway) ray-cluster-agc-gatewayapi.yaml, unchanged, with KubeRay's
// ray-cluster.sample.yaml (the raycluster-kuberay it routes to) and a GatewayClass azure-alb-external
// of rayctl's: the Gateway is programmed, its HTTPRoute accepted with its reference resolved, and the
// cluster's dashboard answers through `kubectl port-forward` to the Gateway's Service.
func testAGCGatewaySample(t *testing.T, e *rayEnv) {
	rayctlClassNamed(t, e, "azure-alb-external")
	e.applySample(t, "ray-cluster.sample.yaml")
	e.applySample(t, "ray-cluster-agc-gatewayapi.yaml")
	e.waitProgrammed(t, "ray-cluster-gateway")
	e.waitFor(t, 2*time.Minute, "HTTPRoute ray-cluster-http-route Accepted with its references resolved", func(ctx context.Context) (bool, string, error) {
		got := jsonpath(t, ctx, e.in, e.ns, "httproute/ray-cluster-http-route", `{range .status.parents[*]}{range .conditions[*]}{.type}={.status};{end}{end}`)
		return got == "Accepted=True;ResolvedRefs=True;", got, nil
	})
	_, local := portForward(t, e.ctx, e.in, e.ns, nil, "svc/ray-cluster-gateway-azure-alb-external", 80)
	base := fmt.Sprintf("http://127.0.0.1:%d", local)
	// The head's dashboard is up once the cluster is ready; until then the Gateway answers 502.
	e.waitFor(t, 3*time.Minute, "the dashboard answering through the Gateway", func(ctx context.Context) (bool, string, error) {
		code, body, err := httpGet(ctx, base+"/api/version")
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %q", code, body), err
	})
	wantRayVersion(t, e.ctx, base)
	code, body, err := httpGet(e.ctx, base+"/api/jobs/")
	if err != nil || code != http.StatusOK || !strings.HasPrefix(strings.TrimSpace(body), "[") {
		t.Errorf("GET /api/jobs/ through the Gateway: %d %q %v; want the dashboard's job list", code, body, err)
	}
}

// (IncrementalUpgradeSample) ray-service.incremental-upgrade.yaml, unchanged, with a GatewayClass istio
// of rayctl's (the sample's gateway-api/istio-class.yaml names Istio's controller): the RayService
// becomes Ready through its Gateway, and a change of its rayClusterConfig starts the upgrade with the
// sample's options, under a steady load through the Gateway: the new cluster's capacity and traffic
// rise by 10% (stepSizePercent, maxSurgePercent) and the next traffic step waits intervalSeconds (30 s)
// after the first; no request fails. (The sample's working_dir, a zip on github.com, is not fetched:
// raysim's Serve stands in for the application.)
func testIncrementalUpgradeSample(t *testing.T, e *rayEnv) {
	const name = "rayservice-incremental-upgrade"
	rayctlClassNamed(t, e, "istio")
	e.applySample(t, "ray-service.incremental-upgrade.yaml")
	rs := e.waitService(t, name, "Ready with all traffic on its cluster", 3*time.Minute, func(rs *rayv1.RayService) bool {
		return serviceReady(rs) && ptr.Deref(rs.Status.ActiveServiceStatus.TrafficRoutedPercent, 0) == 100
	})
	old := rs.Status.ActiveServiceStatus.RayClusterName
	e.waitProgrammed(t, name+"-gateway")

	load := e.fruitLoadThroughGateway(t, "svc/"+name+"-gateway-istio")

	_, err := e.ray.RayV1().RayServices(e.ns).Patch(e.ctx, name, types.MergePatchType, []byte(`{"spec":{"rayClusterConfig":{"rayVersion":"2.52.0"}}}`), metav1.PatchOptions{})
	must(t, "patching rayClusterConfig", err)
	first := e.waitService(t, name, "the new cluster at 10% capacity and 10% of the traffic", 3*time.Minute, func(rs *rayv1.RayService) bool {
		p := rs.Status.PendingServiceStatus
		return p.RayClusterName != "" && ptr.Deref(p.TrafficRoutedPercent, 0) > 0
	})
	p := first.Status.PendingServiceStatus
	if ptr.Deref(p.TrafficRoutedPercent, 0) != 10 || p.LastTrafficMigratedTime == nil {
		t.Fatalf("the new cluster's first step: traffic %d%%, migrated at %v; want 10%% (stepSizePercent)", ptr.Deref(p.TrafficRoutedPercent, 0), p.LastTrafficMigratedTime)
	}
	checkSurge(t, first)
	second := e.waitService(t, name, "the new cluster's second traffic step", 3*time.Minute, func(rs *rayv1.RayService) bool {
		return ptr.Deref(rs.Status.PendingServiceStatus.TrafficRoutedPercent, 0) > 10
	})
	s := second.Status
	gap := s.PendingServiceStatus.LastTrafficMigratedTime.Sub(p.LastTrafficMigratedTime.Time)
	t.Logf("traffic on the new cluster %s: 10%% then %d%% %s later; the old cluster's capacity %d%%", s.PendingServiceStatus.RayClusterName,
		ptr.Deref(s.PendingServiceStatus.TrafficRoutedPercent, 0), gap, ptr.Deref(s.ActiveServiceStatus.TargetCapacity, 0))
	if got := ptr.Deref(s.PendingServiceStatus.TrafficRoutedPercent, 0); got != 20 || gap < 30*time.Second {
		t.Errorf("the second traffic step: %d%% after %s; want 20%% no sooner than intervalSeconds (30 s) after the first", got, gap)
	}
	checkSurge(t, second)
	byCluster := load.counts()
	failures := load.stop()
	t.Logf("requests through the Gateway: %d answered, by cluster %v; %d failed", load.ok.Load(), byCluster, load.failed.Load())
	if byCluster[old] == 0 || byCluster[s.PendingServiceStatus.RayClusterName] == 0 {
		t.Errorf("answers by cluster %v; want both %s and %s", byCluster, old, s.PendingServiceStatus.RayClusterName)
	}
	if len(failures) > 0 {
		t.Errorf("%d requests through the Gateway failed during the upgrade:\n%s", len(failures), strings.Join(failures, "\n"))
	}
}

// checkSurge checks that the two clusters' Serve capacity sums to no more than 110% (the sample's
// maxSurgePercent is 10).
func checkSurge(t *testing.T, rs *rayv1.RayService) {
	t.Helper()
	a, p := ptr.Deref(rs.Status.ActiveServiceStatus.TargetCapacity, 100), ptr.Deref(rs.Status.PendingServiceStatus.TargetCapacity, 0)
	if a+p > 110 {
		t.Errorf("target capacity: old cluster %d%%, new cluster %d%%; want at most 110%% together (maxSurgePercent 10)", a, p)
	}
}
