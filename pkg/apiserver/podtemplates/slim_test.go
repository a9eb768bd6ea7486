package podtemplates

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/configs"
)

// TestTemplatesMatchCRDs checks Templates against the Ray CRDs rayctl serves: the same paths, one schema
// for all of them (the one Admission checks every template against), none of the CRDs' CEL rules inside a
// template (Admission does not run them), and none left after Slim.
func TestTemplatesMatchCRDs(t *testing.T) {
	manifests, err := configs.CRDManifests("ray.io")
	if err != nil {
		t.Fatal(err)
	}
	var first *apiextensionsv1.JSONSchemaProps
	seen := 0
	for _, m := range manifests {
		crd, err := configs.DecodeCRD(m)
		if err != nil {
			t.Fatal(err)
		}
		gr := schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
		want := append([]string(nil), Templates[gr]...)
		sort.Strings(want)
		for _, v := range crd.Spec.Versions {
			found := Find(v.Schema.OpenAPIV3Schema)
			var got []string
			for p, s := range found {
				got = append(got, p)
				if first == nil {
					first = s
				} else if !reflect.DeepEqual(first, s) {
					t.Errorf("%s %s: the template at %s differs from the first one", gr, v.Name, p)
				}
				if b, _ := yaml.Marshal(s); strings.Contains(string(b), "x-kubernetes-validations") {
					t.Errorf("%s %s: the template at %s has CEL rules", gr, v.Name, p)
				}
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s: templates at %v, Templates says %v", gr, v.Name, got, want)
			}
		}
		before, _ := yaml.Marshal(crd)
		slimmed := Slim(crd)
		sort.Strings(slimmed)
		if !reflect.DeepEqual(slimmed, want) {
			t.Errorf("%s: Slim replaced %v, want %v", gr, slimmed, want)
		}
		for _, v := range crd.Spec.Versions {
			if left := Find(v.Schema.OpenAPIV3Schema); len(left) > 0 {
				t.Errorf("%s %s: templates left after Slim: %v", gr, v.Name, left)
			}
		}
		after, _ := yaml.Marshal(crd)
		t.Logf("%s: %d kB of YAML, %d kB slim", gr, len(before)/1000, len(after)/1000)
		seen++
	}
	if seen != len(Templates) {
		t.Errorf("%d ray.io CRDs, Templates has %d", seen, len(Templates))
	}
}
