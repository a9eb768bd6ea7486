package e2e

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

var (
	rayClusterGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
	rayJobGVR     = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
)

// rayClusterYAML is a RayCluster as KubeRay's samples write it (ray-cluster.sample.yaml), with labels and
// annotations on the pod templates.
const rayClusterYAML = `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: raycluster-kuberay
  labels:
    team: e2e
spec:
  rayVersion: '2.46.0'
  headGroupSpec:
    serviceType: ClusterIP
    rayStartParams:
      dashboard-host: '0.0.0.0'
      num-cpus: '1'
    template:
      metadata:
        labels:
          app.kubernetes.io/name: e2e-head
        annotations:
          e2e.rayctl.io/note: kept
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            limits:
              cpu: 1
              memory: 2G
            requests:
              cpu: 1
              memory: 2G
          ports:
          - containerPort: 6379
            name: gcs-server
          - containerPort: 8265
            name: dashboard
          - containerPort: 10001
            name: client
  workerGroupSpecs:
  - replicas: 1
    minReplicas: 1
    maxReplicas: 5
    groupName: workergroup
    rayStartParams: {}
    template:
      metadata:
        labels:
          app.kubernetes.io/name: e2e-worker
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
          resources:
            limits:
              cpu: 1
              memory: 1G
            requests:
              cpu: 1
              memory: 1G
`

// parseYAML parses one manifest into an unstructured object.
func parseYAML(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("parsing YAML: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestCRDsEstablished checks that KubeRay's four CRDs are installed and served.
func TestCRDsEstablished(t *testing.T) {
	t.Parallel()
	in := shared(t)
	ctx := testContext(t)
	ext, err := apiextensionsclient.NewForConfig(in.Config)
	must(t, "apiextensions client", err)
	for _, name := range []string{"rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io", "raycronjobs.ray.io"} {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("CRD %s: %v", name, err)
			continue
		}
		conds := map[apiextensionsv1.CustomResourceDefinitionConditionType]apiextensionsv1.ConditionStatus{}
		for _, c := range crd.Status.Conditions {
			conds[c.Type] = c.Status
		}
		if conds[apiextensionsv1.Established] != apiextensionsv1.ConditionTrue || conds[apiextensionsv1.NamesAccepted] != apiextensionsv1.ConditionTrue {
			t.Errorf("CRD %s conditions %v, want Established and NamesAccepted True", name, conds)
		}
		served := false
		for _, v := range crd.Spec.Versions {
			served = served || (v.Name == "v1" && v.Served && v.Storage)
		}
		if !served {
			t.Errorf("CRD %s does not serve and store v1", name)
		}
	}
	dyn, err := dynamic.NewForConfig(quiet(in.Config))
	must(t, "dynamic client", err)
	for _, r := range []string{"rayclusters", "rayjobs", "rayservices", "raycronjobs"} {
		if _, err := dyn.Resource(schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: r}).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list %s: %v", r, err)
		}
	}
}

// TestRayClusterSchema checks that a RayCluster with a wrongly typed field is refused naming the field,
// and that a valid one round-trips with its pod template metadata intact.
func TestRayClusterSchema(t *testing.T) {
	in, ctx, ns := setup(t)
	dyn, err := dynamic.NewForConfig(quiet(in.Config))
	must(t, "dynamic client", err)
	api := dyn.Resource(rayClusterGVR).Namespace(ns)

	t.Run("wrong types", func(t *testing.T) {
		cases := []struct {
			name   string
			mutate func(u *unstructured.Unstructured)
			field  string
		}{
			{"params-list", func(u *unstructured.Unstructured) {
				must(t, "set", unstructured.SetNestedSlice(u.Object, []any{"dashboard-host=0.0.0.0"}, "spec", "headGroupSpec", "rayStartParams"))
			}, "spec.headGroupSpec.rayStartParams"},
			{"replicas-string", func(u *unstructured.Unstructured) {
				groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "workerGroupSpecs")
				groups[0].(map[string]any)["replicas"] = "two"
				must(t, "set", unstructured.SetNestedSlice(u.Object, groups, "spec", "workerGroupSpecs"))
			}, "spec.workerGroupSpecs[0].replicas"},
		}
		for _, c := range cases {
			u := parseYAML(t, rayClusterYAML)
			u.SetName(c.name)
			c.mutate(u)
			_, err := api.Create(ctx, u, metav1.CreateOptions{})
			expectStatus(t, "create RayCluster "+c.name, err, 422, c.field)
			_, err = api.Get(ctx, c.name, metav1.GetOptions{})
			expectStatus(t, "get RayCluster "+c.name+" after a refused create", err, 404)
		}
	})

	t.Run("round trip", func(t *testing.T) {
		u := parseYAML(t, rayClusterYAML)
		u.Object["spec"].(map[string]any)["e2eUnknownField"] = "pruned"
		// In a pod template too: rayctl serves the templates slim and prunes them in admission.
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "headGroupSpec", "template", "spec", "containers")
		containers[0].(map[string]any)["e2eUnknownField"] = "pruned"
		must(t, "set", unstructured.SetNestedSlice(u.Object, containers, "spec", "headGroupSpec", "template", "spec", "containers"))
		created, err := api.Create(ctx, u, metav1.CreateOptions{})
		must(t, "create", err)
		got, err := api.Get(ctx, "raycluster-kuberay", metav1.GetOptions{})
		must(t, "get", err)
		if got.GetUID() != created.GetUID() || got.GetLabels()["team"] != "e2e" {
			t.Errorf("metadata: uid %s/%s labels %v", got.GetUID(), created.GetUID(), got.GetLabels())
		}
		head, _, _ := unstructured.NestedStringMap(got.Object, "spec", "headGroupSpec", "template", "metadata", "labels")
		if head["app.kubernetes.io/name"] != "e2e-head" {
			t.Errorf("head pod template labels = %v (pruned?), want app.kubernetes.io/name=e2e-head", head)
		}
		ann, _, _ := unstructured.NestedStringMap(got.Object, "spec", "headGroupSpec", "template", "metadata", "annotations")
		if ann["e2e.rayctl.io/note"] != "kept" {
			t.Errorf("head pod template annotations = %v (pruned?)", ann)
		}
		groups, _, _ := unstructured.NestedSlice(got.Object, "spec", "workerGroupSpecs")
		if len(groups) != 1 {
			t.Fatalf("workerGroupSpecs = %v", groups)
		}
		worker, _, _ := unstructured.NestedStringMap(groups[0].(map[string]any), "template", "metadata", "labels")
		if worker["app.kubernetes.io/name"] != "e2e-worker" {
			t.Errorf("worker pod template labels = %v (pruned?)", worker)
		}
		if r, _, _ := unstructured.NestedInt64(groups[0].(map[string]any), "replicas"); r != 1 {
			t.Errorf("workerGroupSpecs[0].replicas = %d", r)
		}
		params, _, _ := unstructured.NestedStringMap(got.Object, "spec", "headGroupSpec", "rayStartParams")
		if params["dashboard-host"] != "0.0.0.0" || params["num-cpus"] != "1" {
			t.Errorf("rayStartParams = %v", params)
		}
		image, _, _ := unstructured.NestedSlice(got.Object, "spec", "headGroupSpec", "template", "spec", "containers")
		if len(image) != 1 || image[0].(map[string]any)["image"] != "rayproject/ray:2.46.0" {
			t.Errorf("head containers = %v", image)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "e2eUnknownField"); found {
			t.Errorf("an unknown spec field was stored, want it pruned")
		}
		if _, found := image[0].(map[string]any)["e2eUnknownField"]; found {
			t.Errorf("an unknown field of the head template's container was stored, want it pruned")
		}
		// The PodTemplateSpec schema's defaults apply, as they did when apiextensions had the whole schema.
		if ports, _, _ := unstructured.NestedSlice(image[0].(map[string]any), "ports"); len(ports) != 3 || ports[0].(map[string]any)["protocol"] != "TCP" {
			t.Errorf("head container ports = %v, want protocol TCP defaulted", ports)
		}
		// A status written through /status sticks; spec changes through /status do not. The shared
		// instance's RayCluster controller writes this cluster's status too, so the write is retried on a
		// conflict from a fresh read, as any second writer of a status must.
		var st *unstructured.Unstructured
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			status, err := api.Get(ctx, "raycluster-kuberay", metav1.GetOptions{})
			if err != nil {
				return err
			}
			must(t, "set", unstructured.SetNestedField(status.Object, "ready", "status", "state"))
			must(t, "set", unstructured.SetNestedField(status.Object, "9.9.9", "spec", "rayVersion"))
			st, err = api.UpdateStatus(ctx, status, metav1.UpdateOptions{})
			return err
		})
		must(t, "update status", err)
		if s, _, _ := unstructured.NestedString(st.Object, "status", "state"); s != "ready" {
			t.Errorf("status.state = %q after a status update", s)
		}
		if v, _, _ := unstructured.NestedString(st.Object, "spec", "rayVersion"); v != "2.46.0" {
			t.Errorf("a status update changed spec.rayVersion to %q", v)
		}
		list, err := api.List(ctx, metav1.ListOptions{LabelSelector: "team=e2e"})
		must(t, "list", err)
		if len(list.Items) != 1 {
			t.Errorf("list -l team=e2e: %d items", len(list.Items))
		}
		must(t, "delete", api.Delete(ctx, "raycluster-kuberay", metav1.DeleteOptions{}))
		_, err = api.Get(ctx, "raycluster-kuberay", metav1.GetOptions{})
		expectStatus(t, "get after delete", err, 404)
	})

	t.Run("rayjob", func(t *testing.T) {
		cluster := parseYAML(t, rayClusterYAML)
		spec := cluster.Object["spec"]
		job := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ray.io/v1", "kind": "RayJob",
			"metadata": map[string]any{"name": "rayjob-sample"},
			"spec": map[string]any{
				"entrypoint":               "python -c 'print(1)'",
				"shutdownAfterJobFinishes": true,
				"rayClusterSpec":           spec,
			},
		}}
		_, err := dyn.Resource(rayJobGVR).Namespace(ns).Create(ctx, job, metav1.CreateOptions{})
		must(t, "create RayJob", err)
		got, err := dyn.Resource(rayJobGVR).Namespace(ns).Get(ctx, "rayjob-sample", metav1.GetOptions{})
		must(t, "get RayJob", err)
		if e, _, _ := unstructured.NestedString(got.Object, "spec", "entrypoint"); e != "python -c 'print(1)'" {
			t.Errorf("entrypoint = %q", e)
		}
		labels, _, _ := unstructured.NestedStringMap(got.Object, "spec", "rayClusterSpec", "headGroupSpec", "template", "metadata", "labels")
		if labels["app.kubernetes.io/name"] != "e2e-head" {
			t.Errorf("RayJob head template labels = %v (pruned?)", labels)
		}
		// The shared instance runs the RayJob controller: leave no job behind to start a cluster.
		must(t, "delete RayJob", dyn.Resource(rayJobGVR).Namespace(ns).Delete(ctx, "rayjob-sample", metav1.DeleteOptions{}))
	})
}

// TestCRDsRestoredOnRestart changes a Ray CRD behind rayctl's back (as an older rayctl's CRD would
// differ), restarts the instance, and finds the CRD back as rayctl's manifest has it, Established, with
// custom resources served again.
func TestCRDsRestoredOnRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	in := startOwn(t)
	ext, err := apiextensionsclient.NewForConfig(in.Config)
	must(t, "apiextensions client", err)
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	want, err := crds.Get(ctx, "rayclusters.ray.io", metav1.GetOptions{})
	must(t, "get CRD", err)
	changed := want.DeepCopy()
	changed.Annotations["rayctl.io/manifest-sha256"] = "an-older-manifest"
	changed.Spec.Versions[0].AdditionalPrinterColumns = nil
	_, err = crds.Update(ctx, changed, metav1.UpdateOptions{})
	must(t, "change the CRD", err)

	must(t, "stop", in.Stop())
	must(t, "restart", in.Restart())

	ext, err = apiextensionsclient.NewForConfig(in.Config)
	must(t, "apiextensions client after restart", err)
	got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "rayclusters.ray.io", metav1.GetOptions{})
	must(t, "get CRD after restart", err)
	if a, w := got.Annotations["rayctl.io/manifest-sha256"], want.Annotations["rayctl.io/manifest-sha256"]; a != w {
		t.Errorf("manifest hash after restart %q, want %q", a, w)
	}
	if a, w := len(got.Spec.Versions[0].AdditionalPrinterColumns), len(want.Spec.Versions[0].AdditionalPrinterColumns); a != w || w == 0 {
		t.Errorf("%d printer columns after restart, want %d (the manifest's)", a, w)
	}
	established := false
	for _, c := range got.Status.Conditions {
		established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
	}
	if !established {
		t.Errorf("CRD not Established after restart: %v", got.Status.Conditions)
	}
	dyn, err := dynamic.NewForConfig(quiet(in.Config))
	must(t, "dynamic client", err)
	if _, err := dyn.Resource(rayClusterGVR).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list rayclusters after restart: %v", err)
	}
}
