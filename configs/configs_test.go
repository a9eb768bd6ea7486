package configs_test

import (
	"context"
	"io/fs"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/configs"
)

// TestCRDs checks that the embedded CRDs are the ray.io/v1 kinds and that each one
// passes the API server's CustomResourceDefinition validation (structural schema included).
func TestCRDs(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)

	files, err := fs.Glob(configs.CRDs, "crds/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"RayCluster": false, "RayJob": false, "RayService": false, "RayCronJob": false}
	for _, name := range files {
		data, err := configs.CRDs.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if crd.Spec.Group != "ray.io" || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1" {
			t.Errorf("%s: want group ray.io with the single version v1, got %s %v", name, crd.Spec.Group, crd.Spec.Versions)
		}
		if _, ok := want[crd.Spec.Names.Kind]; !ok {
			t.Errorf("%s: unexpected kind %s", name, crd.Spec.Names.Kind)
		}
		want[crd.Spec.Names.Kind] = true

		scheme.Default(crd)
		internal := &apiextensions.CustomResourceDefinition{}
		if err := scheme.Convert(crd, internal, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if errs := validation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
			t.Errorf("%s: %v", name, errs.ToAggregate())
		}
	}
	for kind, found := range want {
		if !found {
			t.Errorf("no CRD for %s", kind)
		}
	}
}
