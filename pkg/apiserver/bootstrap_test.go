package apiserver

import (
	"encoding/json"
	"testing"

	"github.com/rayctl/rayctl/configs"
)

// TestCRDName checks that the name read from a manifest's head is the one the whole manifest gives, for
// every CRD rayctl ships, and for manifests in another order (spec before metadata, or compact).
func TestCRDName(t *testing.T) {
	manifests, err := configs.CRDManifests(configs.RayGroup, configs.GatewayGroup)
	if err != nil {
		t.Fatal(err)
	}
	manifests = append(manifests,
		[]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{}}`),
		[]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","spec":{"group":"example.com","names":{"plural":"gadgets"}},"metadata":{"labels":{"a":"b"},"name":"gadgets.example.com"}}`),
	)
	for _, m := range manifests {
		var whole struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(m, &whole); err != nil {
			t.Fatal(err)
		}
		name, err := crdName(m)
		if err != nil || name != whole.Metadata.Name {
			t.Errorf("crdName = %q, %v; want %q", name, err, whole.Metadata.Name)
		}
	}
	for _, bad := range []string{`{"apiVersion":"v1","spec":{}}`, `{"metadata":{}}`, "apiVersion: v1\nmetadata:\n  name: x\n", `{"metadata":`} {
		if name, err := crdName([]byte(bad)); err == nil {
			t.Errorf("crdName(%s) = %q, no error", bad, name)
		}
	}
}
