package fieldwarnings

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestPresent(t *testing.T) {
	spec := map[string]any{}
	if err := yaml.Unmarshal([]byte(`
tlsOptions: {enabled: false}
authOptions: {mode: token, enableK8sTokenAuth: false}
networkPolicy: null
gcsFaultToleranceOptions: {redisAddress: "redis:6379", backend: redis}
headGroupSpec: {template: {}}
workerGroupSpecs:
- groupName: a
- groupName: b
  priority: 3
autoscalerOptions: {args: []}
`), &spec); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range Present(spec, ClusterSpecFields) {
		got = append(got, f.Path)
	}
	// A field set to null is not set; an empty list or false is; a list step finds any item. The redis
	// backend is acted on.
	want := []string{"tlsOptions", "workerGroupSpecs[].priority", "autoscalerOptions.args"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Present = %v, want %v", got, want)
	}

	spec["gcsFaultToleranceOptions"] = map[string]any{"backend": "rocksdb", "storage": map[string]any{"size": "1Gi"}}
	got = nil
	for _, f := range Present(spec, ClusterSpecFields) {
		got = append(got, f.String())
	}
	want = []string{"tlsOptions", "gcsFaultToleranceOptions.backend: rocksdb", "gcsFaultToleranceOptions.storage", "workerGroupSpecs[].priority", "autoscalerOptions.args"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("with RocksDB: Present = %v, want %v", got, want)
	}

	// enableK8sTokenAuth is acted on (Kubernetes-delegated token authentication): no warning.
	spec["authOptions"] = map[string]any{"mode": "token", "enableK8sTokenAuth": true}
	got = nil
	for _, f := range Present(spec, ClusterSpecFields[:1]) {
		got = append(got, f.String())
	}
	if want = []string{"tlsOptions"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("with enableK8sTokenAuth: Present = %v, want %v", got, want)
	}
	// A boolean field's value is matched as fmt prints it: a field warned of when true only.
	got = nil
	for _, f := range Present(spec, []Field{{Path: "authOptions.enableK8sTokenAuth", Value: "false"}, {Path: "authOptions.enableK8sTokenAuth", Value: "true"}}) {
		got = append(got, f.String())
	}
	if want = []string{"authOptions.enableK8sTokenAuth: true"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a boolean's value: Present = %v, want %v", got, want)
	}
}

func TestPresentRayService(t *testing.T) {
	spec := map[string]any{}
	if err := yaml.Unmarshal([]byte(`
upgradeStrategy: {type: NewClusterWithIncrementalUpgrade, clusterUpgradeOptions: {gatewayClassName: istio}}
rayClusterConfig: {headGroupSpec: {}}
`), &spec); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range Present(spec, RayServiceFields) {
		got = append(got, f.String())
	}
	want := []string{"upgradeStrategy.type: NewClusterWithIncrementalUpgrade", "upgradeStrategy.clusterUpgradeOptions"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Present = %v, want %v", got, want)
	}
	spec["upgradeStrategy"] = map[string]any{"type": "NewCluster"}
	if got := Present(spec, RayServiceFields); len(got) != 0 {
		t.Fatalf("NewCluster, which rayctl does, reported: %v", got)
	}
}
