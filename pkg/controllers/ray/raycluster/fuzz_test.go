package raycluster

import (
	"encoding/json"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rayctl/rayctl/configs"
)

// rayClusterSchema loads the ray.io/v1 RayCluster schema rayctl installs (configs/crds) as the API
// server uses it: a schema validator and the structural schema it prunes with.
func rayClusterSchema(tb testing.TB) (crdvalidation.SchemaValidator, *structuralschema.Structural) {
	tb.Helper()
	b, err := configs.CRDs.ReadFile("crds/ray.io_rayclusters.json")
	if err != nil {
		tb.Fatal(err)
	}
	crd, err := configs.DecodeCRD(b)
	if err != nil {
		tb.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1" || v.Schema == nil {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			tb.Fatal(err)
		}
		validator, _, err := crdvalidation.NewSchemaValidator(&internal)
		if err != nil {
			tb.Fatal(err)
		}
		ss, err := structuralschema.NewStructural(&internal)
		if err != nil {
			tb.Fatal(err)
		}
		return validator, ss
	}
	tb.Fatal("no v1 schema in crds/ray.io_rayclusters.json")
	return nil, nil
}

// FuzzRayCluster decodes arbitrary JSON into a RayCluster and runs it through what the API server and
// this controller do with one: the CRD's schema validation and pruning (on the raw JSON and on the typed
// object), then — when the controller's own check lets it through, as Reconcile does — the head and
// worker Pods, the head Service, the desired replicas and the status' desired resources. None of it may
// panic, whatever the input.
func FuzzRayCluster(f *testing.F) {
	validator, ss := rayClusterSchema(f)
	b, _ := json.Marshal(sampleCluster())
	f.Add(b)
	f.Add([]byte(`{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"x","namespace":"n"},"spec":{"headGroupSpec":{"rayStartParams":{"port":"x","num-cpus":"-1"},"template":{"spec":{"containers":[{"name":"ray-head","resources":{"limits":{"cpu":"-1","nvidia.com/gpu":"1e9"}}}]}}}}}`))
	f.Add([]byte(`{"spec":{"headGroupSpec":{"template":{"spec":{"containers":[{}]}}},"workerGroupSpecs":[{"groupName":"g","replicas":-5,"minReplicas":10,"maxReplicas":2,"numOfHosts":-1,"template":{"spec":{"containers":[{"ports":[{"containerPort":-1}]}]}}}]}}`))
	f.Add([]byte(`{"spec":{"suspend":true,"enableInTreeAutoscaling":true,"headGroupSpec":{"headService":{"spec":{"ports":[{}]}},"resources":{"CPU":"x"},"labels":{"":""},"template":{"metadata":{"labels":{"app.kubernetes.io/name":""}},"spec":{"containers":[{"name":"c","env":[{"name":"RAY_PORT"}],"volumeMounts":[{"name":"shared-mem"}]}],"volumes":[{"name":"shared-mem"}]}}},"workerGroupSpecs":[{"groupName":"a","template":{"spec":{"containers":[{"name":"w"}],"initContainers":[{}]}}},{"groupName":"b","suspend":true,"scaleStrategy":{"workersToDelete":["p"]},"template":{"spec":{"containers":[{"name":"w","resources":{"requests":{"memory":"1e100"}}}]}}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw map[string]any
		if json.Unmarshal(data, &raw) == nil && raw != nil {
			_ = crdvalidation.ValidateCustomResource(field.NewPath(""), raw, validator)
			pruning.PruneWithOptions(raw, ss, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
		}
		var c rayv1.RayCluster
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		c.Namespace, c.UID = "ns", "uid-1"
		if c.Name == "" {
			c.Name = "fuzz"
		}
		if typed, err := json.Marshal(&c); err == nil {
			var u map[string]any
			if json.Unmarshal(typed, &u) == nil {
				_ = crdvalidation.ValidateCustomResource(field.NewPath(""), u, validator)
			}
		}
		if validate(&c.Spec) != nil {
			return
		}
		for _, o := range []BuildOptions{{}, {NoInitContainer: true, NoProbes: true, ClusterDomain: "example.org"}} {
			before := c.DeepCopy()
			_ = HeadPod(&c, o)
			for i := range c.Spec.WorkerGroupSpecs {
				g := &c.Spec.WorkerGroupSpecs[i]
				_ = WorkerPod(&c, g, o)
				_ = DesiredWorkers(g)
			}
			if !equalJSON(before, &c) {
				t.Fatalf("building pods modified the RayCluster")
			}
		}
		_ = HeadService(&c)
		_ = desiredResources(&c)
	})
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
