package rayservice

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/raydashboard"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

func TestServeConfigJSON(t *testing.T) {
	got, err := serveConfigJSON("applications:\n  - name: fruit\n    route_prefix: /fruit\n    import_path: fruit.graph\n    deployments:\n      - name: Mango\n        num_replicas: 2\n        user_config: {price: 3}\n")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("not JSON: %s", got)
	}
	app := m["applications"].([]any)[0].(map[string]any)
	dep := app["deployments"].([]any)[0].(map[string]any)
	if app["route_prefix"] != "/fruit" || dep["num_replicas"] != float64(2) || dep["user_config"].(map[string]any)["price"] != float64(3) {
		t.Errorf("converted config %s", got)
	}
	for _, bad := range []string{"", "  \n", "applications: [\n", "- a\n- b\n", "just a string"} {
		if _, err := serveConfigJSON(bad); err == nil || !strings.Contains(err.Error(), "spec.serveConfigV2") {
			t.Errorf("serveConfigJSON(%q) = %v, want an error naming spec.serveConfigV2", bad, err)
		}
	}
}

func TestAppStatuses(t *testing.T) {
	if ready, apps := appStatuses(&raydashboard.ServeDetails{}); ready || apps != nil {
		t.Errorf("no application: ready=%v apps=%v, want not ready", ready, apps)
	}
	d := &raydashboard.ServeDetails{Applications: map[string]raydashboard.ServeApplication{
		"":     {Status: "RUNNING", Deployments: map[string]raydashboard.ServeDeployment{"D": {Status: "HEALTHY"}}},
		"math": {Status: "DEPLOYING", Message: "starting", Deployments: map[string]raydashboard.ServeDeployment{"Adder": {Status: "UPDATING", Message: "1 replica"}}},
	}}
	ready, apps := appStatuses(d)
	if ready {
		t.Error("ready with an application DEPLOYING")
	}
	if apps[DefaultAppName].Status != "RUNNING" || apps[DefaultAppName].Deployments["D"].Status != "HEALTHY" {
		t.Errorf("the unnamed application is not reported as %q: %+v", DefaultAppName, apps)
	}
	if a := apps["math"]; a.Message != "starting" || a.Deployments["Adder"] != (rayv1.ServeDeploymentStatus{Status: "UPDATING", Message: "1 replica"}) {
		t.Errorf("math: %+v", a)
	}
	d.Applications["math"] = raydashboard.ServeApplication{Status: "RUNNING"}
	if ready, _ := appStatuses(d); !ready {
		t.Error("not ready with every application RUNNING")
	}
	if got := appsSummary(apps); got != "default=RUNNING, math=DEPLOYING" {
		t.Errorf("appsSummary = %q", got)
	}
}

func TestNeedsDeploy(t *testing.T) {
	running := map[string]rayv1.AppStatus{"a": {Status: "RUNNING"}}
	for _, tc := range []struct {
		deployed, current string
		apps              map[string]rayv1.AppStatus
		want              bool
	}{
		{"", "cfg", running, true},     // nothing deployed by this process
		{"cfg", "cfg", nil, true},      // the cluster lost its applications
		{"cfg", "cfg2", running, true}, // the config changed
		{"cfg", "cfg", running, false},
	} {
		if got, why := needsDeploy(tc.deployed, tc.current, tc.apps); got != tc.want {
			t.Errorf("needsDeploy(%q, %q, %v) = %v (%s), want %v", tc.deployed, tc.current, tc.apps, got, why, tc.want)
		}
	}
}

// service is a RayService with a cluster spec of one worker group.
func service() *rayv1.RayService {
	return &rayv1.RayService{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", Labels: map[string]string{"team": "a"}},
		Spec: rayv1.RayServiceSpec{ServeConfigV2: "applications: []", RayClusterSpec: rayv1.RayClusterSpec{
			RayVersion:    "2.60.0",
			HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "i"}}}}},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "g", Replicas: ptr.To[int32](1),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker", Image: "i"}}}}}},
		}},
	}
}

func TestBuildCluster(t *testing.T) {
	rs := service()
	c, err := buildCluster(rs, "svc-abcde")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "svc-abcde" || c.Namespace != "ns" || c.Labels[rayparams.LabelOriginatedCRD] != "RayService" || c.Labels[rayparams.LabelOriginName] != "svc" || c.Labels["team"] != "a" {
		t.Errorf("cluster metadata %+v", c.ObjectMeta)
	}
	if c.Annotations[rayparams.AnnotationClusterHash] == "" || c.Annotations[rayparams.AnnotationNumWorkerGroups] != "1" {
		t.Errorf("annotations %v", c.Annotations)
	}
	if !clusterNameOK(newClusterName(rs)) {
		t.Errorf("newClusterName = %q", newClusterName(rs))
	}
}

func clusterNameOK(n string) bool {
	rest, ok := strings.CutPrefix(n, "svc-")
	return ok && len(rest) == 5 && strings.ToLower(rest) == rest
}

// TestUpgradeDecision covers what a spec change leads to: nothing, an in-place update, or a new cluster.
func TestUpgradeDecision(t *testing.T) {
	rs := service()
	cluster, _ := buildCluster(rs, "svc-aaaaa")

	same := service()
	same.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](5) // replicas do not count
	same.Spec.ServeConfigV2 = "applications: [{name: x, import_path: a.b}]"  // nor does the Serve config
	if compareSpec(same, cluster) != sameSpec || shouldPrepareNewCluster(same, cluster, nil, false, false) || shouldUpdateInPlace(same, cluster, true) {
		t.Error("a replica or serveConfigV2 change asks for more than a redeploy")
	}

	added := service()
	added.Spec.RayClusterSpec.WorkerGroupSpecs = append(added.Spec.RayClusterSpec.WorkerGroupSpecs, rayv1.WorkerGroupSpec{GroupName: "g2"})
	if compareSpec(added, cluster) != groupsAdded || !shouldUpdateInPlace(added, cluster, true) || shouldPrepareNewCluster(added, cluster, nil, false, false) {
		t.Error("a worker group added at the end is not an in-place update")
	}

	changed := service()
	changed.Spec.RayClusterSpec.RayVersion = "2.61.0"
	if compareSpec(changed, cluster) != otherSpec || !shouldPrepareNewCluster(changed, cluster, nil, false, false) || shouldUpdateInPlace(changed, cluster, true) {
		t.Error("a cluster spec change does not ask for a new cluster")
	}
	if shouldPrepareNewCluster(changed, cluster, nil, true, false) {
		t.Error("a new cluster while the pending one is being promoted")
	}
	pending, _ := buildCluster(changed, "svc-bbbbb")
	if shouldPrepareNewCluster(changed, cluster, pending, false, false) {
		t.Error("a second new cluster while the pending one already has the spec")
	}
	if !shouldPrepareNewCluster(service(), nil, nil, false, false) {
		t.Error("no first cluster for a new RayService")
	}
	for typ, want := range map[rayv1.RayServiceUpgradeType]bool{
		rayv1.RayServiceNewCluster: true, rayv1.RayServiceUpgradeNone: false, rayv1.RayServiceNewClusterWithIncrementalUpgrade: false,
	} {
		c := changed.DeepCopy()
		c.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: ptr.To(typ)}
		if got := shouldPrepareNewCluster(c, cluster, nil, false, false); got != want {
			t.Errorf("upgradeStrategy.type %s: new cluster %v, want %v", typ, got, want)
		}
	}

	suspended := service()
	suspended.Spec.RayClusterSpec.Suspend = ptr.To(true)
	if !shouldUpdateInPlace(suspended, cluster, true) || compareSpec(suspended, cluster) != sameSpec {
		t.Error("suspend is not applied in place")
	}
	upgrading := added.DeepCopy()
	meta.SetStatusCondition(&upgrading.Status.Conditions, metav1.Condition{Type: string(rayv1.UpgradeInProgress), Status: metav1.ConditionTrue, Reason: "x"})
	if shouldUpdateInPlace(upgrading, cluster, true) {
		t.Error("the active cluster is updated during an upgrade")
	}
}

func TestConditions(t *testing.T) {
	rs := service()
	setConditions(rs, "waiting for the head")
	ready := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.RayServiceReady))
	if ready.Status != metav1.ConditionFalse || ready.Reason != string(rayv1.RayServiceInitializing) || !strings.Contains(ready.Message, "waiting for the head") {
		t.Errorf("Ready %+v, want False Initializing with the reason", ready)
	}
	rs.Status.ActiveServiceStatus.RayClusterName = "svc-a"
	rs.Status.NumServeEndpoints = 1
	setConditions(rs, "")
	if !meta.IsStatusConditionTrue(rs.Status.Conditions, string(rayv1.RayServiceReady)) || rs.Status.ServiceStatus != rayv1.Running {
		t.Errorf("with endpoints: %+v %q", rs.Status.Conditions, rs.Status.ServiceStatus)
	}
	if c := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.UpgradeInProgress)); c.Status != metav1.ConditionFalse || c.Reason != string(rayv1.NoPendingCluster) {
		t.Errorf("UpgradeInProgress %+v", c)
	}
	rs.Status.PendingServiceStatus.RayClusterName = "svc-b"
	setConditions(rs, "")
	if c := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.UpgradeInProgress)); c.Status != metav1.ConditionTrue || c.Reason != string(rayv1.BothActivePendingClustersExist) {
		t.Errorf("UpgradeInProgress with both clusters %+v", c)
	}
	rs.Status.NumServeEndpoints = 0
	setConditions(rs, "")
	if c := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.RayServiceReady)); c.Status != metav1.ConditionFalse || c.Reason != string(rayv1.ZeroServeEndpoints) || rs.Status.ServiceStatus != rayv1.NotRunning {
		t.Errorf("endpoints gone: Ready %+v, serviceStatus %q", c, rs.Status.ServiceStatus)
	}
}

func TestServeService(t *testing.T) {
	rs := service()
	c, _ := buildCluster(rs, "svc-aaaaa")
	c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "serve", ContainerPort: 8000}, {Name: "serve-grpc", ContainerPort: 9000}, {Name: "dashboard", ContainerPort: 8265}}
	svc := serveService(rs, c)
	if svc.Name != "svc-serve-svc" || svc.Spec.Selector[rayparams.LabelCluster] != "svc-aaaaa" || svc.Spec.Selector[rayparams.LabelServe] != "true" || len(svc.Spec.Ports) != 2 {
		t.Errorf("serve Service %+v", svc)
	}
	rs.Spec.ServeService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "custom", Labels: map[string]string{"x": "y"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"ignored": "yes"}}}
	svc = serveService(rs, c)
	if svc.Name != "custom" || svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Labels["x"] != "y" || svc.Spec.Selector["ignored"] != "" || len(svc.Spec.Ports) != 2 {
		t.Errorf("custom serve Service %+v", svc)
	}
	head := headService(rs, c)
	if head.Name != "svc-head-svc" || head.Labels[rayparams.LabelCluster] != "" || head.Spec.Selector[rayparams.LabelCluster] != "svc-aaaaa" {
		t.Errorf("head Service %+v", head)
	}
}

func TestDeployedConfigs(t *testing.T) {
	var c deployedConfigs
	c.set("rs", "a", "cfg-a")
	c.set("rs", "b", "cfg-b")
	c.set("other", "x", "cfg-x")
	c.keep("rs", "b", "")
	if c.get("rs", "a") != "" || c.get("rs", "b") != "cfg-b" {
		t.Errorf("keep(b): a=%q b=%q", c.get("rs", "a"), c.get("rs", "b"))
	}
	c.keep("rs")
	if c.get("rs", "b") != "" || c.get("other", "x") != "cfg-x" {
		t.Errorf("keep() of rs: b=%q, other's x=%q", c.get("rs", "b"), c.get("other", "x"))
	}
}
