package apiserver

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/configs"
)

// TestCRDName checks that the name read from a manifest's head is the one the whole manifest gives, for
// every CRD rayctl ships, and for manifests where the head does not tell (JSON, spec before metadata).
func TestCRDName(t *testing.T) {
	manifests, err := configs.CRDManifests(configs.RayGroup, configs.GatewayGroup)
	if err != nil {
		t.Fatal(err)
	}
	manifests = append(manifests,
		[]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{}}`),
		[]byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  group: example.com\nmetadata:\n  name: gadgets.example.com\n"),
	)
	for _, m := range manifests {
		var whole struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(m, &whole); err != nil {
			t.Fatal(err)
		}
		name, err := crdName(m)
		if err != nil || name != whole.Metadata.Name {
			t.Errorf("crdName = %q, %v; want %q", name, err, whole.Metadata.Name)
		}
	}
	if _, err := crdName([]byte("apiVersion: v1\nspec: {}\n")); err == nil {
		t.Error("a manifest without metadata.name: no error")
	}
}
