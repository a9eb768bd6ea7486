package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/render"
	"github.com/rayctl/rayctl/pkg/diagnose"
)

// sampleService is configs/samples/rayservice.yaml named name.
func sampleService(t *testing.T, name string) *rayv1.RayService {
	t.Helper()
	var rs rayv1.RayService
	loadSample(t, "rayservice.yaml", &rs)
	rs.Name = name
	return &rs
}

// serviceState is a RayService's status in one line.
func serviceState(rs *rayv1.RayService) string {
	st := rs.Status
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	apps := func(s rayv1.RayServiceStatus) string {
		var out []string
		for n, a := range s.Applications {
			out = append(out, n+"="+a.Status)
		}
		return strings.Join(out, ",")
	}
	return fmt.Sprintf("serviceStatus=%q active=%s[%s] pending=%s[%s] endpoints=%d gen=%d/%d conditions=%v",
		st.ServiceStatus, st.ActiveServiceStatus.RayClusterName, apps(st.ActiveServiceStatus),
		st.PendingServiceStatus.RayClusterName, apps(st.PendingServiceStatus), st.NumServeEndpoints, st.ObservedGeneration, rs.Generation, conds)
}

// waitService waits until cond holds for the RayService and returns it.
func (e *rayEnv) waitService(t *testing.T, name, what string, timeout time.Duration, cond func(rs *rayv1.RayService) bool) *rayv1.RayService {
	t.Helper()
	var got *rayv1.RayService
	e.waitFor(t, timeout, "RayService "+name+": "+what, func(ctx context.Context) (bool, string, error) {
		rs, err := e.ray.RayV1().RayServices(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		got = rs
		return cond(rs), serviceState(rs), nil
	})
	return got
}

// serviceReady is Ready=True with every active application RUNNING, for the current generation.
func serviceReady(rs *rayv1.RayService) bool {
	if !meta.IsStatusConditionTrue(rs.Status.Conditions, string(rayv1.RayServiceReady)) || rs.Status.ObservedGeneration != rs.Generation {
		return false
	}
	apps := rs.Status.ActiveServiceStatus.Applications
	for _, a := range apps {
		if a.Status != rayv1.ApplicationStatusEnum.RUNNING {
			return false
		}
	}
	return len(apps) > 0 && rs.Status.PendingServiceStatus.RayClusterName == ""
}

// eventReasons lists the reasons (with messages) of the events of one object.
func (e *rayEnv) eventReasons(ctx context.Context, kind, name string) ([]corev1.Event, error) {
	l, err := e.in.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, ev := range l.Items {
		if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out, nil
}

// waitEvent waits for an event of the RayService with reason whose message contains text.
func (e *rayEnv) waitEvent(t *testing.T, name, reason, text string) corev1.Event {
	t.Helper()
	return e.waitKindEvent(t, "RayService", name, reason, text)
}

// waitKindEvent waits for an event of the object of kind named name with reason whose message contains text.
func (e *rayEnv) waitKindEvent(t *testing.T, kind, name, reason, text string) corev1.Event {
	t.Helper()
	var got corev1.Event
	e.waitFor(t, time.Minute, fmt.Sprintf("a %s event on %s %s saying %q", reason, kind, name, text), func(ctx context.Context) (bool, string, error) {
		evs, err := e.eventReasons(ctx, kind, name)
		var seen []string
		for _, ev := range evs {
			if ev.Reason == reason && strings.Contains(ev.Message, text) {
				got = ev
				return true, "", nil
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return false, strings.Join(seen, " | "), err
	})
	return got
}

// serviceProxyGet GETs path through the API server's proxy to the Service (services/NAME:PORT/proxy),
// which picks a ready endpoint per request, as a client of the Service would.
func (e *rayEnv) serviceProxyGet(ctx context.Context, svc string, port int, path string) (int, string, error) {
	res := e.in.Client.CoreV1().RESTClient().Get().
		AbsPath(fmt.Sprintf("/api/v1/namespaces/%s/services/%s:%d/proxy%s", e.ns, svc, port, path)).Do(ctx)
	var code int
	res.StatusCode(&code)
	body, err := res.Raw()
	if err != nil && code == 0 {
		return 0, "", err
	}
	return code, string(body), nil
}

var clusterNameRE = regexp.MustCompile(`^rayservice-sample-[a-z0-9]{5}$`)

// (a) The sample RayService, applied with kubectl, becomes Ready on raysim: one RayCluster named and
// labelled as KubeRay names it, the Serve config deployed, both applications RUNNING in the status, the
// head and serve Services, and `kubectl port-forward svc/<name>-serve-svc` reaching each route prefix. A
// serveConfigV2 change is deployed to the same cluster: no new cluster, the new route answers. Deleting
// the RayService deletes its cluster and Services.
func testService(t *testing.T, e *rayEnv) {
	const name = "rayservice-sample"
	started := time.Now()
	_, stderr, err := e.in.Kubectl(e.ctx, "", "apply", "-n", e.ns, "-f", samplePath("rayservice.yaml"))
	must(t, "kubectl apply the sample RayService: "+stderr, err)
	rs := e.waitService(t, name, "Ready with its applications RUNNING", 2*time.Minute, serviceReady)
	t.Logf("Ready after %s: %s", time.Since(started).Round(100*time.Millisecond), serviceState(rs))
	// The head serves first; the worker joins the serve Service once its readiness probe reaches its
	// Serve proxy.
	rs = e.waitService(t, name, "head and worker serving", time.Minute, func(rs *rayv1.RayService) bool {
		return serviceReady(rs) && rs.Status.NumServeEndpoints == 2
	})

	st := rs.Status
	if st.ServiceStatus != rayv1.Running || st.NumServeEndpoints < 1 {
		t.Errorf("serviceStatus %q, numServeEndpoints %d; want Running and at least 1", st.ServiceStatus, st.NumServeEndpoints)
	}
	cluster := st.ActiveServiceStatus.RayClusterName
	if !clusterNameRE.MatchString(cluster) {
		t.Errorf("active cluster %q, want %s-<5 characters>", cluster, name)
	}
	for _, app := range []string{"fruit_app", "math_app"} {
		a, ok := st.ActiveServiceStatus.Applications[app]
		if !ok || a.Status != "RUNNING" {
			t.Errorf("application %s: %+v, want RUNNING", app, a)
		}
		if app == "fruit_app" && a.Deployments["MangoStand"].Status != "HEALTHY" {
			t.Errorf("fruit_app's MangoStand deployment %+v, want HEALTHY", a.Deployments["MangoStand"])
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, string(rayv1.UpgradeInProgress)); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("UpgradeInProgress %+v, want False", c)
	}
	rc, err := e.ray.RayV1().RayClusters(e.ns).Get(e.ctx, cluster, metav1.GetOptions{})
	must(t, "reading the active RayCluster", err)
	if rc.Labels["ray.io/originated-from-crd"] != "RayService" || rc.Labels["ray.io/originated-from-cr-name"] != name ||
		rc.Annotations["ray.io/hash-without-replicas-and-workers-to-delete"] == "" {
		t.Errorf("RayCluster labels %v annotations %v, want KubeRay's origin labels and spec hash", rc.Labels, rc.Annotations)
	}
	if ref := metav1.GetControllerOf(rc); ref == nil || ref.Kind != "RayService" || ref.Name != name {
		t.Errorf("RayCluster controller reference %+v, want the RayService", ref)
	}
	for svc, want := range map[string]string{name + "-head-svc": "", name + "-serve-svc": "true"} {
		s, err := e.in.Client.CoreV1().Services(e.ns).Get(e.ctx, svc, metav1.GetOptions{})
		if err != nil {
			t.Errorf("Service %s: %v", svc, err)
			continue
		}
		if s.Spec.Selector["ray.io/cluster"] != cluster || s.Spec.Selector["ray.io/serve"] != want {
			t.Errorf("Service %s selects %v, want cluster %s (ray.io/serve %q)", svc, s.Spec.Selector, cluster, want)
		}
		if ref := metav1.GetControllerOf(s); ref == nil || ref.Kind != "RayService" {
			t.Errorf("Service %s controller reference %+v, want the RayService", svc, ref)
		}
	}
	for _, reason := range []string{"CreatedRayCluster", "UpdatedServeApplications", "CreatedService", "UpdatedHeadPodServeLabel"} {
		e.waitEvent(t, name, reason, "")
	}

	_, port := portForward(t, e.ctx, e.in, e.ns, nil, "svc/"+name+"-serve-svc", 8000)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for path, want := range map[string]string{
		"/fruit/mango": "raysim serve: app=fruit_app route=/fruit path=/fruit/mango\n",
		"/calc":        "raysim serve: app=math_app route=/calc path=/calc\n",
	} {
		code, body, err := httpGet(e.ctx, base+path)
		if err != nil || code != 200 || body != want {
			t.Errorf("GET %s through port-forward: %d %q (%v), want 200 %q", path, code, body, err, want)
		}
	}
	if code, _, err := httpGet(e.ctx, base+"/unknown"); err != nil || code != 404 {
		t.Errorf("GET /unknown through port-forward: %d (%v), want 404", code, err)
	}
	e.checkServiceTrace(t, name)
	// Diagnose looks at a moving system (the worker's Pod, the last reconcile): wait for a settled verdict.
	var report *diagnose.Report
	e.waitFor(t, time.Minute, "rayctl diagnose of the Ready RayService passing every check", func(context.Context) (bool, string, error) {
		report = e.diagnoseService(t, name)
		return report.Verdict.Cause == "", report.Verdict.Text, nil
	})
	for _, c := range report.Checks {
		if c.ID == "j" && (c.Status != diagnose.Pass || !strings.Contains(c.Summary, "RUNNING")) {
			t.Errorf("diagnose check j: %s %s", c.Status, c.Summary)
		}
	}

	get, stderr, err := e.in.Kubectl(e.ctx, "", "get", "rayservice", name, "-n", e.ns)
	must(t, "kubectl get rayservice: "+stderr, err)
	t.Logf("kubectl get rayservice:\n%s", get)

	// A serveConfigV2 change alone: math_app moves to /math on the same cluster.
	patch := map[string]any{"spec": map[string]any{"serveConfigV2": strings.Replace(rs.Spec.ServeConfigV2, "route_prefix: /calc", "route_prefix: /math", 1)}}
	b, _ := json.Marshal(patch)
	_, err = e.ray.RayV1().RayServices(e.ns).Patch(e.ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	must(t, "patching serveConfigV2", err)
	e.waitFor(t, time.Minute, "/math answering through the serve Service", func(ctx context.Context) (bool, string, error) {
		code, body, err := e.serviceProxyGet(ctx, name+"-serve-svc", 8000, "/math")
		return code == 200 && body == "raysim serve: app=math_app route=/math path=/math\n", fmt.Sprintf("%d %q", code, body), err
	})
	rs = e.waitService(t, name, "Ready for the new generation", time.Minute, serviceReady)
	if rs.Status.ActiveServiceStatus.RayClusterName != cluster {
		t.Errorf("a serveConfigV2 change replaced the cluster: %s → %s", cluster, rs.Status.ActiveServiceStatus.RayClusterName)
	}
	l, err := e.ray.RayV1().RayClusters(e.ns).List(e.ctx, metav1.ListOptions{})
	must(t, "listing RayClusters", err)
	if len(l.Items) != 1 {
		t.Errorf("%d RayClusters after a serveConfigV2 change, want 1", len(l.Items))
	}

	// Deleting the RayService collects what it owns: its RayCluster (and so its Pods) and its Services.
	must(t, "deleting the RayService", e.ray.RayV1().RayServices(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{}))
	e.waitFor(t, time.Minute, "the RayService's clusters, Services and Pods gone", func(ctx context.Context) (bool, string, error) {
		cl, err := e.ray.RayV1().RayClusters(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		svcs, err := e.in.Client.CoreV1().Services(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/originated-from-cr-name=" + name})
		if err != nil {
			return false, "", err
		}
		pods, err := e.in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(cl.Items)+len(svcs.Items)+len(pods.Items) == 0, fmt.Sprintf("%d RayClusters, %d Services, %d Pods", len(cl.Items), len(svcs.Items), len(pods.Items)), nil
	})
}

// (b) A rayClusterConfig change is KubeRay's zero-downtime upgrade: a pending cluster comes up with the
// config, the Services switch to it once its applications run, it becomes the active one, and the old
// cluster is deleted after rayClusterDeletionDelaySeconds. Requests through the serve Service keep
// answering throughout: none fails.
func testServiceUpgrade(t *testing.T, e *rayEnv) {
	const name = "rayservice-sample"
	rs := sampleService(t, name)
	// Short, but long enough for the Endpoints to follow the switched selector on a loaded machine before
	// the old Pods go (KubeRay's 60 s default is there for the same reason, at a cluster's scale).
	rs.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](10)
	_, err := e.ray.RayV1().RayServices(e.ns).Create(e.ctx, rs, metav1.CreateOptions{})
	must(t, "creating the RayService", err)
	rs = e.waitService(t, name, "Ready", 2*time.Minute, serviceReady)
	old := rs.Status.ActiveServiceStatus.RayClusterName

	// Clients of the serve Service, one request after another, until the upgrade is over.
	load := startSteadyLoad(e.ctx, func(ctx context.Context) (string, string) {
		code, body, err := e.serviceProxyGet(ctx, name+"-serve-svc", 8000, "/fruit/mango")
		if err == nil && code == 200 && strings.HasPrefix(body, "raysim serve: app=fruit_app") {
			return "ok", ""
		}
		return "", fmt.Sprintf("%d %q %v", code, body, err)
	})
	ok, failed := &load.ok, &load.failed
	e.waitFor(t, 30*time.Second, "requests answering through the serve Service", func(context.Context) (bool, string, error) {
		return ok.Load() > 0, fmt.Sprintf("%d ok, %d failed", ok.Load(), failed.Load()), nil
	})

	started := time.Now()
	patch := []byte(`{"spec":{"rayClusterConfig":{"rayVersion":"2.46.1"}}}`)
	_, err = e.ray.RayV1().RayServices(e.ns).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, "patching rayClusterConfig", err)
	pendingRS := e.waitService(t, name, "a pending cluster, UpgradeInProgress", time.Minute, func(rs *rayv1.RayService) bool {
		return rs.Status.PendingServiceStatus.RayClusterName != "" && meta.IsStatusConditionTrue(rs.Status.Conditions, string(rayv1.UpgradeInProgress))
	})
	pending := pendingRS.Status.PendingServiceStatus.RayClusterName
	if pendingRS.Status.ActiveServiceStatus.RayClusterName != old || pending == old {
		t.Errorf("during the upgrade: active %s pending %s, want active %s and a new pending one", pendingRS.Status.ActiveServiceStatus.RayClusterName, pending, old)
	}
	rs = e.waitService(t, name, "the pending cluster active", 2*time.Minute, func(rs *rayv1.RayService) bool {
		return serviceReady(rs) && rs.Status.ActiveServiceStatus.RayClusterName == pending &&
			meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.UpgradeInProgress)).Status == metav1.ConditionFalse
	})
	t.Logf("switched to %s after %s", pending, time.Since(started).Round(100*time.Millisecond))
	svc, err := e.in.Client.CoreV1().Services(e.ns).Get(e.ctx, name+"-serve-svc", metav1.GetOptions{})
	must(t, "reading the serve Service", err)
	if svc.Spec.Selector["ray.io/cluster"] != pending {
		t.Errorf("serve Service selects %v, want cluster %s", svc.Spec.Selector, pending)
	}
	e.waitFor(t, time.Minute, "the old cluster "+old+" deleted", func(ctx context.Context) (bool, string, error) {
		_, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, old, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there", client404(err)
	})
	e.waitEvent(t, name, "DeletedRayCluster", old)
	e.waitEvent(t, name, "UpdatedService", pending)
	// A few more requests on the new cluster alone.
	n := ok.Load()
	e.waitFor(t, 30*time.Second, "requests answering after the old cluster went", func(context.Context) (bool, string, error) {
		return ok.Load() > n+5, "", nil
	})
	failures := load.stop()
	t.Logf("requests through the serve Service during the upgrade: %d answered, %d failed", ok.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d requests failed during the upgrade:\n%s", failed.Load(), strings.Join(failures, "\n"))
	}
}

// checkServiceTrace checks that `rayctl trace rayservice/NAME` shows the RayService's hops in order:
// its RayCluster's status write, the Serve config PUT to the dashboard, the applications read back, and
// the status write that reports them RUNNING with serve endpoints.
func (e *rayEnv) checkServiceTrace(t *testing.T, name string) {
	t.Helper()
	steps := e.traceSteps(t, "rayservice/"+name)
	want := []hopPattern{
		{"raycluster", chain.StatusWrite, "RayCluster", ""},
		{"rayservice", chain.DashboardCall, "RayService", "PUT "},
		{"rayservice", chain.DashboardCall, "RayService", "GET "},
		{"rayservice", chain.StatusWrite, "RayService", "RUNNING"},
	}
	if i, lines := matchInOrder(steps, want); i < len(want) {
		t.Errorf("rayctl trace rayservice/%s lacks, in order, %s (matched %d of %d hops); trace:\n%s", name, want[i], i, len(want), lines)
	}
	endpoints := regexp.MustCompile(`numServeEndpoints=[1-9]`)
	found := false
	for i := range steps {
		found = found || steps[i].Hop == chain.StatusWrite && endpoints.MatchString(render.Describe(&steps[i].Event))
	}
	if !found {
		t.Errorf("rayctl trace rayservice/%s has no status write with serve endpoints", name)
	}
	text, err := e.in.Rayctl(e.ctx, "trace", "rayservice/"+name, "-n", e.ns)
	must(t, "rayctl trace", err)
	if !strings.HasPrefix(text, "RayService "+e.ns+"/"+name+": ") || !strings.Contains(text, "dashboard PUT") {
		t.Errorf("rayctl trace text lacks its header or the Serve deploy:\n%s", text)
	}
}

// traceSteps runs `rayctl trace OBJECT -o json` in e's namespace.
func (e *rayEnv) traceSteps(t *testing.T, object string) []chain.Step {
	t.Helper()
	out, err := e.in.Rayctl(e.ctx, "trace", object, "-n", e.ns, "-o", "json")
	must(t, "rayctl trace "+object, err)
	var steps []chain.Step
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		t.Fatalf("rayctl trace %s -o json: %v\n%s", object, err, out)
	}
	return steps
}

// diagnoseService runs `rayctl diagnose rayservice/NAME -o json`.
func (e *rayEnv) diagnoseService(t *testing.T, name string) *diagnose.Report {
	t.Helper()
	out, err := e.in.Rayctl(e.ctx, "diagnose", "rayservice/"+name, "-n", e.ns, "-o", "json")
	must(t, "rayctl diagnose: "+out, err)
	var r diagnose.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("rayctl diagnose -o json: %v\n%s", err, out)
	}
	return &r
}

// client404 hides NotFound, which is what a wait for a deletion hopes for.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// (c) A bad serveConfigV2 is reported, never a crash: YAML that does not parse fails validation (Ready
// False, ValidationFailed, a Warning event, no cluster made); an application Ray's schema refuses (no
// import_path) is a FailedToUpdateServeApplications Warning carrying Ray's message; fixing the config
// makes the RayService Ready.
func testServiceBadConfig(t *testing.T, e *rayEnv) {
	badYAML := sampleService(t, "bad-yaml")
	badYAML.Spec.ServeConfigV2 = "applications:\n  - name: [unclosed\n"
	// An upgrade strategy rayctl does not do (it needs the Gateway API) is a Warning naming it.
	badYAML.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: ptr.To(rayv1.RayServiceNewClusterWithIncrementalUpgrade),
		ClusterUpgradeOptions: &rayv1.ClusterUpgradeOptions{GatewayClassName: "istio", StepSizePercent: ptr.To[int32](10), IntervalSeconds: ptr.To[int32](10)}}
	_, err := e.ray.RayV1().RayServices(e.ns).Create(e.ctx, badYAML, metav1.CreateOptions{})
	must(t, "creating a RayService with invalid YAML", err)
	e.waitService(t, "bad-yaml", "Ready False, ValidationFailed", time.Minute, func(rs *rayv1.RayService) bool {
		c := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.RayServiceReady))
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(rayv1.RayServiceValidationFailed) && strings.Contains(c.Message, "serveConfigV2")
	})
	e.waitEvent(t, "bad-yaml", "InvalidRayServiceSpec", "serveConfigV2")
	e.waitEvent(t, "bad-yaml", "UnsupportedField", "spec.upgradeStrategy.type: NewClusterWithIncrementalUpgrade")
	if r := e.diagnoseService(t, "bad-yaml"); r.Verdict.Cause != diagnose.CauseServiceInvalid || !strings.Contains(r.Verdict.Text, "serveConfigV2") {
		t.Errorf("rayctl diagnose rayservice/bad-yaml: verdict %+v, want %s naming serveConfigV2", r.Verdict, diagnose.CauseServiceInvalid)
	}

	refused := sampleService(t, "refused")
	refused.Spec.RayClusterSpec.WorkerGroupSpecs = nil
	good := refused.Spec.ServeConfigV2
	refused.Spec.ServeConfigV2 = strings.Replace(good, "    import_path: conditional_dag.serve_dag\n", "", 1)
	if refused.Spec.ServeConfigV2 == good {
		t.Fatal("the sample's math_app has no import_path line to remove")
	}
	// Applied with kubectl, with a field of KubeRay v1.7 (which rayctl's Go types, v1.6.2's, lack) in
	// its cluster config: the RayCluster gets it as written, and a Warning says rayctl does not act on it.
	b, err := json.Marshal(refused)
	must(t, "encoding the RayService", err)
	var obj map[string]any
	must(t, "decoding the RayService", json.Unmarshal(b, &obj))
	delete(obj, "status")
	obj["spec"].(map[string]any)["rayClusterConfig"].(map[string]any)["tlsOptions"] = map[string]any{"enabled": true}
	manifest, err := yaml.Marshal(obj)
	must(t, "encoding the manifest", err)
	_, stderr, err := e.in.Kubectl(e.ctx, string(manifest), "apply", "-n", e.ns, "-f", "-")
	must(t, "kubectl apply a RayService whose app lacks an import path: "+stderr, err)
	e.waitEvent(t, "refused", "UnsupportedField", "spec.rayClusterConfig.tlsOptions")
	ev := e.waitEvent(t, "refused", "FailedToUpdateServeApplications", "import_path")
	t.Logf("event: %s", ev.Message)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "Field required") {
		t.Errorf("event %s %q, want a Warning with Ray's message", ev.Type, ev.Message)
	}
	e.waitService(t, "refused", "Ready False saying why", time.Minute, func(rs *rayv1.RayService) bool {
		c := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.RayServiceReady))
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "import_path")
	})
	tls, stderr, err := e.in.Kubectl(e.ctx, "", "get", "raycluster", "-n", e.ns, "-l", "ray.io/originated-from-cr-name=refused", "-o", "jsonpath={.items[0].spec.tlsOptions.enabled}")
	if err != nil || tls != "true" {
		t.Errorf("the RayService's RayCluster spec.tlsOptions.enabled = %q (%v %s), want the RayService's true", tls, err, stderr)
	}
	if r := e.diagnoseService(t, "refused"); r.Verdict.Cause != diagnose.CauseServeNotDeployed || !strings.Contains(r.Verdict.Text, "import_path") {
		t.Errorf("rayctl diagnose rayservice/refused: verdict %+v, want %s naming import_path", r.Verdict, diagnose.CauseServeNotDeployed)
	}
	l, err := e.ray.RayV1().RayClusters(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "ray.io/originated-from-cr-name=bad-yaml"})
	must(t, "listing RayClusters", err)
	if len(l.Items) != 0 {
		t.Errorf("a RayService that failed validation made %d RayClusters", len(l.Items))
	}

	b, _ = json.Marshal(map[string]any{"spec": map[string]any{"serveConfigV2": good}})
	_, err = e.ray.RayV1().RayServices(e.ns).Patch(e.ctx, "refused", types.MergePatchType, b, metav1.PatchOptions{})
	must(t, "fixing serveConfigV2", err)
	e.waitService(t, "refused", "Ready once the config is fixed", time.Minute, serviceReady)
}
