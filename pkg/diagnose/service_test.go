package diagnose

import (
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/chain"
)

// servingService is a RayService whose cluster svc-rc is ready, with the given applications and
// endpoints, and the RayService controller's chain: a reconcile after the cluster's last write.
func servingService(apps map[string]rayv1.AppStatus, endpoints int32) (*Input, *recorder) {
	in, r := healthyPod()
	rs := &rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc", UID: "uid-svc"}}
	rs.Status.ActiveServiceStatus = rayv1.RayServiceStatus{RayClusterName: "rc", Applications: apps}
	rs.Status.NumServeEndpoints = endpoints
	in.Cluster.OwnerReferences = ownedBy(KindRayService, "svc", "uid-svc")
	in.Kind, in.Name, in.Service = KindRayService, "svc", rs
	in.Controllers = append(in.Controllers, chain.ControllerInfo{Name: "rayservice", Kind: KindRayService, Manager: "ray-controllers", Identity: identity,
		Watches: []chain.WatchInfo{{Kind: KindRayService, Handler: "object"}, {Kind: KindRayCluster, Handler: "controller owner"}},
		Queue:   chain.QueueStats{Concurrency: 1}})
	r.informer("rayservice", KindRayCluster, "rc", "13", "10", "update", mapped(KindRayService, "svc"))
	r.add(chain.Event{Component: "rayservice", Hop: chain.DashboardCall, Object: ref(KindRayService, "svc", ""), Call: &chain.Call{Method: "PUT", URL: "http://10.0.0.1:8265/api/serve/applications/", Path: "/api/serve/applications/", Code: 200}})
	r.reconcile("rayservice", KindRayService, "svc", "requeue-after", "", 2*time.Second)
	return in, r
}

func TestRayServiceServing(t *testing.T) {
	in, r := servingService(map[string]rayv1.AppStatus{"fruit": {Status: "RUNNING"}}, 2)
	rep := run(t, in, r)
	if rep.Verdict.Cause != "" {
		t.Fatalf("verdict %+v, want every check passed", rep.Verdict)
	}
	j := check(t, rep, "j", KindRayService)
	if j.Status != Pass || !strings.Contains(j.Summary, "1 application(s) RUNNING on RayCluster rc; the serve Service has 2 endpoint(s)") {
		t.Errorf("j: %s %q", j.Status, j.Summary)
	}
	if got := rep.Subjects; len(got) != 3 || got[2].Kind != KindRayService {
		t.Errorf("subjects %v, want the head Pod, the RayCluster, the RayService", got)
	}
	if f := check(t, rep, "f", KindRayService); f.Status != Pass {
		t.Errorf("f for the RayService: %s %q", f.Status, f.Summary)
	}
}

func TestRayServiceProblems(t *testing.T) {
	in, r := servingService(map[string]rayv1.AppStatus{"fruit": {Status: "RUNNING"}, "math": {Status: "DEPLOY_FAILED", Message: "ModuleNotFoundError: conditional_dag"}}, 1)
	expect(t, run(t, in, r), "j", CauseServeAppNotRunning, "math is DEPLOY_FAILED: ModuleNotFoundError")

	in, r = servingService(map[string]rayv1.AppStatus{"fruit": {Status: "RUNNING"}}, 0)
	expect(t, run(t, in, r), "j", CauseNoServeEndpoints, "no ready endpoint", "ray.io/serve=true")

	in, r = servingService(nil, 0)
	meta.SetStatusCondition(&in.Service.Status.Conditions, metav1.Condition{Type: string(rayv1.RayServiceReady), Status: metav1.ConditionFalse,
		Reason: string(rayv1.RayServiceInitializing), Message: "RayService is initializing: RayCluster rc refused the Serve config: HTTP 400: applications.0.import_path  Field required"})
	expect(t, run(t, in, r), "j", CauseServeNotDeployed, "refused the Serve config", "import_path")

	in, r = servingService(nil, 0)
	in.Service.Status.ActiveServiceStatus = rayv1.RayServiceStatus{}
	meta.SetStatusCondition(&in.Service.Status.Conditions, metav1.Condition{Type: string(rayv1.RayServiceReady), Status: metav1.ConditionFalse,
		Reason: string(rayv1.RayServiceValidationFailed), Message: "spec.serveConfigV2 is not a YAML mapping"})
	expect(t, run(t, in, r), "j", CauseServiceInvalid, "spec.serveConfigV2")
}

func TestRayServiceServeSaysWhatTheStatusDoesNot(t *testing.T) {
	in, r := servingService(nil, 0)
	in.Ray = &RayState{Source: "services/rc-head-svc:dashboard/proxy/api/serve/applications/ in team-a",
		Applications: map[string]RayApp{"math": {Status: "DEPLOYING", Message: "Deploying app 'math': waiting for the runtime env"}}}
	rep := run(t, in, r)
	expect(t, rep, "j", CauseServeAppNotRunning, "Serve says", "math is DEPLOYING: Deploying app 'math'")
	if j := check(t, rep, "j", KindRayService); !hasEvidence(j, "Serve (services/rc-head-svc:dashboard/proxy/api/serve/applications/ in team-a): application math DEPLOYING") {
		t.Errorf("j's evidence does not name Serve's answer: %v", j.Evidence)
	}
}
