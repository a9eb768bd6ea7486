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
networkPolicy: null
gcsFaultToleranceOptions: {redisAddress: "redis:6379"}
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
	// A field set to null is not set; an empty list or false is; a list step finds any item.
	want := []string{"tlsOptions", "workerGroupSpecs[].priority", "autoscalerOptions.args"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Present = %v, want %v", got, want)
	}
}
